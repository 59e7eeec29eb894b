"""attention's AVX-512 products (libcore/src/cpu/attention.c: rows512, 6/4/2 query rows x two
adjacent 16-wide panels of packed K or V) against its AVX2 path and against float64.

rows512 sums each column in rows_avx2's order (k ascending from zero) and scales the output
rows the same way, and the softmax between the two products is the same code on both paths,
so the results have the same bits. The AVX2 path runs in a subprocess with HL_CPU_AVX512=0
(read once per process); on a CPU without AVX-512 both processes run AVX2 and the comparison
still holds. NaN results only have to be NaN on both (which NaN operand an instruction
passes on is the compiler's choice of operand order; see test_matmul_fused_avx512.py).
Shapes reach every tile: query rows 1-7 and 13/70 (6-row tiles and their 4/2-row forms, two
query blocks), keys giving an odd and an even number of key panels (1, 16, 17, 33, 48, 128,
200), value widths of one lone panel, a pair, a pair and a lone panel, and narrower last
panels (1, 16, 32, 33, 48, 80); masks with -inf, NaN and +inf, inputs with NaN and inf,
nan_to_zero, merged heads, one and two threads. The default process's results are also held
to test_attention.py's float64 reference and tolerances.
"""
import numpy as np

import hl
from tests.ops import kernel_sets
from tests.ops.test_attention import check, reference


# (B, H, Sq, Sk, D, Dv)
SHAPES = [(1, 1, 1, 1, 1, 1), (1, 2, 2, 16, 9, 16), (2, 1, 3, 17, 4, 32), (1, 1, 4, 33, 8, 33),
          (1, 3, 5, 48, 16, 48), (1, 1, 7, 128, 64, 80), (2, 2, 13, 200, 24, 64),
          (1, 2, 70, 128, 64, 64)]


def _inputs(shape, variant):
    """variant 0: normal values, a -inf mask that hides no row; 1: NaN and inf in q, k and v,
    and a mask with NaN, +inf and fully hidden rows."""
    b, h, sq, sk, d, dv = shape
    rng = np.random.default_rng(sq * 1000 + sk * 10 + dv + variant)
    q = rng.standard_normal((b, h, sq, d)).astype(np.float32)
    k = rng.standard_normal((b, h, sk, d)).astype(np.float32)
    v = rng.standard_normal((b, h, sk, dv)).astype(np.float32)
    mask = np.where(rng.random((b, 1, sq, sk)) < 0.2, -np.inf, 0.0).astype(np.float32)
    mask[..., 0] = 0
    if variant == 1:
        q.flat[7::53] = np.nan
        k.flat[3::97] = np.inf
        v.flat[5::61] = -np.inf
        mask.flat[11::41] = np.nan
        mask.flat[2::59] = np.inf
        mask[..., -1, :] = -np.inf
    return q, k, v, mask


def _cases():
    for shape in SHAPES:
        for variant in (0, 1):
            for masked in (False, True):
                for ntz in (False, True):
                    for merge in (False, True):
                        yield shape, variant, masked, ntz, merge


def _key(case):
    shape, variant, masked, ntz, merge = case
    return "_".join(str(x) for x in (*shape, variant, masked, ntz, merge))


def _run(case):
    shape, variant, masked, ntz, merge = case
    q, k, v, mask = _inputs(shape, variant)
    d = shape[4]
    return hl.ops.attention_forward(hl.tensor(q), hl.tensor(k), hl.tensor(v),
                                    hl.tensor(mask) if masked else None, scale=d ** -0.5,
                                    nan_to_zero=ntz, merge_heads=merge).numpy()


def write_results(path):
    """Every case at one and two threads into the npz at path, with the kernel set used."""
    kernel_sets.save_cases(path, _cases, _key, _run)


def test_avx512_path_gives_the_avx2_paths_bits_and_matches_float64(tmp_path):
    fast, avx2 = kernel_sets.both_sides(tmp_path, "tests.ops.test_attention_avx512")
    for case in _cases():
        key = _key(case)
        one = kernel_sets.one_result(fast, avx2, key)
        shape, variant, masked, ntz, merge = case
        q, k, v, mask = _inputs(shape, variant)
        with np.errstate(all="ignore"):
            want = reference(q, k, v, mask if masked else None, shape[4] ** -0.5, ntz)
        if merge:
            b, h, sq, _, _, dv = shape
            want = want.transpose(0, 2, 1, 3).reshape(b, sq, h * dv)
        if variant == 0:
            check(one, want)
        else:  # NaN where float64 has NaN (inf - inf, NaN rows); the finite values agree
            assert np.array_equal(np.isnan(one), np.isnan(want)), key
            fin = np.isfinite(want)
            np.testing.assert_allclose(one[fin], want[fin], rtol=2e-5, atol=2e-6, err_msg=key)
