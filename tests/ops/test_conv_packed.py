"""Convolutions against packed weights (hl.ops.conv_pack, conv_fused(packed=...)): the CPU's
float32 product for inference (libcore/src/cpu/conv_packed.c), and the depthwise 3x3 row
kernel (conv_impl.h) that MobileNet's layers take.

The packed product sums in another order than OpenBLAS, so it is held to float64 references
with a rounding bound, not to the unpacked path's bits: for each output,
|got - ref| <= (K + 2) * 2^-24 * (conv(|x|, |w|) + |b| + |r|), the worst case of a float32
sum of K + 2 terms (K = C_in/g * kh * kw), times the activation's largest slope (1 here).
Adversarial values (NaN, infinities, weights that overflow) must give NaN and infinities
exactly where the float64 reference has them.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors, ops
from tests.concurrency import run_threads
from tests.ops.test_conv import ref_conv
from tests.ops.test_conv_fused import ACTS, ref_act, run_unfused

EPS32 = 2.0 ** -24

# (x shape, w shape, stride, padding, groups): each path of conv_forward_packed and each
# edge of the product's blocks (6 output channels by 16 positions; tails of 1..15 columns,
# 1..5 rows), 1-D and grouped.
CASES = {
    "pointwise": ((2, 8, 20, 20), (12, 8, 1, 1), 1, 0, 1),
    "pointwise_tails": ((3, 17, 7, 7), (13, 17, 1, 1), 1, 0, 1),      # 49 positions, 13 rows
    "pointwise_narrow": ((1, 5, 1, 3), (1, 5, 1, 1), 1, 0, 1),        # 3 positions, 1 row
    "pointwise_wide": ((1, 24, 56, 56), (144, 24, 1, 1), 1, 0, 1),    # MobileNetV2's sizes
    "pointwise_deep": ((1, 320, 7, 7), (64, 320, 1, 1), 1, 0, 1),   # K in 2 blocks
    # the last panel's rows by the 4-row (3 or 4 rows) and 2-row (1 or 2) blocks, whole and
    # masked (9..15 columns) strips
    "rows_tail_3": ((1, 40, 9, 9), (15, 40, 1, 1), 1, 0, 1),
    "rows_tail_4_masked": ((2, 33, 5, 5), (16, 33, 1, 1), 1, 0, 1),
    "rows_tail_2_masked": ((1, 300, 5, 5), (8, 300, 1, 1), 1, 0, 1),   # K in 2 blocks
    # few output channels, weights past L1: strips of columns read in place all the same
    "project_28x28": ((1, 192, 28, 28), (32, 192, 1, 1), 1, 0, 1),
    "project_deep": ((2, 576, 13, 14), (94, 576, 1, 1), 1, 0, 1),   # 3 blocks of K, 16 panels
    "deep_tails": ((2, 600, 5, 6), (11, 600, 1, 1), 1, 0, 1),       # 3 blocks, 14 columns
    # 1 and 2 trailing columns take the turned-around tail kernel (K in 2 blocks, odd kc)
    "tail_1_column": ((2, 301, 7, 7), (7, 301, 1, 1), 1, 0, 1),
    "tail_2_columns": ((1, 301, 3, 6), (13, 301, 1, 1), 1, 0, 1),
    # 3x3 on at most 7 input channels: the stem kernel (cpu/conv_stem.c), columns of 16
    # outputs built in L1: full strips inside the image, strips at the borders, partial ones
    "im2col_3x3": ((2, 7, 9, 11), (11, 7, 3, 3), 1, 1, 1),
    "im2col_stride2": ((3, 5, 15, 13), (10, 5, 3, 3), 2, 1, 1),
    "stem_rgb_s2": ((2, 3, 64, 70), (32, 3, 3, 3), 2, 1, 1),          # MobileNetV2's, smaller
    "stem_rgb_s1": ((1, 3, 20, 50), (13, 3, 3, 3), 1, 1, 1),
    "stem_unpadded": ((1, 2, 9, 40), (5, 2, 3, 3), 2, 0, 1),
    "stem_one_input": ((1, 1, 1, 1), (3, 1, 3, 3), 1, 1, 1),
    "stem_7x7": ((1, 3, 33, 31), (8, 3, 7, 7), 2, 3, 1),
    # rows of more than 8 strips (128 outputs) run in groups of strips: 150 = 128 + 16 + 6
    # and 259 = 128 + 128 + 3 outputs a row, batch 3, 7 output channels (a 1-row panel)
    "stem_wide_rows": ((3, 3, 9, 300), (32, 3, 3, 3), 2, 1, 1),
    "stem_long_rows_s1": ((1, 3, 5, 259), (7, 3, 3, 3), 1, 1, 1),
    "downsample_1x1_s2": ((2, 16, 14, 14), (32, 16, 1, 1), 2, 0, 1),
    "im2col_bands": ((1, 8, 300, 300), (4, 8, 3, 3), 2, 1, 1),        # bands of output rows
    # stride 2 reads its columns from the input's four phases (conv_phases.c): odd sizes,
    # even and odd kernels, a 7x7 stem that spans several blocks of positions
    "phases_5x5_odd": ((2, 4, 12, 9), (7, 4, 5, 5), 2, 2, 1),
    "phases_4x4": ((1, 3, 10, 11), (5, 3, 4, 4), 2, 1, 1),
    "phases_stem": ((1, 3, 64, 60), (13, 3, 7, 7), 2, 3, 1),
    # ResNet's strided 3x3 layers (more than 7 input channels, so not the stem kernel): odd
    # planes, channels no multiple of 8, batch 3, K in 1 and 3 blocks, no padding
    "phases_3x3": ((3, 12, 15, 13), (20, 12, 3, 3), 2, 1, 1),
    "phases_3x3_deep": ((1, 70, 9, 8), (14, 70, 3, 3), 2, 1, 1),
    "phases_3x3_unpadded": ((2, 9, 12, 11), (7, 9, 3, 3), 2, 0, 1),
    # 1x1 layers with a stride gather their columns into the product's blocks (conv_phases.c):
    # odd planes, stride 3, and K in 2 blocks with a 1-column tail (49 positions)
    "gather_1x1_odd": ((3, 13, 15, 11), (10, 13, 1, 1), 2, 0, 1),
    "gather_1x1_s3": ((1, 9, 10, 8), (7, 9, 1, 1), 3, 0, 1),
    "gather_1x1_deep": ((2, 300, 13, 13), (13, 300, 1, 1), 2, 0, 1),
    # rows whose bytes are a multiple of 1024 share 4 or fewer L1 sets: packed blocks, not
    # strips read in place (a 16x16 and a 32x32 plane, few output channels, odd tails)
    "aliased_16x16": ((2, 40, 16, 16), (13, 40, 1, 1), 1, 0, 1),
    "aliased_32x32": ((1, 33, 32, 32), (20, 33, 1, 1), 1, 0, 1),
    # packed row by row: several blocks of positions a sample, batch 3, a partial last strip
    "aliased_64x64_batch3": ((3, 32, 64, 64), (16, 32, 1, 1), 1, 0, 1),
    "packed_rows_tail": ((2, 48, 30, 31), (130, 48, 1, 1), 1, 0, 1),
    # one sample, few output channels from many inputs: summed in two halves of K (an odd
    # K: halves of 129 and 128; 9 positions, one partial strip), and many output channels
    # from few: panels in lanes at two threads and more (HALVES_*, conv_packed.c)
    "halves_odd_k": ((1, 257, 3, 3), (40, 257, 1, 1), 1, 0, 1),
    "halves_7x7_wide": ((1, 960, 7, 7), (320, 960, 1, 1), 1, 0, 1),
    "lanes_14x14": ((1, 64, 14, 14), (384, 64, 1, 1), 1, 0, 1),
    "lanes_7x7": ((1, 160, 7, 7), (970, 160, 1, 1), 1, 0, 1),
    "grouped": ((2, 8, 10, 10), (14, 4, 3, 3), 1, 1, 2),
    "conv1d": ((2, 4, 37), (5, 4, 3), 1, 1, 1),
}


def _data(case, seed=0, scale=1.0):
    xs, ws, stride, padding, groups = CASES[case]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * scale).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    return x, w, b, stride, padding, groups


def _pads(x, padding):
    S = x.ndim - 2
    return [padding] * (2 * S)


def _reference(x, w, b, r, stride, padding, groups, act, alpha, beta):
    """float64 output and its rounding bound."""
    S = x.ndim - 2
    st, pads = list(stride) if isinstance(stride, tuple) else [stride] * S, _pads(x, padding)
    with np.errstate(invalid="ignore", over="ignore"):  # NaN and inf inputs, on purpose
        return _reference_f64(x, w, b, r, st, pads, groups, act, alpha, beta)


def _reference_f64(x, w, b, r, st, pads, groups, act, alpha, beta):
    y = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), st, pads,
                 None, groups)
    mag = ref_conv(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                   np.abs(b).astype(np.float64), st, pads, None, groups)
    if r is not None:
        y = y + r
        mag = mag + np.abs(r)
    K = w.shape[1] * int(np.prod(w.shape[2:]))
    out = ref_act(y, act, alpha, beta)
    # the activation's own float32 roundings (hard_sigmoid: alpha * y, then + beta; the
    # latter's error is relative to the output, ~0.5, not to the small product: the bound
    # alone missed it by 2x at y ~ 0, a case found by the random small planes below)
    return out, (K + 2) * EPS32 * mag + 2 * EPS32 * np.abs(out)


def _packed(x, w, b, r, stride, padding, groups, act="none", alpha=0.0, beta=0.0,
            layout="panels"):
    pk = ops.conv_pack(hl.tensor(w), groups, layout)
    return hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b),
                         None if r is None else hl.tensor(r), stride=stride, padding=padding,
                         groups=groups, act=act, alpha=alpha, beta=beta, packed=pk).numpy()


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("act,alpha,beta", ACTS)
def test_packed_matches_float64(case, act, alpha, beta):
    x, w, b, stride, padding, groups = _data(case)
    ref0, _ = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    r = np.random.default_rng(1).standard_normal(ref0.shape).astype(np.float32)
    for res in (None, r):
        got = _packed(x, w, b, res, stride, padding, groups, act, alpha, beta)
        ref, bound = _reference(x, w, b, res, stride, padding, groups, act, alpha, beta)
        assert got.shape == ref.shape
        err = np.abs(got - ref)
        assert (err <= bound + 1e-30).all(), (case, act, float((err - bound).max()))


def test_portable_block():
    """The portable block (CPUs without AVX2 + FMA; HL_CONV_AVX2=0 forces it, read once per
    process, hence the subprocess) passes the float64 checks above on every case (with
    the clip activations, which exercise the epilogue) and the adversarial values."""
    code = ("import sys; sys.argv = ['x']; import pytest; sys.exit(pytest.main(['-q', '-x', "
            "'-p', 'no:cacheprovider', '-k', '(matches_float64 and clip) or adversarial', __file__]))")
    env = dict(os.environ, HL_CONV_AVX2="0")
    p = subprocess.run([sys.executable, "-c", code.replace("__file__", repr(__file__))],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]


@pytest.mark.parametrize("case", ["pointwise_tails", "im2col_3x3", "tail_2_columns",
                                  "phases_stem", "phases_3x3", "gather_1x1_odd"])
def test_packed_adversarial_values(case):
    """NaN and infinities in the input and the residual, and weights that overflow float32:
    NaN and infinities land exactly where the float64 reference puts them (computed with
    float32's overflow: the reference is the float64 sum rounded to float32)."""
    x, w, b, stride, padding, groups = _data(case, seed=3)
    x = x.copy()
    x.flat[::37] = np.nan
    x.flat[5::41] = np.inf
    x.flat[9::53] = -np.inf
    ref0, _ = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    r = np.random.default_rng(4).standard_normal(ref0.shape).astype(np.float32)
    r.flat[::29] = np.nan
    for act, alpha, beta in ACTS:
        got = _packed(x, w, b, r, stride, padding, groups, act, alpha, beta)
        ref, _ = _reference(x, w, b, r, stride, padding, groups, act, alpha, beta)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
        np.testing.assert_array_equal(np.isposinf(got), np.isposinf(ref))
        np.testing.assert_array_equal(np.isneginf(got), np.isneginf(ref))
    # weights scaled so that the largest output's terms' magnitudes sum to 1e38: values near
    # float32's limit, yet no partial sum overflows in any order, so every output is held
    # to the bound (sums that overflow: test_adversarial_sums_overflow_in_every_order)
    x, w, b, stride, padding, groups = _data(case, seed=5)
    w, b = _scaled_to(1e38, x, w, b, stride, padding, groups)
    got = _packed(x, w, b, None, stride, padding, groups)
    ref, bound = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    assert np.abs(ref).max() > 1e37 and np.isfinite(got).all()
    assert (np.abs(got - ref) <= bound).all()


def _scaled_to(top, x, w, b, stride, padding, groups):
    """w and b scaled so that the largest sum of an output's terms' magnitudes is top (then
    no summation order can overflow below float32's limit)."""
    _, bound = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    K = w.shape[1] * int(np.prod(w.shape[2:]))
    scale = top / (bound / ((K + 2) * EPS32)).max()
    return (w * scale).astype(np.float32), (b * scale).astype(np.float32)


def _overflowing(xs, ws, seed):
    """x, w, b whose every product of an input in the image and a weight is finite (under
    2.3e38), at least 1e38 in magnitude and of one sign per sample (+ in sample 0, - in
    sample 1): every output has 4 or more such terms, so its sum overflows in any order.
    A NaN input in sample 0, and an infinity in each sample of that sample's sign (one of
    the other sign would meet the other terms' overflow as NaN in some orders only)."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(1.0, 1.5, xs).astype(np.float32)
    x[1] = -x[1]
    w = rng.uniform(1e38, 1.5e38, ws).astype(np.float32)
    b = rng.uniform(-1.0, 1.0, ws[0]).astype(np.float32)
    x[0, 0, 0, 5] = np.nan
    x[0, 1, 2, 2], x[1, 0, 2, 4] = np.inf, -np.inf
    return x, w, b


# the kernels a float32 convolution may take that sum the products themselves: the packed
# product (panels: 1x1, im2col, the two-column tail), the unpacked path and the depthwise
# kernels. Not Winograd: it sums other terms (transformed tiles, with differences of the
# weights), which overflow to infinities of both signs first: NaN where these give inf.
OVERFLOW_KERNELS = {
    "packed_pointwise": ((2, 17, 7, 7), (13, 17, 1, 1), 1, 0, 1, "panels"),
    "packed_im2col": ((2, 7, 9, 11), (11, 7, 3, 3), 1, 1, 1, "panels"),
    "packed_tail": ((2, 301, 3, 6), (13, 301, 1, 1), 1, 0, 1, "panels"),
    "packed_phases": ((2, 8, 9, 10), (6, 8, 3, 3), 2, 1, 1, "panels"),
    # stride (2, 1): row 0, which holds the NaN, is read (a stride of 2 across skips it)
    "packed_gather": ((2, 17, 9, 9), (13, 17, 1, 1), (2, 1), 0, 1, "panels"),
    "unpacked": ((2, 8, 9, 10), (6, 8, 3, 3), 2, 1, 1, None),
    "depthwise": ((2, 6, 13, 10), (6, 1, 3, 3), 1, 1, 6, None),
    "depthwise_s2": ((2, 16, 14, 14), (16, 1, 3, 3), 2, 1, 16, None),
}


@pytest.mark.parametrize("kernel", sorted(OVERFLOW_KERNELS))
def test_adversarial_sums_overflow_in_every_order(kernel):
    """Sums that overflow whatever the summation order: each output is +-inf with the
    float64 reference's sign, NaN exactly where the reference is NaN."""
    xs, ws, stride, padding, groups, layout = OVERFLOW_KERNELS[kernel]
    x, w, b = _overflowing(xs, ws, seed=6)
    if layout is None:
        got = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride,
                        padding=padding, groups=groups).numpy()
    else:
        got = _packed(x, w, b, None, stride, padding, groups, layout=layout)
    ref, _ = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    assert np.isnan(ref).any() and (np.abs(ref[~np.isnan(ref)]) > 3.5e38).all()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(got[~np.isnan(ref)], np.sign(ref[~np.isnan(ref)]) * np.inf)


