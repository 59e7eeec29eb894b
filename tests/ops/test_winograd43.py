"""Winograd F(4x4, 3x3) against kernels transformed once (conv_pack's 'winograd43' layout,
libcore/src/cpu/winograd43.c), for inference.

References: the Toom-Cook construction of the transform matrices, in float64 from its rules
(not from the C code); PyTorch's float64 conv2d for every forward pass; F(2x2, 3x3)'s packed
path and im2col for the calls the precision guard sends away.

Bound. F(4x4, 3x3)'s transforms amplify rounding more than F(2x2, 3x3)'s: on N(0, 1) data the
largest error relative to the output's largest magnitude was 4e-6 to 1.6e-5 (512 channels at
7x7), against 3e-7 to 1.2e-6 for F(2x2, 3x3) (docs/design-notes.md). TOL43 = 4e-5 is that,
with room, for every shape, scale and admitted outlier below.
"""
import math
from fractions import Fraction

import numpy as np
import pytest
import torch

import hl
from hl import errors, ops
from hl.onnx import fuse
from tests.concurrency import run_threads
from tests.ops.test_conv_fused import ref_act

TOL43 = 4e-5
RATIO43 = 12.0  # HL_WINOGRAD43_OUTLIER_RATIO (libcore/src/packed_layouts.h)
POINTS = [Fraction(0), Fraction(1), Fraction(-1), Fraction(2), Fraction(-2)]  # and infinity


def _toom_cook():
    """A^T (4 x 6), G (6 x 3), B^T (6 x 6) of F(4, 3) over POINTS and infinity, exactly."""
    def prod(v):
        return math.prod(v, start=Fraction(1))
    at = [[p ** i for p in POINTS] + [Fraction(int(i == 3))] for i in range(4)]
    g = [[p ** j / prod(p - q for q in POINTS if q != p) for j in range(3)] for p in POINTS]
    g.append([Fraction(0), Fraction(0), Fraction(1)])
    # M(x) = prod (x - p): B^T's row at p holds M(x) / (x - p), at infinity M(x) itself
    def poly_from_roots(roots):
        c = [Fraction(1)]
        for r in roots:
            c = [Fraction(0)] + c
            for k in range(len(c) - 1):
                c[k] -= r * c[k + 1]
        return c  # ascending powers
    bt = [poly_from_roots([q for q in POINTS if q != p]) + [Fraction(0)] for p in POINTS]
    bt.append(poly_from_roots(POINTS))
    return (np.array(at, float), np.array(g, float), np.array(bt, float))


AT, G, BT = _toom_cook()


def test_the_transforms_compute_a_correlation():
    """Y = A^T [(G g) . (B^T d)] is the 1-D correlation of d (6 values) with g (3 taps), and the
    2-D nesting A^T [(G g G^T) . (B^T d B)] A the 3x3 one, in float64."""
    rng = np.random.default_rng(0)
    for _ in range(20):
        d, g = rng.standard_normal(6), rng.standard_normal(3)
        want = np.array([d[i:i + 3] @ g for i in range(4)])
        np.testing.assert_allclose(AT @ ((G @ g) * (BT @ d)), want, rtol=0, atol=1e-12)
        d2, g2 = rng.standard_normal((6, 6)), rng.standard_normal((3, 3))
        want2 = np.array([[(d2[i:i + 3, j:j + 3] * g2).sum() for j in range(4)]
                          for i in range(4)])
        got2 = AT @ ((G @ g2 @ G.T) * (BT @ d2 @ BT.T)) @ AT.T
        np.testing.assert_allclose(got2, want2, rtol=0, atol=1e-12)


def test_packed_kernels_are_g_g_gt_in_panels():
    """conv_pack's 'winograd43' layout is (6, 6, C_out, C_in), entry (i, k) of G g G^T (within
    float32 rounding of the float64 product), in panels of HL_WINOGRAD_MR output channels
    (packed_layouts.h), the last one short."""
    rng = np.random.default_rng(1)
    co, ci, mr = 13, 7, hl._core.lib.HL_WINOGRAD_MR
    w = rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd43").numpy()
    assert pk.shape == (6, 6, co, ci)
    u = np.einsum("ia,oqab,kb->ikoq", G, w.astype(np.float64), G)  # (6, 6, co, ci)
    flat = pk.reshape(36, co * ci)
    for o in range(co):
        p0 = o // mr * mr
        rows = min(mr, co - p0)
        for c in range(ci):
            got = flat[:, p0 * ci + c * rows + (o - p0)]
            np.testing.assert_allclose(got, u[:, :, o, c].reshape(36), rtol=2e-6, atol=1e-7)


