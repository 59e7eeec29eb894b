"""The AVX-512 kernels of the packed convolution products (libcore/src/cpu/conv_packed.c: blocks
of 6 x 32 and 6 x 16; winograd_product.c: two panels over a strip, 12 x 16) give the AVX2
kernels' bits: each output is still one FMA a step of K, k ascending from zero, then the
bias, the residual and the activation (conv_avx512.h's, lane for lane the AVX2 one's), and
a last strip of 1 or 2 columns still sums as the AVX2 tail kernel does (four accumulators,
k mod 4; over two panels at once with AVX-512), so nothing may differ.

The same function (write_results) runs in two processes (tests/ops/kernel_sets.py), one with
HL_CPU_AVX512=0 (the AVX2 kernels; the switch is read once per process), one with the
machine's default (AVX-512 where the CPU has it), and their outputs are compared bit for bit. On a CPU without AVX-512 both run the AVX2 kernels and
the comparison still holds. Each output is also held to a float64 reference in its own
process (the rounding bound of tests/ops/test_conv_packed.py, and test_winograd_packed.py's
for Winograd), so that two equal wrong answers cannot pass.

The cases: every case of test_conv_packed (1x1, the stem, stride-2 phases, gathered 1x1,
grouped, 1-D; tails of rows and columns; K in several blocks) with every activation, with
and without a residual; 1x1 layers over every count of columns from 1 to 70 (each remainder
of the 32-column blocks, the 1- and 2-column tails after them, which the AVX-512 kernels run
over two panels at once); NaN and infinities; both
Winograd layouts with 1 to 5 panels (odd, even, a short last one) and partial strips; one and
two threads.
"""
import numpy as np

import hl
import hl._core
from hl import ops
from tests.ops import kernel_sets
from tests.ops import test_conv_packed as tcp
from tests.ops.test_conv import ref_conv
from tests.ops.test_conv_fused import ACTS