def test_packed_layout():
    """conv_pack's layout, as hl_core.h documents it: panels of PACK_ROWS output channels per
    group, k-major, the last panel padded with zeros."""
    rows = hl._core.lib.HL_CONV_PACK_ROWS
    w = np.arange(2 * 7 * 3 * 2 * 2, dtype=np.float32).reshape(14, 3, 2, 2)
    got = ops.conv_pack(hl.tensor(w), 2).numpy()
    panels = -(-7 // rows)
    assert got.shape == (2 * panels, 12, rows)
    want = np.zeros((2, panels * rows, 12), np.float32)
    want[:, :7] = w.reshape(2, 7, 12)
    want = want.reshape(2, panels, rows, 12).transpose(0, 1, 3, 2).reshape(got.shape)
    np.testing.assert_array_equal(got, want)


# ResNet-18's strided layers at a quarter of their channels, large enough to be split over
# the threads: a 3x3 stride-2 layer (phases) and a 1x1 stride-2 downsample (gathered columns)
THREAD_CASES = {
    "pointwise_wide": CASES["pointwise_wide"],
    "resnet_3x3_s2": ((1, 32, 28, 28), (64, 32, 3, 3), 2, 1, 1),
    "resnet_downsample": ((1, 32, 28, 28), (64, 32, 1, 1), 2, 0, 1),
    # MobileNetV2's 960->160 at 7x7: chunks of panels that read one block of columns packed
    # once for all of them (with a residual), and a 112x112-wide row stride (aliased in L1)
    "mobilenet_7x7_shared_columns": ((1, 960, 7, 7), (160, 960, 1, 1), 1, 0, 1),
    "aliased_rows_chunks": ((1, 16, 64, 64), (100, 16, 1, 1), 1, 0, 1),
    # MobileNetV2's projections, strips read in place by tasks of at least 6 panels (its 28x28
    # one: whole panels over 4 blocks; 14x14 ones: chunks of 6 and 5, of 6, 6 and 4 panels)
    "mobilenet_28x28_projection": ((1, 192, 28, 28), (32, 192, 1, 1), 1, 0, 1),
    "mobilenet_14x14_projection": ((1, 384, 14, 14), (64, 384, 1, 1), 1, 0, 1),
    "mobilenet_14x14_projection_96": ((1, 576, 14, 14), (96, 576, 1, 1), 1, 0, 1),
    # batch 1's few tasks that two threads share evenly run in lanes (MobileNetV2's 112x112
    # projection, its blocks of positions cut to 10, and the 56x56 one's 10 tasks)
    "mobilenet_112x112_projection": ((1, 32, 112, 112), (16, 32, 1, 1), 1, 0, 1),
    "mobilenet_56x56_projection": ((1, 144, 56, 56), (24, 144, 1, 1), 1, 0, 1),
    # the expansions before them: panels in lanes (the 7x7 one packs its columns, once a
    # thread), and the 7x7 block's last projection in halves of K with 54 panels
    "mobilenet_14x14_expansion": ((1, 96, 14, 14), (576, 96, 1, 1), 1, 0, 1),
    "mobilenet_7x7_expansion": ((1, 160, 7, 7), (960, 160, 1, 1), 1, 0, 1),
    "mobilenet_7x7_projection_320": ((1, 960, 7, 7), (320, 960, 1, 1), 1, 0, 1),
    # the stem's rows in groups of strips, and columns packed row by row, at batch 3
    "stem_rows_batch3": ((3, 3, 40, 300), (32, 3, 3, 3), 2, 1, 1),
    "aliased_64x64_batch3": CASES["aliased_64x64_batch3"],
}


@pytest.mark.parametrize("case", sorted(THREAD_CASES))
def test_packed_threads_agree(case):
    """Each output is summed by one thread in a fixed order: 1 and 2 threads, and several
    Python threads at once, give the same bits (with a residual on the strided layers),
    which agree with float64."""
    xs, ws, stride, padding, groups = THREAD_CASES[case]
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.1).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    ref0, _ = _reference(x, w, b, None, stride, padding, groups, "none", 0, 0)
    r = None if case in ("pointwise_wide", "aliased_rows_chunks") else \
        rng.standard_normal(ref0.shape).astype(np.float32)
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = _packed(x, w, b, r, stride, padding, groups, "relu")
        hl.set_num_threads(2)
        two = _packed(x, w, b, r, stride, padding, groups, "relu")
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(one, two)
    ref, bound = _reference(x, w, b, r, stride, padding, groups, "relu", 0, 0)
    assert (np.abs(one - ref) <= bound + 1e-30).all()
    pk = ops.conv_pack(hl.tensor(w))
    xt, wt, bt = hl.tensor(x), hl.tensor(w), hl.tensor(b)
    rt = None if r is None else hl.tensor(r)
    outs = run_threads(lambda i: hl.conv_fused(xt, wt, bt, rt, stride=stride, padding=padding,
                                               act="relu", packed=pk).numpy(), 4)
    for o in outs:
        np.testing.assert_array_equal(o, one)