def _data(xs, co, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((co, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    return x, w, b


def _run(x, w, b, pad, res=None, act="none", alpha=0.0, beta=0.0, pk=None, layout="winograd43"):
    pk = ops.conv_pack(hl.tensor(w), 1, layout) if pk is None else pk
    return hl.conv_fused(hl.tensor(x), hl.tensor(w), None if b is None else hl.tensor(b),
                         None if res is None else hl.tensor(res), padding=pad, act=act,
                         alpha=alpha, beta=beta, packed=pk).numpy()


def _ref(x, w, b, pad, res=None, act="none", alpha=0.0, beta=0.0):
    y = torch.nn.functional.conv2d(
        torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64)),
        None if b is None else torch.from_numpy(b.astype(np.float64)), padding=pad).numpy()
    return ref_act(y if res is None else y + res, act, alpha, beta)


# (input shape, C_out, padding): odd planes (7x7, 9x13: part tiles on both edges), padding 0
# and 1, channels not multiples of 6 (panels) or 16 (strips), batch 1 and 3, a block of
# several strips, ResNet-18's shapes.
SHAPES = [((1, 17, 7, 7), 19, 1), ((3, 20, 9, 13), 22, 1), ((3, 16, 9, 13), 17, 0),
          ((1, 23, 7, 7), 16, 0), ((3, 33, 30, 31), 38, 1), ((1, 64, 56, 56), 64, 1),
          ((1, 256, 14, 14), 256, 1), ((2, 512, 7, 7), 512, 1), ((3, 128, 28, 28), 128, 1)]


@pytest.mark.parametrize("xs,co,pad", SHAPES)
@pytest.mark.parametrize("act,alpha,beta", [("none", 0.0, 0.0), ("relu", 0.0, 0.0),
                                            ("clip", -0.5, 1.5)])
def test_matches_float64(xs, co, pad, act, alpha, beta):
    x, w, b = _data(xs, co)
    oh, ow = xs[2] + 2 * pad - 2, xs[3] + 2 * pad - 2
    r = np.random.default_rng(7).standard_normal((xs[0], co, oh, ow)).astype(np.float32)
    for bias, res in ((b, None), (None, r)):
        got = _run(x, w, bias, pad, res, act, alpha, beta)
        ref = _ref(x, w, bias, pad, res, act, alpha, beta)
        scale = np.abs(_ref(x, w, bias, pad, res)).max()  # before the activation's clipping
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= TOL43 * scale, (xs, co, pad)


@pytest.mark.parametrize("case", ["scale_1e30", "scale_1e-30", "mixed_channels", "positive",
                                  "outlier_within_ratio"])
def test_adversarial_data_stays_within_the_bound(case):
    """Large and tiny weights (the error scales with them), input channels of magnitudes
    1e-3 to 1e3 side by side, all-positive data (no cancellation to hide behind), and one
    weight just inside the outlier ratio that meets only zeros (its exact contribution is 0:
    what the transforms add of it is pure rounding)."""
    rng = np.random.default_rng(3)
    x, w, b = _data((2, 24, 13, 11), 24, seed=3)
    if case == "scale_1e30":
        w *= np.float32(1e30)
        b *= np.float32(1e30)
    elif case == "scale_1e-30":
        w *= np.float32(1e-30)
        b *= np.float32(1e-30)
    elif case == "mixed_channels":
        x *= (10.0 ** rng.uniform(-3, 3, (1, 24, 1, 1))).astype(np.float32)
    elif case == "positive":
        x, w, b = np.abs(x), np.abs(w), np.abs(b)
    else:
        rms = np.sqrt((w.astype(np.float64) ** 2).mean())
        w[3, 5, 1, 1] = np.float32(0.95 * RATIO43 * rms)
        x[:, 5] = 0
    assert not np.isnan(ops.conv_pack(hl.tensor(w), 1, "winograd43").numpy()).any()
    got, ref = _run(x, w, b, 1), _ref(x, w, b, 1)
    assert np.abs(got - ref).max() <= TOL43 * np.abs(ref).max(), case


@pytest.mark.parametrize("outlier", [1.2 * RATIO43, 1e3, 1e30, np.inf, np.nan])
def test_weights_the_guard_refuses_are_packed_as_nan_and_run_unpacked(outlier):
    """conv_pack applies the tighter F(4x4, 3x3) guard once: a kernel with a weight beyond
    RATIO43 times the RMS is packed as NaN and the call takes the unpacked paths (the same
    bits as without a pack); hl.onnx then packs F(2x2, 3x3), whose guard is looser."""
    x, w, b = _data((2, 16, 9, 9), 16, seed=5)
    rms = np.sqrt((w.astype(np.float64) ** 2).mean())
    w[3, 5, 1, 1] = outlier * rms if outlier == 1.2 * RATIO43 else outlier
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd43")
    assert np.isnan(pk.numpy()).all()
    got = _run(x, w, b, 1, act="relu", pk=pk)
    want = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=1,
                         act="relu").numpy()
    np.testing.assert_array_equal(got, want)
    if outlier == 1.2 * RATIO43:  # F(2x2, 3x3) admits it
        assert np.isfinite(ops.conv_pack(hl.tensor(w), 1, "winograd").numpy()).all()


