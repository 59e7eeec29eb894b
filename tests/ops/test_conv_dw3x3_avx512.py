"""The depthwise 3x3 kernels' sixteen-lane paths (AVX-512: conv_dw3x3_avx512.c's rows, the
blocked kernel's cells of sixteen channels) give the bits of their eight-lane AVX2 paths.

Both sum each output in the same order, and the epilogue computes the same activation lane
for lane, so every output must be equal bit for bit. HL_CPU_AVX512=0 (read once per process,
hence a process for each side: tests/ops/kernel_sets.py) runs the AVX2 kernels, the other
side whatever the CPU has. On a CPU without AVX-512 both sides run AVX2 and the comparison
still holds; the float64 checks of these shapes are in test_conv_packed.py and
test_conv_dw3x3.py, which run the AVX-512 paths where the CPU has them.
"""
import numpy as np

import hl
import hl._core
from tests.ops import kernel_sets

# (x shape, stride, padding): 112x112 and 56x56 planes (rows), widths around multiples of 16
# (masked last vectors, rows narrower than a vector), odd row counts, asymmetric padding;
# small planes with 16, 24, 40 channels (blocked: sixteen-channel groups, then eight, then the
# rows for the rest) and batch 2
CASES = [((1, 4, 112, 112), 1, 1), ((1, 3, 112, 112), 2, 1), ((2, 3, 56, 56), 1, 1),
         ((1, 5, 56, 56), 2, 1), ((1, 2, 9, 17), 1, 1), ((1, 2, 7, 33), 2, 1),
         ((1, 3, 5, 15), 1, 0), ((1, 2, 6, 31), 2, 0), ((1, 2, 11, 50), 1, (0, 1, 2, 0)),
         ((1, 2, 3, 1), 1, 1), ((1, 2, 4, 2), 2, 1), ((1, 2, 40, 64), 2, (1, 0, 0, 1)),
         ((1, 16, 14, 14), 1, 1), ((2, 24, 7, 7), 1, 1), ((1, 40, 28, 28), 2, 1),
         ((1, 19, 13, 10), 1, 1), ((1, 33, 15, 15), 2, 0)]
ACTS = [("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("leaky_relu", 0.1, 0.0),
        ("hard_sigmoid", 0.2, 0.5)]


def outputs():
    """Every case with each activation, with and without a residual, NaN and infinity in the
    input (so padding and non-finite values travel the same way), at 1 and 2 threads."""
    rng = np.random.default_rng(31)
    out = {}
    for i, (xs, stride, padding) in enumerate(CASES):
        c = xs[1]
        x = rng.standard_normal(xs).astype(np.float32)
        x.flat[::97] = np.nan
        x.flat[13::101] = np.inf
        w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
        b = rng.standard_normal(c).astype(np.float32)
        pads = list(padding) if isinstance(padding, tuple) else [padding] * 4
        y0 = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=pads,
                       groups=c).numpy()
        r = rng.standard_normal(y0.shape).astype(np.float32)
        out[f"{i}_plain"] = y0
        for act, alpha, beta in ACTS:
            for res in (None, r):
                for threads in (1, 2):
                    hl.set_num_threads(threads)
                    got = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b),
                                        None if res is None else hl.tensor(res), stride=stride,
                                        padding=pads, groups=c, act=act, alpha=alpha,
                                        beta=beta).numpy()
                    out[f"{i}_{act}_{res is None}_{threads}"] = got
    return out


def write_results(path):
    np.savez(path, kernels=np.array(hl._core.cpu_kernels()), **outputs())


def test_sixteen_lanes_give_the_bits_of_eight(tmp_path):
    fast, avx2 = kernel_sets.both_sides(tmp_path, "tests.ops.test_conv_dw3x3_avx512")
    assert sorted(fast.files) == sorted(avx2.files)
    for k in fast.files:
        if k != "kernels":
            np.testing.assert_array_equal(fast[k], avx2[k], err_msg=k)
