"""Winograd's forward pass against kernels transformed once (conv_pack's 'winograd' layout;
libcore/src/cpu/winograd_product.c multiplies by them as they are, in 6 x 16 blocks).

References: float64 convolutions (tests/ops/test_conv.ref_conv, PyTorch for the precision
guard). Winograd rounds at the scale of the transformed values, not of each output, so the
bound is the one tests/ops/test_winograd_precision.py states for the unpacked path: the largest
error within TOL of the output's largest magnitude. Unpacked Winograd (OpenBLAS's batched
product) must agree to the same bound, and NaN and infinities land where it puts them (both
share the input and output transforms: a NaN input spoils the 2x2 tiles whose 4x4 patch holds
it, in both).
"""
import os
import subprocess
import sys

import numpy as np
import pytest

import hl
from hl import ops
from tests.concurrency import run_threads
from tests.ops.test_conv_fused import ref_act
from tests.ops.test_conv import ref_conv

TOL = 4e-6
MIN_TILES = hl._core.lib.HL_WINOGRAD_PACKED_MIN_TILES

# (x shape, C_out, padding): panels of 6 with a short last one (13, 17, 64 = 10 * 6 + 4),
# strips of 16 tiles with a short last one (49, 60, 27), blocks of tiles (784 at 64
# channels: 512 + 272), odd output sizes (half tiles), no padding, ResNet-18's shapes at
# batch 1 (the 7x7 one at 16 tiles, the packed path's threshold).
SHAPES = {
    "resnet_56": ((1, 64, 56, 56), 64, 1),
    "resnet_14": ((1, 256, 14, 14), 256, 1),
    "resnet_7": ((1, 512, 7, 7), 512, 1),
    "short_panel": ((2, 17, 9, 11), 13, 1),
    "odd_outputs": ((3, 20, 5, 5), 17, 1),
    "no_padding": ((2, 16, 10, 9), 16, 0),
    "batch_8_7x7": ((8, 32, 7, 7), 40, 1),
}


def _data(name, seed=0):
    xs, co, pad = SHAPES[name]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(np.float32)
    w = (rng.standard_normal((co, xs[1], 3, 3)) / np.sqrt(9 * xs[1])).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    oh, ow = xs[2] + 2 * pad - 2, xs[3] + 2 * pad - 2
    r = rng.standard_normal((xs[0], co, oh, ow)).astype(np.float32)
    return x, w, b, r, pad


def _packed(x, w, b, r, pad, act="none", alpha=0.0, beta=0.0, pk=None):
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd") if pk is None else pk
    return hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b),
                         None if r is None else hl.tensor(r), padding=pad, act=act,
                         alpha=alpha, beta=beta, packed=pk).numpy()


def _ref(x, w, b, r, pad, act="none", alpha=0.0, beta=0.0):
    y = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), [1, 1],
                 [pad] * 4, None, 1)
    if r is not None:
        y = y + r
    return ref_act(y, act, alpha, beta)