# (case, way): hl_conv_packed_runs' 0, sums in two halves of K (at any thread count), or 1,
# panels in lanes (at two threads and more)
WAYS = [("mobilenet_14x14_projection", 0), ("mobilenet_7x7_projection_320", 0),
        ("mobilenet_28x28_projection", 0), ("mobilenet_14x14_expansion", 1),
        ("mobilenet_7x7_expansion", 1), ("pointwise_wide", 1)]   # the last: 56x56, 2 blocks


@pytest.mark.parametrize("case,way", WAYS)
def test_packed_ways_for_one_sample(case, way):
    """The ways a product of one sample takes to keep each thread on the channels it
    computed before (halves of K, panels in lanes) run where expected, and give the same bits
    at 1, 2 and 3 threads (the halves are summed alike whoever runs them), within the float64
    bound, with a residual and an activation."""
    xs, ws, stride, padding, groups = THREAD_CASES[case]
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.1).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    r = rng.standard_normal((xs[0], ws[0], *xs[2:])).astype(np.float32)
    prev, outs = hl.get_num_threads(), []
    try:
        for t in (1, 2, 3):
            hl.set_num_threads(t)
            before = hl._core.lib.hl_conv_packed_runs(way)
            outs.append(_packed(x, w, b, r, stride, padding, groups, "clip", 0.0, 6.0))
            ran = hl._core.lib.hl_conv_packed_runs(way) - before
            assert ran == (1 if way == 0 or t > 1 else 0), (case, t, ran)
    finally:
        hl.set_num_threads(prev)
    for o in outs[1:]:
        np.testing.assert_array_equal(o, outs[0])
    ref, bound = _reference(x, w, b, r, stride, padding, groups, "clip", 0.0, 6.0)
    assert (np.abs(outs[0] - ref) <= bound + 1e-30).all()


