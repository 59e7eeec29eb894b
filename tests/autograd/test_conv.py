"""Gradients of conv1d/conv2d and the transposed convolutions: float64 finite differences,
PyTorch (forward and backward, float32), shape inference, skipped gradients, bad shapes.
Shapes are tiny so the finite differences stay fast."""
import numpy as np
import pytest

import hl
from hl.autograd import conv as conv_module
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer

F = None


def torch_f():
    global F
    if F is None:
        torch = pytest.importorskip("torch")
        F = torch.nn.functional
    return F


# (x shape, w shape, bias, stride, padding, dilation, groups)
CONV2D = [
    ((2, 3, 6, 5), (4, 3, 3, 3), True, 1, 0, 1, 1),
    ((1, 4, 7, 6), (6, 2, 3, 2), True, 2, 1, 1, 2),           # groups, stride, padding
    ((2, 2, 7, 7), (2, 1, 3, 3), False, 1, "same", 2, 2),     # depthwise, dilation, 'same'
    ((1, 2, 6, 5), (3, 2, 2, 3), True, (2, 1), (1, 0), (1, 2), 1),
    ((1, 2, 5, 6), (2, 2, 2, 2), True, 1, "same", 1, 1),      # even kernel: asymmetric 'same'
    ((1, 2, 5, 5), (2, 2, 3, 3), False, 1, "valid", 1, 1),
]


def _torch_padding(padding, n):
    """(torch padding, F.pad amounts or None) for hl's padding argument."""
    if isinstance(padding, tuple) and len(padding) == 2 * n:
        begins, ends = padding[:n], padding[n:]
        amounts = []
        for b, e in reversed(list(zip(begins, ends))):  # F.pad starts at the last axis
            amounts += [b, e]
        return 0, amounts
    return padding, None


def _torch_conv(n, padding, **kw):
    f = torch_f()
    conv = f.conv1d if n == 1 else f.conv2d
    pad, amounts = _torch_padding(padding, n)

    def run(x, w, b=None):
        if amounts is not None:
            x = f.pad(x, amounts)
        return conv(x, w, b, padding=pad, **kw)
    return run


@pytest.mark.filterwarnings("ignore:Using padding='same'")  # torch, about its own copy
@pytest.mark.parametrize("xs, ws, bias, stride, padding, dilation, groups", CONV2D)
def test_conv2d(xs, ws, bias, stride, padding, dilation, groups):
    inputs = [randn(*xs), randn(*ws)] + ([randn(ws[0])] if bias else [])
    kw = dict(stride=stride, dilation=dilation, groups=groups)

    def f(x, w, b=None):
        return hl.conv2d(x, w, b, padding=padding, **kw)
    check_grad(f, inputs)
    check_torch(f, _torch_conv(2, padding, **kw), inputs)
    check_infer(f, inputs)


def test_conv2d_onnx_pads():
    # (top, left, bottom, right), asymmetric: PyTorch needs an explicit F.pad first
    pads = (0, 1, 2, 0)
    inputs = [randn(1, 2, 5, 4), randn(3, 2, 3, 2), randn(3)]

    def f(x, w, b):
        return hl.conv2d(x, w, b, padding=pads, stride=(1, 2))
    check_grad(f, inputs)
    check_torch(f, _torch_conv(2, pads, stride=(1, 2)), inputs)
    check_infer(f, inputs)


@pytest.mark.parametrize("xs, ws, stride, padding, dilation, groups", [
    ((2, 3, 9), (4, 3, 3), 1, 0, 1, 1),
    ((1, 4, 11), (6, 2, 3), 2, 2, 2, 2),
    ((2, 2, 8), (2, 1, 4), 1, "same", 1, 2),
    ((1, 2, 8), (3, 2, 2), 3, (1, 2), 1, 1),     # (begin, end) pads
])
def test_conv1d(xs, ws, stride, padding, dilation, groups):
    inputs = [randn(*xs), randn(*ws), randn(ws[0])]
    kw = dict(stride=stride, dilation=dilation, groups=groups)

    def f(x, w, b):
        return hl.conv1d(x, w, b, padding=padding, **kw)
    check_grad(f, inputs)
    check_torch(f, _torch_conv(1, padding, **kw), inputs)
    check_infer(f, inputs)


# (x shape, w shape (C_in, C_out / groups, k...), stride, padding, output_padding, groups,
#  dilation)
CONV_T2D = [
    ((2, 3, 4, 3), (3, 2, 3, 3), 1, 0, 0, 1, 1),
    ((1, 4, 3, 4), (4, 3, 3, 2), 2, 1, 1, 2, 1),        # groups, stride, output_padding
    ((1, 2, 3, 3), (2, 2, 2, 3), (2, 3), (0, 1), (1, 2), 1, 1),
    ((2, 2, 3, 4), (2, 1, 3, 3), 2, 1, 0, 1, 2),        # dilation
]