def write_results(path):
    """Every case computed, checked against float64 (the names of those outside the bound in
    `failures`) and saved with the kernel set that ran them into the npz at path."""
    out, failures = {}, []

    def check(name, got, ref, bound):
        out[name] = got
        with np.errstate(invalid="ignore"):
            bad = ~((np.abs(got - ref) <= bound + 1e-30) | (np.isnan(got) & np.isnan(ref)) |
                    (np.isinf(ref) & (got == ref)))
        if bad.any():
            failures.append(name)

    for case in sorted(tcp.CASES):
        x, w, b, stride, padding, groups = tcp._data(case)
        ref0, _ = tcp._reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
        r = np.random.default_rng(1).standard_normal(ref0.shape).astype(np.float32)
        for i, (act, alpha, beta) in enumerate(ACTS):
            for res in (None, r):
                got = tcp._packed(x, w, b, res, stride, padding, groups, act, alpha, beta)
                ref, bound = tcp._reference(x, w, b, res, stride, padding, groups, act, alpha,
                                            beta)
                check(f"{case}/{i}/{res is None}", got, ref, bound)

    # 1x1 layers over 1..70 columns: 13 output channels (two whole panels and a row) or 10 (a
    # pair of panels whose second has 4 rows: the two-panel tail's partial lanes), K in one
    # block (40, 7) and in two (300: the second block adds to the stored sums), a residual
    rng = np.random.default_rng(2)
    for m, k in ((13, 40), (13, 300), (10, 7), (10, 300)):
        w = (rng.standard_normal((m, k, 1, 1)) * 0.2).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        for n in range(1, 71):
            x = rng.standard_normal((1, k, 1, n)).astype(np.float32)
            r = rng.standard_normal((1, m, 1, n)).astype(np.float32)
            got = tcp._packed(x, w, b, r, 1, 0, 1, "leaky_relu", 0.1, 0.0)
            ref, bound = tcp._reference(x, w, b, r, 1, 0, 1, "leaky_relu", 0.1, 0.0)
            check(f"cols/{m}/{k}/{n}", got, ref, bound)

    # NaN and infinities in the input and the residual (float64 puts them where float32 does
    # here: no weight overflows)
    x = rng.standard_normal((2, 37, 5, 9)).astype(np.float32)
    x[0, 3, 1, 2], x[1, 0, 4, 8], x[0, 36, 0, 0] = np.nan, np.inf, -np.inf
    w = rng.standard_normal((20, 37, 1, 1)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    r = rng.standard_normal((2, 20, 5, 9)).astype(np.float32)
    r[1, 5, 2, 3], r[0, 19, 4, 7] = np.nan, -np.inf
    for i, (act, alpha, beta) in enumerate(ACTS):
        got = tcp._packed(x, w, b, r, 1, 0, 1, act, alpha, beta)
        ref, bound = tcp._reference(x, w, b, r, 1, 0, 1, act, alpha, beta)
        check(f"nonfinite/{i}", got, ref, bound)

    # Winograd: C_out of 1..5 panels (whole pairs, an odd one, a short last one), strips of 16
    # tiles with a partial last one, a residual and an activation; float64 within the Winograd
    # tests' bound (the largest error within 4e-6 of the largest magnitude, F(2x2); F(4x4)
    # rounds more: 2e-5)
    for layout, tol in (("winograd", 4e-6), ("winograd43", 2e-5)):
        for co in (6, 12, 13, 17, 24, 30):
            for xs in ((1, 24, 9, 11), (2, 16, 14, 14)):
                x = rng.standard_normal(xs).astype(np.float32)
                w = (rng.standard_normal((co, xs[1], 3, 3)) /
                     np.sqrt(9 * xs[1])).astype(np.float32)
                b = rng.standard_normal(co).astype(np.float32)
                r = rng.standard_normal((xs[0], co, xs[2], xs[3])).astype(np.float32)
                pk = ops.conv_pack(hl.tensor(w), 1, layout)
                got = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), hl.tensor(r),
                                    padding=1, act="relu", packed=pk).numpy()
                ref = np.maximum(ref_conv(x.astype(np.float64), w.astype(np.float64),
                                          b.astype(np.float64), [1, 1], [1, 1, 1, 1], None,
                                          1) + r, 0)
                check(f"{layout}/{co}/{xs}", got, ref, tol * np.abs(ref).max())

    # two threads (each output summed by one thread: the same bits as one)
    before = hl.get_num_threads()
    hl.set_num_threads(2)
    try:
        for case in ("pointwise_wide", "project_deep", "phases_stem", "packed_rows_tail"):
            x, w, b, stride, padding, groups = tcp._data(case)
            got = tcp._packed(x, w, b, None, stride, padding, groups, "relu")
            ref, bound = tcp._reference(x, w, b, None, stride, padding, groups, "relu", 0, 0)
            check(f"threads/{case}", got, ref, bound)
    finally:
        hl.set_num_threads(before)

    np.savez(path, kernels=np.array(hl._core.cpu_kernels()), failures=np.array(failures, dtype=str),
             **{k.replace("/", "|"): v for k, v in out.items()})


def test_avx512_gives_the_avx2_bits(tmp_path):
    module = "tests.ops.test_conv_avx512"
    avx2 = kernel_sets.results(tmp_path / "avx2.npz", module, "write_results", avx512=False)
    default = kernel_sets.results(tmp_path / "default.npz", module, "write_results",
                                  avx512=True)
    assert str(avx2["kernels"]) in ("avx2", "portable")   # HL_CPU_AVX512=0 turned AVX-512 off
    assert str(default["kernels"]) in ("avx512", "avx2", "portable")
    # both processes agree with float64 on every case ...
    assert list(avx2["failures"]) == [] and list(default["failures"]) == [], \
        (list(avx2["failures"]), list(default["failures"]))
    # ... and with each other, bit for bit (NaN where NaN)
    cases = sorted(set(avx2.files) - {"kernels", "failures"})
    assert cases == sorted(set(default.files) - {"kernels", "failures"}) and len(cases) > 600
    differ = [k for k in cases if avx2[k].tobytes() != default[k].tobytes()]
    assert differ == [], differ[:20]