def test_packed_refusals():
    x = hl.tensor(np.ones((1, 4, 5, 5), np.float32))
    w = hl.tensor(np.ones((6, 4, 3, 3), np.float32))
    pk = ops.conv_pack(w)
    with pytest.raises(errors.ShapeError, match=r"conv_fused: the packed weight must be "
                       r"conv_pack's layout of weight \(6, 4, 3, 3\).* shape \(1, 36, 6\)"):
        hl.conv_fused(x, w, packed=ops.conv_pack(hl.tensor(np.ones((6, 4, 1, 1), np.float32))))
    with pytest.raises(errors.DTypeError, match="conv_fused: packed weights are float32 only"):
        hl.conv_fused(hl.tensor(np.ones((1, 4, 5, 5))), hl.tensor(np.ones((6, 4, 3, 3))),
                      packed=pk)
    with pytest.raises(errors.DTypeError, match="conv_pack"):
        ops.conv_pack(hl.tensor(np.ones((6, 4, 3, 3))))
    with pytest.raises(errors.ValueError, match="conv_pack: groups must be a positive number "
                       "that divides the weight's 6 output channels, got 4"):
        ops.conv_pack(w, 4)
    with pytest.raises(errors.ShapeError, match="conv_pack: expected a weight of shape"):
        ops.conv_pack(hl.tensor(np.ones((6, 4), np.float32)))