@pytest.mark.parametrize("xs,co", [((2, 40, 23, 21), 44), ((3, 128, 28, 28), 128),
                                   ((1, 64, 56, 56), 64), ((4, 24, 30, 30), 20)])
def test_threads_agree_bitwise(xs, co):
    """Each output is summed by one thread in a fixed order: 1, 2 and 3 threads, and four
    Python threads at once on one pack, give the same bits. The second shape has blocks of 128
    tiles over few tiles per row (each thread's output work then outgrows its input work: a
    buffer sized for the input side alone let the threads overwrite each other's). The last
    two have small kernels and tiles enough that with 2 and 3 threads each block of tiles
    goes through all three steps on one thread (winograd43.c, blocks_per_thread: 13 strips,
    the last of 4 tiles; 64 strips in blocks that straddle samples); one thread runs the
    steps one after another, split as the other shapes are."""
    x, w, b = _data(xs, co, seed=2)
    r = np.random.default_rng(4).standard_normal((xs[0], co, xs[2], xs[3])).astype(np.float32)
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd43")
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = _run(x, w, b, 1, res=r, act="relu", pk=pk)
        for n in (2, 3):
            hl.set_num_threads(n)
            np.testing.assert_array_equal(_run(x, w, b, 1, res=r, act="relu", pk=pk), one)
        hl.set_num_threads(2)
        for o in run_threads(lambda i: _run(x, w, b, 1, res=r, act="relu", pk=pk), 4):
            np.testing.assert_array_equal(o, one)
    finally:
        hl.set_num_threads(prev)
    ref = _ref(x, w, b, 1, res=r, act="relu")
    assert np.abs(one - ref).max() <= TOL43 * np.abs(_ref(x, w, b, 1, res=r)).max()


def test_layout_errors_name_the_op_and_shapes():
    w = hl.tensor(np.ones((16, 16, 3, 3), np.float32))
    with pytest.raises(errors.ValueError, match="conv_pack: the Winograd layout is for 3x3"):
        ops.conv_pack(hl.tensor(np.ones((16, 16, 5, 5), np.float32)), 1, "winograd43")
    with pytest.raises(errors.ValueError, match="winograd43"):
        ops.conv_pack(w, 1, "winograd44")
    x = hl.tensor(np.ones((1, 16, 9, 9), np.float32))
    bad = hl.tensor(np.ones((6, 6, 16, 15), np.float32))
    with pytest.raises(errors.ShapeError, match=r"conv_fused: the packed weight .*\(6, 6, 16, 16\)"):
        hl.conv_fused(x, w, padding=1, packed=bad)


@pytest.mark.parametrize("n,oh,ow,want", [
    (1, 56, 56, "winograd43"), (1, 28, 28, "winograd43"), (1, 14, 14, "winograd43"),
    (1, 7, 7, "winograd"), (2, 7, 7, "winograd"), (4, 7, 7, "winograd43"),
    (8, 7, 7, "winograd43"), (1, 5, 5, None), (1, 9, 9, "winograd")])
def test_layout_choice_counts_strips(n, oh, ow, want):
    """hl.onnx's choice (fuse.winograd_layout): F(4x4, 3x3) where 36 products per strip of
    its tiles cost less than 16 per strip of F(2x2, 3x3)'s; none below
    HL_WINOGRAD_PACKED_MIN_TILES 2x2 tiles."""
    assert fuse.winograd_layout(n, oh, ow) == want


def test_weights_near_float32s_limit_are_refused():
    """Evenly scaled weights whose largest passes HL_WINOGRAD43_MOST (5e36) would overflow in
    G g G^T's sums: packed as NaN (the call runs unpacked, finite); below it, admitted."""
    x, w, b = _data((1, 16, 9, 9), 16, seed=6)
    x *= np.float32(1e-3)  # outputs well inside float32's range
    w /= np.abs(w).max()
    for scale, refused in ((1e37, True), (4e36, False)):
        ws = (w * np.float32(scale)).astype(np.float32)
        pk = ops.conv_pack(hl.tensor(ws), 1, "winograd43")
        assert np.isnan(pk.numpy()).all() == refused
        got, ref = _run(x, ws, None, 1, pk=pk), _ref(x, ws, None, 1)
        assert np.isfinite(got).all()
        assert np.abs(got - ref).max() <= TOL43 * np.abs(ref).max()
