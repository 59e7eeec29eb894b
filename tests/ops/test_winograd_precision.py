"""The Winograd path's precision guard (libcore/src/cpu/winograd.c, "Precision"): whatever
the (finite) weights, a float32 3x3 convolution stays within float32 rounding of PyTorch's
float64 result, measured against the output's scale. Before the guard, one weight of 1e3 that
meets only zeros made a relative error of 1e-5, 1e6 made 1e-2, 1e30 made garbage."""
import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import hl

C = 24  # >= 16 channels on both sides: the Winograd path applies
TOL = 4e-6  # im2col reaches ~5e-7 here; a few float32 roundings of the output scale


def _inputs(seed, outlier, tap):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, C, 12, 12)).astype(np.float32)
    w = rng.standard_normal((C, C, 3, 3)).astype(np.float32)
    if outlier is not None:
        co, ci = 3, 5
        w[co, ci, tap // 3, tap % 3] = outlier
        # the outlier meets only zeros: channel ci is zero wherever tap (ty, tx) reads it
        ty, tx = tap // 3, tap % 3
        mask = np.zeros((12, 12), bool)
        for oy in range(12):
            for ox in range(12):
                iy, ix = oy - 1 + ty, ox - 1 + tx
                if 0 <= iy < 12 and 0 <= ix < 12:
                    mask[iy, ix] = True
        x[:, ci][:, mask] = 0
    return x, w


def _relative_error(got, x, w, transposed=False):
    x64, w64 = torch.from_numpy(x.astype(np.float64)), torch.from_numpy(w.astype(np.float64))
    ref = (torch.nn.functional.conv_transpose2d(x64, w64, padding=1) if transposed else
           torch.nn.functional.conv2d(x64, w64, padding=1)).numpy()
    return np.abs(got - ref).max() / np.abs(ref).max()


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2 ** 16), exponent=st.floats(0, 38), sign=st.sampled_from([-1, 1]),
       tap=st.integers(0, 8))
def test_forward_within_float32_rounding_for_any_finite_weight(seed, exponent, sign, tap):
    outlier = np.float32(sign * 10.0 ** exponent)
    x, w = _inputs(seed, outlier if np.isfinite(outlier) else np.float32(3e38), tap)
    y = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    assert _relative_error(y, x, w) < TOL


@pytest.mark.parametrize("outlier", [None, 20.0, 1e3, 1e6, 1e30])
def test_grad_input_within_float32_rounding(outlier):
    x, w = _inputs(1, outlier, 4)
    dy = x  # grad_input is the transposed convolution of dy by the same weights
    dx = hl.ops.conv2d_grad_input(hl.tensor(dy), hl.tensor(w), (2, C, 12, 12), padding=1).numpy()
    assert _relative_error(dx, dy, w, transposed=True) < TOL


@pytest.mark.parametrize("outlier", [1e3, 1e6, 1e30])
def test_reported_cases(outlier):
    x, w = _inputs(0, outlier, 0)
    y = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    assert _relative_error(y, x, w) < TOL


def test_well_scaled_weights_keep_the_winograd_path(monkeypatch):
    """The guard must not send ordinary layers to im2col: with Gaussian weights the result
    differs (in rounding) from im2col's, with an outlier it is im2col's, bit for bit."""
    x, w = _inputs(2, None, 0)
    y = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    w_out = w.copy()
    w_out[0, 0, 1, 1] = 1e4
    y_out = hl.conv2d(hl.tensor(x), hl.tensor(w_out), padding=1).numpy()
    monkeypatch.setenv("HL_WINOGRAD", "0")
    y_im2col = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    y_out_im2col = hl.conv2d(hl.tensor(x), hl.tensor(w_out), padding=1).numpy()
    assert not np.array_equal(y, y_im2col)  # Winograd taken
    assert np.array_equal(y_out, y_out_im2col)  # im2col taken
    assert _relative_error(y, x, w) < TOL


@pytest.mark.parametrize("bad", [np.inf, -np.inf, np.nan])
def test_non_finite_weights_take_im2col(bad, monkeypatch):
    x, w = _inputs(3, None, 0)
    w[1, 1, 0, 0] = bad
    y = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    monkeypatch.setenv("HL_WINOGRAD", "0")
    y_ref = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy()
    np.testing.assert_array_equal(y, y_ref)  # NaN where im2col has NaN, nowhere else


@pytest.mark.parametrize("where", ["first", "body", "tail", "last"])
def test_guard_reads_every_weight_in_its_lanes(where, monkeypatch):
    """The guard's check runs in 16 lanes and a scalar tail (winograd_weights.c): an outlier,
    an infinity or a NaN is seen wherever it lies, and the outlier rule (largest magnitude at
    most HL_WINOGRAD_OUTLIER_RATIO = 24 times the weights' root mean square, computed here in
    float64) decides as numpy's arithmetic does, just inside and just outside it. Refused
    weights give im2col's bits; admitted ones Winograd's (which differ from them in rounding).
    17 x 19 x 9 = 2907 weights: 181 whole groups of 16 and a tail of 11."""
    rng = np.random.default_rng(7)
    co, ci = 17, 19
    x = rng.standard_normal((2, ci, 8, 8)).astype(np.float32)
    w = rng.standard_normal((co, ci, 3, 3)).astype(np.float32)
    n = w.size
    k = {"first": 0, "body": 16 * 90 + 7, "tail": n - 6, "last": n - 1}[where]
    others = np.delete(w.ravel().astype(np.float64), k)
    limit = np.sqrt(24.0 ** 2 * (others ** 2).sum() / (n - 24.0 ** 2))  # most == 24 * rms

    def run(value, env=None):
        ww = w.copy()
        ww.ravel()[k] = value
        if env:
            monkeypatch.setenv("HL_WINOGRAD", env)
        else:
            monkeypatch.delenv("HL_WINOGRAD", raising=False)
        return hl.conv2d(hl.tensor(x), hl.tensor(ww), padding=1).numpy()

    for value, admitted in [(0.97 * limit, True), (1.03 * limit, False), (-1.03 * limit, False),
                            (np.inf, False), (-np.inf, False), (np.nan, False)]:
        got, im2col = run(np.float32(value)), run(np.float32(value), env="0")
        if admitted:
            assert not np.array_equal(got, im2col), (where, value)
            assert _relative_error(got, x, np.where(np.arange(n) == k, np.float32(value),
                                                    w.ravel()).reshape(w.shape)) < TOL
        else:
            np.testing.assert_array_equal(got, im2col, err_msg=f"{where} {value}")