@pytest.mark.parametrize("xs,ws,winograd", [((2, 16, 9, 11), (16, 16, 3, 3), True),  # 60 tiles
                                            ((1, 16, 5, 6), (24, 16, 3, 3), False),  # 9: im2col
                                            ((1, 8, 12, 12), (8, 8, 3, 3), False)])  # 8 channels
@pytest.mark.parametrize("act,alpha,beta", [ACTS[0], ACTS[2]])
def test_winograd_packed(xs, ws, winograd, act, alpha, beta):
    """Kernels transformed once ('winograd' layout) match float64 at the Winograd tests'
    tolerance (tests/ops/test_conv_fused.py: 1e-4); a call Winograd does not take runs the
    unpacked path (the same bits), one that it takes multiplies by the packed kernels in
    another order than OpenBLAS (tests/ops/test_winograd_packed.py holds it to rounding)."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    got = _packed(x, w, b, None, 1, 1, 1, act, alpha, beta, layout="winograd")
    plain = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=1, act=act,
                          alpha=alpha, beta=beta).numpy()
    if winograd:
        np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, plain)
    ref, _ = _reference(x, w, b, None, 1, 1, 1, act, alpha, beta)
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4)


def winograd_layout_reference(w):
    """conv_pack's Winograd layout of w (C_out, C_in, 3, 3), from packed_layouts.h's words:
    entry (i, j) of G g G^T for each kernel g, each entry's C_out x C_in matrix cut into
    panels of HL_WINOGRAD_MR output channels (the last shorter), each stored input channel
    by input channel."""
    mr = hl._core.lib.HL_WINOGRAD_MR
    G = np.array([[1, 0, 0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0, 0, 1]])
    U = np.einsum("ia,ocab,jb->ijoc", G, w.astype(np.float64), G)
    flat = [np.concatenate([U[i, j, p:p + mr].T.ravel() for p in range(0, w.shape[0], mr)])
            for i in range(4) for j in range(4)]
    return np.stack(flat).reshape(4, 4, w.shape[0], w.shape[1])


def test_winograd_layout():
    """'winograd' is (4, 4, C_out, C_in) holding G g G^T with G Winograd's F(2x2, 3x3) kernel
    transform, in panels (13 output channels: two whole panels and one of 1)."""
    rng = np.random.default_rng(12)
    w = rng.standard_normal((13, 3, 3, 3)).astype(np.float32)
    got = ops.conv_pack(hl.tensor(w), 1, "winograd").numpy()
    assert got.shape == (4, 4, 13, 3)
    np.testing.assert_allclose(got, winograd_layout_reference(w), rtol=1e-6, atol=1e-6)
    with pytest.raises(errors.ValueError, match="conv_pack: the Winograd layout is for 3x3 "
                       "kernels of one group"):
        ops.conv_pack(hl.tensor(np.ones((4, 2, 1, 1), np.float32)), 1, "winograd")
    with pytest.raises(errors.ValueError, match="conv_pack: layout must be one of"):
        ops.conv_pack(hl.tensor(w), 1, "nchwc")


# ---- depthwise 3x3 -------------------------------------------------------------------------

# small planes at stride 1 take the padded flat loop, larger ones and stride 2 the row loop
# (float32 on an AVX2 + FMA CPU: conv_dw3x3.c; vectors of 8 outputs, 2 rows a pass, masked
# loads at the borders: widths around multiples of 8, odd row counts, wide interiors)
DW = [((2, 6, 13, 10), 1, 1), ((2, 6, 13, 10), 2, 1), ((1, 3, 40, 37), 1, 1), ((1, 4, 1, 1), 1, 1), ((1, 4, 2, 3), 2, 1),
      ((1, 3, 9, 9), 1, 0), ((1, 3, 8, 9), 2, 0), ((1, 32, 112, 112), 2, 1),
      ((1, 5, 7, 7), 1, (0, 1, 1, 0)), ((1, 2, 5, 100), 1, 1), ((1, 2, 7, 35), 2, 1),
      ((1, 3, 16, 16), 2, (1, 0, 0, 1)), ((1, 2, 3, 8), 1, 2),
      # 8 channels or more on planes of up to 32 x 32 padded cells: groups of 8 channels in
      # the lanes (conv_dw3x3_blocked.c), the channels past the last group by the row loop
      ((2, 12, 14, 14), 1, 1), ((1, 16, 7, 7), 1, 1), ((1, 8, 13, 10), 2, 1),
      ((1, 24, 28, 28), 1, 1), ((1, 8, 1, 1), 1, 1), ((1, 8, 2, 3), 2, 1), ((1, 9, 9, 9), 1, 0),
      ((1, 8, 9, 9), 1, (0, 1, 1, 0)), ((1, 16, 16, 16), 2, (1, 0, 0, 1)), ((1, 8, 3, 8), 1, 2),
      ((1, 8, 15, 15), 2, 0)]


@pytest.mark.parametrize("xs,stride,padding", DW)
@pytest.mark.parametrize("act,alpha,beta", [ACTS[0], ACTS[1], ACTS[2], ACTS[4]])
def test_depthwise3x3_matches_float64(xs, stride, padding, act, alpha, beta):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(xs).astype(np.float32)
    c = xs[1]
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    pads = list(padding) if isinstance(padding, tuple) else [padding] * 4
    ref = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                   [stride] * 2, pads, None, c)
    mag = ref_conv(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                   np.abs(b).astype(np.float64), [stride] * 2, pads, None, c)
    got = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=pads,
                        groups=c, act=act, alpha=alpha, beta=beta).numpy()
    ref = ref_act(ref, act, alpha, beta)
    assert (np.abs(got - ref) <= 11 * EPS32 * mag + 1e-30).all()
    # the plain conv takes the same kernel: the fused one equals it and the activation
    plain = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=pads,
                      groups=c).numpy()
    if act == "none":
        np.testing.assert_array_equal(got, plain)


@pytest.mark.parametrize("xs,stride", [((1, 3, 9, 8), 1), ((1, 3, 40, 37), 1), ((1, 3, 9, 8), 2),
                                       ((1, 8, 9, 8), 1), ((1, 16, 9, 8), 2)])
def test_depthwise3x3_pads_with_zeros(xs, stride):
    """Padding is zeros that are multiplied, as ONNX (and im2col) define it: an infinite or
    NaN weight gives NaN where it meets the border, exactly where the float64 reference has
    NaN, in the flat and the row loop alike."""
    rng = np.random.default_rng(8)
    c = xs[1]
    x = rng.standard_normal(xs).astype(np.float32)
    x[0, 1, 3, 4] = np.nan
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    w[0, 0, 0, 0] = np.inf
    w[2, 0, 2, 1] = -np.inf
    b = np.zeros(c, np.float32)
    with np.errstate(invalid="ignore"):
        ref = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                       [stride] * 2, [1] * 4, None, c)
    got = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=1,
                    groups=c).numpy()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-5)


def _check_each_activation(x, w, b, r, stride, pads, groups):
    """conv_fused with residual r and each activation: within the float64 rounding bound, and
    bit for bit the plain conv, add and the activation's op."""
    for act, alpha, beta in ACTS:
        got = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), hl.tensor(r),
                            stride=stride, padding=pads, groups=groups, act=act, alpha=alpha,
                            beta=beta).numpy()
        ref, bound = _reference_f64(x, w, b, r.astype(np.float64), [stride] * 2, pads,
                                    groups, act, alpha, beta)
        assert (np.abs(got - ref) <= bound + 1e-30).all(), act
        want = run_unfused(x, w, b, r, (stride, pads, groups), act, alpha, beta)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 1), (1, (0, 1, 1, 0)), (2, 0)])
