"""matmul_fused's AVX-512 path (libcore/src/cpu/matmul_fused.c: 12 x 32 tiles over two adjacent
16-column panels, one tile of 6 + 6/4/2 or of 6/4/2 rows for a block's last rows, one-panel
tiles for a lone full panel, the epilogue on 16 lanes) against its AVX2 path and against float64.

The AVX-512 kernels sum each output in the AVX2 kernel's order (k ascending from zero within
each 256-row block of K, then the block added to C) and apply the epilogue with the same
operations (act16 is act_v on sixteen lanes), so the two paths give the same bits. The
AVX2 path runs in a subprocess with HL_CPU_AVX512=0 (read once per process); on a CPU without
AVX-512 both processes run AVX2 and the comparison still holds. (NaN results need only be
NaN on both: see kernel_sets.same_bits.) Shapes reach every tile the
driver picks: M across the 12-row tile and its 6/4/2-row tails and the 144-row block of A, N
as one full panel, a pair, a pair and a lone panel, and with a narrower last panel, K across
the 256-row blocks; every activation, with and without bias and residual, NaN and infinities
in every operand, large values through the GELUs' saturation, one and two threads. The
default process's finite results are also held to float64 (2e-6 of sum |a||b| + 1, as in
test_matmul_fused.py) and its NaN/inf placement to the unfused float64 reference's.
"""
import numpy as np

import hl
from tests.ops import kernel_sets
from tests.ops.test_matmul_fused import ACTS, _close, reference


# (M, K, N): M = 12 q + the rows left (7: 6 + 2, 11: 6 + 6, 130: 6 + 4; 13, 25: 2), 144/150 (a second block of A), 300 (row blocks cut
# between threads); N = 16 (one panel), 17 (one and a narrow one), 32 (a pair), 48 (a pair
# and a lone panel), 100 (three pairs and a narrow panel), 257; K = 1, 255-257, 600.
SHAPES = [(1, 1, 16), (2, 7, 32), (5, 256, 17), (6, 255, 48), (7, 257, 33), (11, 40, 100),
          (12, 600, 32), (13, 64, 64), (18, 300, 80), (23, 129, 257), (25, 513, 48),
          (130, 100, 96), (150, 260, 40), (300, 64, 70)]
# (bias, residual): the epilogue's operands in every combination the kernels branch on
OPERANDS = [(False, False), (True, False), (False, True), (True, True)]


def _inputs(m, k, n, variant):
    """variant 0: standard normal; 1: NaN and infinities in a, the bias and the residual;
    2: a scaled so that outputs reach |x| ~ 1e3 (erf's clamp, gelu_tanh's exp clamp)."""
    rng = np.random.default_rng(m * 10007 + k * 101 + n * 7 + variant)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal((m, n)).astype(np.float32)
    if variant == 1:
        a.flat[::37] = np.nan
        a.flat[5::41] = np.inf
        a.flat[9::43] = -np.inf
        bias.flat[3::11] = np.inf
        r.flat[::29] = np.nan
        r.flat[2::31] = -np.inf
    elif variant == 2:
        a *= 60.0 / np.sqrt(max(k, 1))
    return a, b, bias, r


def _cases():
    for m, k, n in SHAPES:
        for variant in (0, 1, 2):
            for bias_on, res_on in OPERANDS:
                for act, alpha, beta in ACTS:
                    yield m, k, n, variant, bias_on, res_on, act, alpha, beta


def _key(case):
    return "_".join(str(x) for x in case)


def _run(case):
    m, k, n, variant, bias_on, res_on, act, alpha, beta = case
    a, b, bias, r = _inputs(m, k, n, variant)
    packed = hl.ops.gemm_pack_b(hl.tensor(b))
    return hl.matmul_fused(hl.tensor(a), packed, hl.tensor(bias) if bias_on else None,
                           hl.tensor(r) if res_on else None, act=act, alpha=alpha,
                           beta=beta).numpy()


def write_results(path):
    """Every case at one and two threads into the npz at path, with the kernel set used."""
    kernel_sets.save_cases(path, _cases, _key, _run)


def test_avx512_path_gives_the_avx2_paths_bits_and_matches_float64(tmp_path):
    fast, avx2 = kernel_sets.both_sides(tmp_path, "tests.ops.test_matmul_fused_avx512")
    for case in _cases():
        key = _key(case)
        one = kernel_sets.one_result(fast, avx2, key)
        m, k, n, variant, bias_on, res_on, act, alpha, beta = case
        a, b, bias, r = _inputs(m, k, n, variant)
        with np.errstate(all="ignore"):
            want = reference(a, b, bias if bias_on else None, r if res_on else None, act,
                             alpha, beta)
        if variant == 1:  # NaN and infinities where the unfused float64 ops put them
            want32 = want.astype(np.float32)
            assert np.array_equal(np.isnan(one), np.isnan(want32)), key
            assert np.array_equal(np.isposinf(one), np.isposinf(want32)), key
            assert np.array_equal(np.isneginf(one), np.isneginf(want32)), key
        else:
            _close(one, want, a, b, 2e-6)