@pytest.mark.parametrize("xs, ws, stride, padding, output_padding, groups, dilation", CONV_T2D)
def test_conv_transpose2d(xs, ws, stride, padding, output_padding, groups, dilation):
    inputs = [randn(*xs), randn(*ws), randn(ws[1] * groups)]
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)

    def f(x, w, b):
        return hl.conv_transpose2d(x, w, b, **kw)
    check_grad(f, inputs)
    check_torch(f, lambda x, w, b: torch_f().conv_transpose2d(x, w, b, **kw), inputs)
    check_infer(f, inputs)


@pytest.mark.parametrize("xs, ws, stride, padding, output_padding, groups, dilation", [
    ((2, 3, 5), (3, 2, 3), 1, 0, 0, 1, 1),
    ((1, 4, 4), (4, 1, 3), 3, 1, 2, 2, 1),
    ((2, 2, 4), (2, 3, 2), 2, 0, 1, 1, 3),
])
def test_conv_transpose1d(xs, ws, stride, padding, output_padding, groups, dilation):
    inputs = [randn(*xs), randn(*ws), randn(ws[1] * groups)]
    kw = dict(stride=stride, padding=padding, output_padding=output_padding, groups=groups,
              dilation=dilation)

    def f(x, w, b):
        return hl.conv_transpose1d(x, w, b, **kw)
    check_grad(f, inputs)
    check_torch(f, lambda x, w, b: torch_f().conv_transpose1d(x, w, b, **kw), inputs)
    check_infer(f, inputs)


def test_no_bias_transpose():
    inputs = [randn(1, 2, 3, 3), randn(2, 3, 2, 2)]
    check_grad(lambda x, w: hl.conv_transpose2d(x, w, stride=2), inputs)


def test_non_contiguous_input():
    torch = pytest.importorskip("torch")
    a, w = randn(2, 3, 5, 6).astype(np.float32), randn(4, 3, 3, 3).astype(np.float32)
    x = hl.tensor(a).permute(0, 1, 3, 2)  # a strided view, then a leaf
    x.requires_grad = True
    hw = hl.tensor(w, requires_grad=True)
    y = hl.conv2d(x, hw, padding=1)
    y.sum().backward()
    tx = torch.tensor(a).permute(0, 1, 3, 2).detach().requires_grad_()
    tw = torch.tensor(w, requires_grad=True)
    ty = torch_f().conv2d(tx, tw, padding=1)
    ty.sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(hw.grad.numpy(), tw.grad.numpy(), rtol=1e-4, atol=1e-4)


def test_input_gradient_skipped_when_not_needed(monkeypatch):
    """A first layer's input needs no gradient: the grad-input convolution must not run."""
    calls = []
    real = conv_module._GRAD_INPUT[2]
    monkeypatch.setitem(conv_module._GRAD_INPUT, 2,
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    x = hl.tensor(randn(1, 2, 5, 5).astype(np.float32))
    w = hl.tensor(randn(3, 2, 3, 3).astype(np.float32), requires_grad=True)
    hl.conv2d(x, w).sum().backward()
    assert w.grad is not None and x.grad is None and calls == []
    x.requires_grad = True
    hl.conv2d(x, w).sum().backward()
    assert calls == [1] and x.grad is not None


def test_bad_shapes_raise():
    x = hl.Placeholder((1, 3, 5, 5))
    with pytest.raises(hl.errors.ShapeError, match="conv: .*channels"):
        hl.conv2d(x, hl.Placeholder((4, 2, 3, 3)))
    with pytest.raises(hl.errors.ShapeError, match="conv.*channels"):  # the core's message
        hl.conv2d(hl.tensor(np.zeros((1, 3, 5, 5), np.float32), requires_grad=True),
                  hl.tensor(np.zeros((4, 2, 3, 3), np.float32)))
    with pytest.raises(hl.errors.ShapeError, match="conv: expected a bias of shape"):
        hl.conv2d(x, hl.Placeholder((4, 3, 3, 3)), hl.Placeholder((3,)))
    with pytest.raises(hl.errors.ShapeError, match="conv1d.*3-D"):
        hl.conv1d(x, hl.Placeholder((4, 3, 3)))
    with pytest.raises(hl.errors.ShapeError, match="conv: .*output size would be -1"):
        hl.conv2d(x, hl.Placeholder((4, 3, 7, 7)))
    with pytest.raises(hl.errors.ShapeError, match="conv_transpose: .*channels"):
        hl.conv_transpose2d(x, hl.Placeholder((2, 4, 3, 3)))