def test_depthwise3x3_residual_and_channel_multiplier(stride, padding):
    """Two output channels per input channel, a residual and each activation: within the
    float64 rounding bound, and bit for bit the plain conv, add and the activation's op."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 5, 17, 19)).astype(np.float32)
    w = rng.standard_normal((10, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(10).astype(np.float32)
    pads = list(padding) if isinstance(padding, tuple) else [padding] * 4
    y0 = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=pads,
                   groups=5)
    r = rng.standard_normal(y0.shape).astype(np.float32)
    _check_each_activation(x, w, b, r, stride, pads, 5)


@pytest.mark.parametrize("stride,padding", [(1, 1), (2, 1), (1, (0, 1, 1, 0)), (2, 0)])
def test_depthwise3x3_blocked_residual_and_same_bits_as_the_row_loop(stride, padding):
    """Small planes with 8 channels or more take groups of 8 channels in the lanes, the
    channels past the last group the row loop: both sum each output in the same order, so a
    channel gives the same bits in either (moved from the row loop's slot, the 9th, into a
    group's), and with a residual and each activation the result is within the float64
    rounding bound and bit for bit the plain conv, add and the activation's op."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 9, 11, 13)).astype(np.float32)
    w = rng.standard_normal((9, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(9).astype(np.float32)
    pads = list(padding) if isinstance(padding, tuple) else [padding] * 4
    y0 = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=stride, padding=pads,
                   groups=9).numpy()
    r = rng.standard_normal(y0.shape).astype(np.float32)
    _check_each_activation(x, w, b, r, stride, pads, 9)
    order = np.roll(np.arange(9), 1)   # the row loop's channel 8 becomes the blocked channel 0
    rolled = hl.conv2d(hl.tensor(np.ascontiguousarray(x[:, order])),
                       hl.tensor(np.ascontiguousarray(w[order])), hl.tensor(b[order]),
                       stride=stride, padding=pads, groups=9).numpy()
    np.testing.assert_array_equal(rolled, y0[:, order])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 2), c=st.integers(8, 17), h=st.integers(1, 30), w=st.integers(1, 30),
       stride=st.integers(1, 2), pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
       residual=st.booleans(), act=st.sampled_from(ACTS), seed=st.integers(0, 2**16))