def _tiles(x, pad):
    n, _, h, w = x.shape
    return n * ((h + 2 * pad - 1) // 2) * ((w + 2 * pad - 1) // 2)


@pytest.mark.parametrize("name", sorted(SHAPES))
@pytest.mark.parametrize("act,alpha,beta", [("none", 0.0, 0.0), ("relu", 0.0, 0.0),
                                            ("clip", -0.5, 1.5)])
def test_packed_winograd_matches_float64(name, act, alpha, beta):
    x, w, b, r, pad = _data(name)
    assert _tiles(x, pad) >= MIN_TILES  # every shape here takes the packed path
    for res in (None, r):
        got = _packed(x, w, b, res, pad, act, alpha, beta)
        ref = _ref(x, w, b, res, pad, act, alpha, beta)
        assert got.shape == ref.shape
        assert np.abs(got - ref).max() <= TOL * np.abs(ref).max(), name


def test_packed_winograd_agrees_with_unpacked_winograd_on_nan_and_inf():
    """NaN and infinities in the input and the residual, and weights whose sums overflow:
    NaN, +inf and -inf exactly where unpacked Winograd (HL_WINOGRAD=1, read per call) has
    them, finite values within rounding of it."""
    x, w, b, r, pad = _data("short_panel", seed=3)
    x.flat[::97] = np.nan
    x.flat[5::101] = np.inf
    x.flat[9::103] = -np.inf
    r.flat[::29] = np.nan
    w[0] *= 1e37  # the first output channel's sums overflow
    w[1, 0, 1, 1] = np.float32(3e38)
    old = os.environ.get("HL_WINOGRAD")
    try:
        for act, alpha, beta in [("none", 0, 0), ("relu", 0, 0), ("clip", 0.0, 6.0)]:
            os.environ["HL_WINOGRAD"] = "1"
            # these weights fail the precision guard: both calls take im2col, the same bits
            got = _packed(x, w, b, r, pad, act, alpha, beta)
            want = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), hl.tensor(r),
                                 padding=pad, act=act, alpha=alpha, beta=beta).numpy()
            np.testing.assert_array_equal(got, want)
            # well-scaled weights: both take Winograd
            w2 = w.copy()
            w2[:2] = w[2:4]
            got = _packed(x, w2, b, r, pad, act, alpha, beta)
            want = hl.conv_fused(hl.tensor(x), hl.tensor(w2), hl.tensor(b), hl.tensor(r),
                                 padding=pad, act=act, alpha=alpha, beta=beta).numpy()
            for f in (np.isnan, np.isposinf, np.isneginf):
                np.testing.assert_array_equal(f(got), f(want))
            assert np.isnan(got).any() and np.isfinite(got).any()
            fin = np.isfinite(want)
            np.testing.assert_allclose(got[fin], want[fin], rtol=1e-5, atol=1e-5)
    finally:
        if old is None:
            os.environ.pop("HL_WINOGRAD", None)
        else:
            os.environ["HL_WINOGRAD"] = old


@pytest.mark.parametrize("outlier", [1e3, 1e6, 1e30, np.inf, np.nan])
def test_weights_the_guard_refuses_are_packed_as_nan_and_run_by_im2col(outlier):
    """conv_pack applies Winograd's precision guard once (winograd.c, "Precision"): kernels
    it refuses are packed as NaN, and a call with that pack takes im2col, as an unpacked call
    with those weights does (the same bits), instead of reading the weights on every call."""
    x, w, b, _, pad = _data("short_panel", seed=5)
    w[3, 5, 1, 1] = outlier
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd")
    assert np.isnan(pk.numpy()).all()
    got = _packed(x, w, b, None, pad, "relu", pk=pk)
    want = hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=pad,
                         act="relu").numpy()
    np.testing.assert_array_equal(got, want)
    if np.isfinite(outlier):
        ref = _ref(x, w, b, None, pad, "relu")
        assert np.abs(got - ref).max() <= TOL * np.abs(ref).max()
    # an evenly scaled kernel is admitted
    w = np.full((16, 16, 3, 3), 1.0, np.float32)
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd").numpy()
    assert np.isfinite(pk).all()


def test_packed_winograd_threads_agree():
    """Each output is summed by one thread in a fixed order: 1 and 2 threads, and four Python
    threads at once on one pack, give the same bits."""
    x, w, b, r, pad = _data("resnet_14")
    pk = ops.conv_pack(hl.tensor(w), 1, "winograd")
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = _packed(x, w, b, r, pad, "relu", pk=pk)
        hl.set_num_threads(2)
        two = _packed(x, w, b, r, pad, "relu", pk=pk)
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(one, two)
    outs = run_threads(lambda i: _packed(x, w, b, r, pad, "relu", pk=pk), 4)
    for o in outs:
        np.testing.assert_array_equal(o, one)


def test_portable_product():
    """The portable block (no AVX2 + FMA; HL_CONV_AVX2=0, read once per process, hence the
    subprocess) passes the float64 checks, F(2x2, 3x3)'s here and F(4x4, 3x3)'s
    (test_winograd43.py)."""
    f43 = os.path.join(os.path.dirname(__file__), "test_winograd43.py")
    code = ("import sys; sys.argv = ['x']; import pytest; sys.exit(pytest.main(['-q', '-x', "
            "'-p', 'no:cacheprovider', '-k', 'matches_float64 and clip', __file__, F43]))")
    env = dict(os.environ, HL_CONV_AVX2="0")
    code = code.replace("__file__", repr(__file__)).replace("F43", repr(f43))
    p = subprocess.run([sys.executable, "-c", code],
                       env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
