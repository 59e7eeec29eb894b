"""The depthwise 3x3 row kernel's standard planes (libcore/src/cpu/conv_dw3x3.c,
standard_rows): padding 1 at the left, whose first chunk (and, with whole vectors of 8
outputs per row, as MobileNetV2's 112x112 and 56x56 layers, the last) takes its one outside
column as a zero shifted into a vector, and whose border rows are read from a row of zeros.

Each such plane must give the bits of the masked path, which the same plane takes with its
side padding as columns of zeros (padding 0 at the sides: not standard); and lie within the
float64 reference's rounding bound, also with a residual, each activation, odd row counts,
NaN and infinite values at the borders, 1 and 2 threads.
"""
import numpy as np
import pytest

import hl
from tests.ops.test_conv_fused import ACTS
from tests.ops.test_conv_packed import _reference_f64

# (x shape, stride): a last chunk reaching one column past the row (stride 1 with ow = w,
# stride 2 with ow = w / 2, each a multiple of 8), or masked last chunks (MobileNetV2's 56x56
# at stride 2: 28 outputs a row; odd widths); even and odd row counts
STANDARD = [((1, 3, 24, 24), 1), ((2, 2, 9, 32), 1), ((1, 4, 56, 56), 1),
            ((1, 3, 48, 48), 2), ((1, 2, 11, 64), 2), ((2, 2, 112, 112), 2), ((1, 2, 3, 48), 2),
            ((1, 3, 56, 56), 2), ((1, 2, 7, 20), 1), ((1, 2, 9, 29), 1), ((1, 2, 8, 37), 2),
            ((1, 2, 5, 17), 2), ((1, 2, 6, 9), 1),
            # a partial last chunk read plainly (TAIL: its loads reach the next row), batch 2
            # and several planes, so that only the very last row's loads stay masked
            ((1, 3, 9, 40), 2), ((2, 3, 12, 36), 2)]


def _dw(x, w, b, r, stride, act, alpha, beta):
    c = x.shape[1]
    return hl.conv_fused(hl.tensor(x), hl.tensor(w), hl.tensor(b),
                         None if r is None else hl.tensor(r), stride=stride, padding=1,
                         groups=c, act=act, alpha=alpha, beta=beta).numpy()


def _masked_path(x, w, b, r, stride, act, alpha, beta):
    """The same plane with its left and right padding as columns of zeros (padding 0 at the
    sides: the masked path's, each zero multiplied as a padding zero is)."""
    zero = np.zeros(x.shape[:3] + (1,), x.dtype)
    wide = np.concatenate([zero, x, zero], axis=3)
    return hl.conv_fused(hl.tensor(wide), hl.tensor(w), hl.tensor(b),
                         None if r is None else hl.tensor(r), stride=stride,
                         padding=[1, 0, 1, 0], groups=x.shape[1], act=act, alpha=alpha,
                         beta=beta).numpy()


@pytest.mark.parametrize("xs,stride", STANDARD)
@pytest.mark.parametrize("residual", [False, True])
def test_standard_planes_match_the_masked_path_and_float64(xs, stride, residual):
    rng = np.random.default_rng(21)
    c = xs[1]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    oh, ow = (xs[2] - 1) // stride + 1, (xs[3] - 1) // stride + 1
    r = rng.standard_normal((xs[0], c, oh, ow)).astype(np.float32) if residual else None
    for act, alpha, beta in ACTS:
        got = _dw(x, w, b, r, stride, act, alpha, beta)
        assert got.shape == (xs[0], c, oh, ow)
        np.testing.assert_array_equal(got, _masked_path(x, w, b, r, stride, act, alpha, beta))
        ref, bound = _reference_f64(x, w, b, r, [stride] * 2, [1] * 4, c, act, alpha, beta)
        assert (np.abs(got - ref) <= bound + 1e-30).all(), act


@pytest.mark.parametrize("xs,stride", [((1, 3, 24, 24), 1), ((1, 3, 9, 48), 2),
                                       ((1, 3, 10, 28), 2), ((1, 3, 5, 21), 1)])
def test_standard_planes_multiply_their_padding(xs, stride):
    """Infinite weights at every tap and NaN inputs at the corners: NaN wherever a padding
    zero or a NaN meets them, exactly where the float64 reference has NaN (so the shifted-in
    zeros and the zero rows are multiplied, as ONNX's padding is)."""
    rng = np.random.default_rng(22)
    c = xs[1]
    x = rng.standard_normal(xs).astype(np.float32)
    x[0, 0, 0, 0] = x[0, 0, -1, -1] = np.nan
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    w[1] = np.inf
    w[2, 0, 0, 2] = w[2, 0, 2, 0] = -np.inf
    b = np.zeros(c, np.float32)
    got = _dw(x, w, b, None, stride, "none", 0.0, 0.0)
    with np.errstate(invalid="ignore", over="ignore"):
        ref, _ = _reference_f64(x, w, b, None, [stride] * 2, [1] * 4, c, "none", 0, 0)
    assert np.isnan(ref).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
    fin = np.isfinite(ref)
    np.testing.assert_allclose(got[fin], ref[fin], rtol=1e-5, atol=1e-5)
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(got, _masked_path(x, w, b, None, stride, "none", 0, 0))


@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("shape", [(2, 24, 48, 48), (1, 24, 112, 112), (1, 8, 113, 61)])
def test_standard_planes_threads_agree(stride, shape):
    # 3 or 6 chunks a row; one sample's large planes (at two threads with AVX-512, each cut
    # into two bands of rows, one a thread), odd sizes
    rng = np.random.default_rng(23)
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((shape[1], 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(shape[1]).astype(np.float32)
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = _dw(x, w, b, None, stride, "clip", 0.0, 6.0)
        hl.set_num_threads(2)
        two = _dw(x, w, b, None, stride, "clip", 0.0, 6.0)
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("xs", [(1, 3, 10, 56), (2, 2, 7, 40)])
def test_tail_chunks_do_not_read_the_next_row_into_outputs(xs):
    """A partial last chunk (28 outputs a row from 56 columns at stride 2) loads past its
    row, into the next one: NaN and infinity at the start of every row (and none past the
    input) reach only the outputs that read them, as in the masked path and float64."""
    rng = np.random.default_rng(24)
    c = xs[1]
    x = rng.standard_normal(xs).astype(np.float32)
    x[:, :, :, 0] = np.nan
    x[:, :, ::2, 1] = np.inf
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):
        got = _dw(x, w, b, None, 2, "relu", 0.0, 0.0)
        ref, _ = _reference_f64(x, w, b, None, [2, 2], [1] * 4, c, "relu", 0, 0)
        np.testing.assert_array_equal(got, _masked_path(x, w, b, None, 2, "relu", 0, 0))
    np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
    assert np.isfinite(got[..., 2:]).all()   # outputs 0 and 1 read columns 0 and 1
