"""Stride-1 convolutions with 5x5-class kernels on small planes, straight from the planes
(libcore/src/cpu/conv_direct.c, issue 20: the MNIST CNN's layers): forward, grad_input and
grad_weight against PyTorch in float64, on the MNIST shapes and odd ones (rows that end on an
overlapping vector, padding, output channels and taps that leave partial blocks, 4x5, 4x6 and
7x7 kernels). Float32 sums in another order than the im2col path's: both are held to
2e-5 of the reference's largest magnitude (measured: 1.4e-6 at most). The fused epilogue equals
conv then its element-wise ops bit for bit; one and two threads give the same bits;
finite differences agree with the gradients (the convolution is linear, so a central
difference is exact up to rounding). HL_CONV_DIRECT=0 (read at each call) turns the path off:
the tests compare both paths with the reference and check the direct one really ran."""
import numpy as np
import pytest

import hl
from hl import _core, ops

torch = pytest.importorskip("torch")

REL = 2e-5

# (N, C_in, H, W, C_out, kh, kw, (pad_h, pad_w)): which passes run direct is noted (grad_input
# wants kw == 5 and dy rows a multiple of 8 wide, grad_weight rows a multiple of 8)
SHAPES = [
    (64, 1, 28, 28, 20, 5, 5, (0, 0)),    # MNIST conv1: all three
    (64, 20, 12, 12, 50, 5, 5, (0, 0)),   # MNIST conv2: all three
    (3, 5, 12, 12, 7, 5, 5, (0, 0)),      # 7 outputs, 125 taps: partial blocks; all three
    (2, 3, 10, 10, 6, 5, 5, (1, 1)),      # padded: all three
    (2, 3, 11, 16, 6, 4, 5, (1, 2)),      # 4x5, unequal padding: all three
    (3, 7, 13, 15, 9, 5, 5, (0, 0)),      # rows of 11: forward (overlapping last vector)
    (2, 3, 12, 20, 5, 5, 5, (2, 1)),      # rows of 18: forward
    (2, 3, 20, 30, 13, 4, 6, (1, 3)),     # 4x6, rows of 31: forward
    (2, 2, 14, 14, 5, 7, 7, (3, 3)),      # 7x7: forward
    (1, 2, 12, 12, 1, 5, 5, (0, 0)),      # one output channel, one sample: all three
]


def _case(rng, shape):
    n, c, h, w, co, kh, kw, pad = shape
    x = rng.standard_normal((n, c, h, w)).astype(np.float32)
    wt = (rng.standard_normal((co, c, kh, kw)) * 0.2).astype(np.float32)
    b = rng.standard_normal(co).astype(np.float32)
    oh, ow = h + 2 * pad[0] - kh + 1, w + 2 * pad[1] - kw + 1
    dy = rng.standard_normal((n, co, oh, ow)).astype(np.float32)
    return x, wt, b, dy, pad


def _passes(x, wt, b, dy, pad):
    X, W, B, DY = (hl.tensor(a) for a in (x, wt, b, dy))
    return (ops.conv2d_forward(X, W, B, padding=pad).numpy(),
            ops.conv2d_grad_input(DY, W, x.shape, padding=pad).numpy(),
            ops.conv2d_grad_weight(DY, X, wt.shape, padding=pad).numpy())


def _reference(x, wt, b, dy, pad):
    tx = torch.tensor(x, dtype=torch.float64, requires_grad=True)
    tw = torch.tensor(wt, dtype=torch.float64, requires_grad=True)
    ty = torch.nn.functional.conv2d(tx, tw, torch.tensor(b, dtype=torch.float64), padding=pad)
    ty.backward(torch.tensor(dy, dtype=torch.float64))
    return ty.detach().numpy(), tx.grad.numpy(), tw.grad.numpy()


def _direct_runs(shape):
    n, c, h, w, co, kh, kw, pad = shape
    oh, ow = h + 2 * pad[0] - kh + 1, w + 2 * pad[1] - kw + 1
    return (ow >= 8, kw == 5 and ow % 8 == 0, ow % 8 == 0)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_direct_passes_match_pytorch_and_the_im2col_path(rng, shape, monkeypatch):
    case = _case(rng, shape)
    ref = _reference(*case)
    before = [_core.lib.hl_conv_direct_runs(p) for p in range(3)]
    direct = _passes(*case)
    during = [_core.lib.hl_conv_direct_runs(p) for p in range(3)]
    monkeypatch.setenv("HL_CONV_DIRECT", "0")
    im2col = _passes(*case)
    after = [_core.lib.hl_conv_direct_runs(p) for p in range(3)]
    for p, (name, d, i, r, runs) in enumerate(zip(("forward", "grad_input", "grad_weight"),
                                                  direct, im2col, ref, _direct_runs(shape))):
        scale = np.abs(r).max()
        np.testing.assert_allclose(d, r, rtol=0, atol=REL * scale, err_msg=name)
        np.testing.assert_allclose(i, r, rtol=0, atol=REL * scale, err_msg=name)
        # the direct kernel ran where it should, and not with HL_CONV_DIRECT=0 (the bits
        # cannot tell: OpenBLAS's AVX-512 product sums the forward pass in the same order)
        assert during[p] - before[p] == (1 if runs else 0), name
        assert after[p] == during[p], name