def test_depthwise3x3_any_small_plane(n, c, h, w, stride, pads, residual, act, seed):
    """Random small planes (the blocked kernel's groups of 8 channels and the row loop's rest,
    any padding and stride): within the float64 rounding bound, and bit for bit the plain
    conv, add and activation."""
    if h + pads[0] + pads[2] < 3 or w + pads[1] + pads[3] < 3:
        return   # no output position: conv_fused refuses it as conv does (tested apart)
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    geometry = (stride, list(pads), c)
    y0 = run_unfused(x, wt, b, None, geometry, "none", 0.0, 0.0)
    r = rng.standard_normal(y0.shape).astype(np.float32) if residual else None
    got = hl.conv_fused(hl.tensor(x), hl.tensor(wt), hl.tensor(b),
                        None if r is None else hl.tensor(r), stride=stride, padding=list(pads),
                        groups=c, act=act[0], alpha=act[1], beta=act[2]).numpy()
    np.testing.assert_array_equal(got, run_unfused(x, wt, b, r, geometry, *act))
    ref, bound = _reference_f64(x, wt, b, None if r is None else r.astype(np.float64),
                                [stride] * 2, list(pads), c, *act)
    assert (np.abs(got - ref) <= bound + 1e-30).all()


def test_depthwise3x3_overflow_and_threads():
    """Weights near float32's limit overflow to infinity where float32 sums do; 1 and 2
    OpenMP threads and four Python threads at once give the same bits (each plane is one
    thread's, in a fixed order)."""
    rng = np.random.default_rng(10)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = (rng.standard_normal((64, 1, 3, 3)) * 5e37).astype(np.float32)
    b = np.zeros(64, np.float32)
    got = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=2, padding=1,
                    groups=64).numpy()
    with np.errstate(over="ignore", invalid="ignore"):
        ref, bound = _reference_f64(x, w, b, None, [2, 2], [1] * 4, 64, "none", 0, 0)
    assert np.isinf(got[np.abs(ref) > 4e38]).all()
    # scaled so that no summation order overflows: every output within the bound
    w, b = _scaled_to(1e38, x, w, b, 2, 1, 64)
    got = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=2, padding=1,
                    groups=64).numpy()
    ref, bound = _reference_f64(x, w, b, None, [2, 2], [1] * 4, 64, "none", 0, 0)
    assert np.abs(ref).max() > 1e37 and np.isfinite(got).all()
    assert (np.abs(got - ref) <= bound).all()
    w = rng.standard_normal((64, 1, 3, 3)).astype(np.float32)
    xt, wt, bt = hl.tensor(x), hl.tensor(w), hl.tensor(b)
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = hl.conv_fused(xt, wt, bt, padding=1, groups=64, act="relu").numpy()
        hl.set_num_threads(2)
        two = hl.conv_fused(xt, wt, bt, padding=1, groups=64, act="relu").numpy()
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(one, two)
    outs = [None] * 4

    def work(i):
        outs[i] = hl.conv_fused(xt, wt, bt, padding=1, groups=64, act="relu").numpy()
    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for o in outs:
        np.testing.assert_array_equal(o, one)