@pytest.mark.parametrize("act,alpha,beta", [("relu", 0, 0), ("clip", -0.5, 0.7),
                                            ("leaky_relu", 0.1, 0), ("hard_sigmoid", 0.2, 0.5)])
@pytest.mark.parametrize("shape", [SHAPES[1], SHAPES[5]], ids=str)
def test_fused_epilogue_equals_conv_then_its_ops_bitwise(rng, shape, act, alpha, beta):
    x, wt, b, _, pad = _case(rng, shape)
    X, W, B = hl.tensor(x), hl.tensor(wt), hl.tensor(b)
    y = ops.conv2d_forward(X, W, B, padding=pad)
    got = ops.conv_fused_forward(X, W, B, padding=pad, act=act, alpha=alpha, beta=beta)
    want = {"relu": lambda: hl.relu(y), "clip": lambda: hl.clip(y, alpha, beta),
            "leaky_relu": lambda: hl.leaky_relu(y, alpha),
            "hard_sigmoid": lambda: hl.hard_sigmoid(y, alpha, beta)}[act]()
    np.testing.assert_array_equal(got.numpy(), want.numpy())
    if shape[3] + 2 * pad[1] - shape[6] + 1 == 8:   # rows of 8: a residual takes the path too
        r = hl.tensor(rng.standard_normal(y.shape).astype(np.float32))
        got = ops.conv_fused_forward(X, W, B, residual=r, padding=pad, act="relu")
        np.testing.assert_array_equal(got.numpy(), hl.relu(y + r).numpy())


def test_one_and_two_threads_give_the_same_bits(rng):
    prev = hl.get_num_threads()
    try:
        for shape in (SHAPES[0], SHAPES[1], SHAPES[2], SHAPES[4], (1, 3, 12, 12, 9, 5, 5, (0, 0))):
            case = _case(rng, shape)
            hl.set_num_threads(1)
            one = _passes(*case)
            hl.set_num_threads(2)
            two = _passes(*case)
            for a, b in zip(one, two):
                np.testing.assert_array_equal(a, b, err_msg=str(shape))
    finally:
        hl.set_num_threads(prev)


def test_gradients_agree_with_finite_differences(rng):
    """L = sum(conv(x, w) * r): dL/dw = grad_weight(r, x), dL/dx = grad_input(r, w), at a few
    entries, by central differences of the direct forward (float32, step 0.05)."""
    x, wt, _, r, pad = _case(rng, (2, 3, 10, 10, 6, 5, 5, (1, 1)))
    X, W, R = hl.tensor(x), hl.tensor(wt), hl.tensor(r)

    def loss(xa, wa):
        y = ops.conv2d_forward(hl.tensor(xa), hl.tensor(wa), padding=pad).numpy()
        return float((y.astype(np.float64) * r).sum())

    gw = ops.conv2d_grad_weight(R, X, wt.shape, padding=pad).numpy()
    gx = ops.conv2d_grad_input(R, W, x.shape, padding=pad).numpy()
    eps = 0.05
    for arr, grad, is_w in ((wt, gw, True), (x, gx, False)):
        for flat in rng.choice(arr.size, 12, replace=False):
            idx = np.unravel_index(flat, arr.shape)
            hi, lo = arr.copy(), arr.copy()
            hi[idx] += eps
            lo[idx] -= eps
            fd = (loss(x, hi) - loss(x, lo)) if is_w else (loss(hi, wt) - loss(lo, wt))
            fd /= 2 * eps
            assert abs(fd - grad[idx]) <= 2e-3 * max(1.0, abs(grad[idx])), (is_w, idx, fd,
                                                                              grad[idx])


def test_special_values_propagate_as_in_pytorch(rng):
    """An inf weight makes NaN where it meets a zero (padding or a zero input), as PyTorch's
    float64 convolution does; NaN inputs reach the outputs their taps cover."""
    x, wt, b, dy, pad = _case(rng, (2, 3, 10, 10, 6, 5, 5, (1, 1)))
    x[0, 1, 4, 4] = np.nan
    wt[2, 0, 0, 0] = np.inf
    got = _passes(x, wt, b, dy, pad)
    want = _reference(x, wt, b, dy, pad)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
        np.testing.assert_array_equal(np.isinf(g), np.isinf(w))