@pytest.mark.parametrize("batch", [1, 3, 8])
@pytest.mark.parametrize("case", ["stem_rows", "aliased_rows"])
def test_stem_rows_and_rows_packed_against_torch_and_unfused(case, batch):
    """The stem's rows in groups of strips and columns packed eight rows at a time, at batch
    1, 3 and 8 (several blocks and samples, a partial last strip, a 3x3 stem's rows of 150
    outputs with a residual): PyTorch's float64 convolution within the rounding bound, the
    unfused ops (conv, add, clip) within the same bound, 1 and 2 threads bit for bit."""
    torch = pytest.importorskip("torch")
    xs, ws, stride, padding = {"stem_rows": ((3, 21, 300), (32, 3, 3, 3), 2, 1),
                               "aliased_rows": ((32, 64, 64), (16, 32, 1, 1), 1, 0)}[case]
    rng = np.random.default_rng(batch)
    x = rng.standard_normal((batch,) + xs).astype(np.float32)
    w = (rng.standard_normal(ws) * 0.3).astype(np.float32)
    b = rng.standard_normal(ws[0]).astype(np.float32)
    y64 = torch.nn.functional.conv2d(torch.from_numpy(x).double(), torch.from_numpy(w).double(),
                                     torch.from_numpy(b).double(), stride, padding).numpy()
    r = rng.standard_normal(y64.shape).astype(np.float32)
    want = np.clip(y64 + r, 0.0, 6.0)
    _, bound = _reference(x, w, b, r, stride, padding, 1, "clip", 0.0, 6.0)
    prev = hl.get_num_threads()
    try:
        got = {}
        for t in (1, 2):
            hl.set_num_threads(t)
            got[t] = _packed(x, w, b, r, stride, padding, 1, "clip", 0.0, 6.0)
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(got[1], got[2])
    assert (np.abs(got[1] - want) <= bound + 1e-30).all()
    unfused = run_unfused(x, w, b, r, (stride, padding, 1), "clip", 0.0, 6.0)
    assert (np.abs(got[1] - unfused) <= 2 * bound + 1e-30).all()
