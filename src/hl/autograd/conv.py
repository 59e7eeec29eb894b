"""Convolutions with gradients: conv1d/conv2d and their transposes.

The core has the two backward kernels of a convolution (gradient with respect to the input
and to the weight); a transposed convolution is the input-gradient of a convolution, so its
gradients are those kernels with the roles exchanged:

    conv:            dx = conv_grad_input(dy, w)      dw = conv_grad_weight(dy, x)
    conv_transpose:  dx = conv(dy, w)                 dw = conv_grad_weight(x, dy)

(in the transposed case the convolution runs from the output's shape back to the input's,
with the same weight, stride, pads, dilation and groups). The bias gradient is dy summed over
the batch and spatial axes. 'same' padding is resolved to explicit pads once, in forward, so
backward and shape inference use the very pads the forward used.
"""
import math

from .. import errors, ops
from ..ops.conv import _ints, conv_pads
from ._nn import as_input, check_rank, window_out
from .function import Function
from .mode import is_grad_enabled

__all__ = ["conv1d", "conv2d", "conv_fused", "conv_transpose1d", "conv_transpose2d"]

_GRAD_INPUT = {1: ops.conv1d_grad_input, 2: ops.conv2d_grad_input}
_GRAD_WEIGHT = {1: ops.conv1d_grad_weight, 2: ops.conv2d_grad_weight}
_CONV = {1: ops.conv1d_forward, 2: ops.conv2d_forward}
_CONV_T = {1: ops.conv_transpose1d_forward, 2: ops.conv_transpose2d_forward}


def _check_operands(n, x, w, op, transposed):
    check_rank(x, n, op)
    wl = "(C_in, C_out / groups, k...)" if transposed else "(C_out, C_in / groups, k...)"
    if w.ndim != n + 2:
        raise errors.ShapeError(f"{op}: expected a {n + 2}-D weight {wl}, got shape "
                                f"{tuple(w.shape)}")


def _check_bias(b, channels, op):
    if b is not None and tuple(b.shape) != (channels,):
        raise errors.ShapeError(f"{op}: expected a bias of shape ({channels},), one per output "
                                f"channel, got {tuple(b.shape)}")


def _call(fn, x, w, b, op):
    x = as_input(x, op)
    return fn(x, as_input(w, op, "weight", x), as_input(b, op, "bias", x))


class Conv(Function):
    """y = conv(x, w) + b over n spatial axes."""
    autocast = "half"  # hl.amp (autograd/autocast.py)

    def __init__(self, n, stride, padding, dilation, groups, op):
        self.n, self.op, self.groups = n, op, int(groups)
        self.stride = _ints(stride, n, "stride", op)
        self.dilation = _ints(dilation, n, "dilation", op)
        self.padding = padding

    @property
    def name(self):
        return self.op

    def _pads(self, x, w):
        kernel = list(w.shape[2:]) if w.ndim == self.n + 2 else [1] * self.n
        return conv_pads(self.padding, self.n, list(x.shape[2:]), kernel, self.stride,
                         self.dilation, self.op)

    def forward(self, x, w, b=None):
        self.pads = self._pads(x, w)
        y = _CONV[self.n](x, w, b, self.stride, self.pads, self.dilation, self.groups)
        if self.needs:
            nx, nw = self.needs[0], self.needs[1]
            self.x_shape, self.w_shape = x.shape, w.shape
            self.x = x if nw else None      # dw needs x; dx needs only w
            self.w = w if nx else None
        return y

    def backward(self, dy):
        nx, nw = self.needs[0], self.needs[1]
        nb = len(self.needs) > 2 and self.needs[2]
        args = (self.stride, self.pads, self.dilation, self.groups)
        # The smaller gradient first: it is alive while the other is computed (a recorded
        # plan, graph mode, frees everything at its last use). dw first also lets x, saved for
        # dw, go before dx is made (early layers: large planes, small kernels); dx first keeps
        # a large dw (deep layers) from being alive during dx's work buffers.
        dw_first = math.prod(self.w_shape) <= math.prod(self.x_shape)
        dx = _GRAD_INPUT[self.n](dy, self.w, self.x_shape, *args) if nx and not dw_first \
            else None
        dw = _GRAD_WEIGHT[self.n](dy, self.x, self.w_shape, *args,
                                  out=self.into(1, dy)) if nw else None
        db = ops.reduction("sum", dy, (0,) + tuple(range(2, dy.ndim)),
                           out=self.into(2, dy)) if nb else None
        if nx and dw_first:
            dx = _GRAD_INPUT[self.n](dy, self.w, self.x_shape, *args)
        return dx, dw, db


class ConvTranspose(Function):
    """y = conv_transpose(x, w) + b over n spatial axes (w is (C_in, C_out / groups, k...))."""
    autocast = "half"  # hl.amp (autograd/autocast.py)

    def __init__(self, n, stride, padding, output_padding, groups, dilation, op):
        self.n, self.op, self.groups = n, op, int(groups)
        self.stride = _ints(stride, n, "stride", op)
        self.dilation = _ints(dilation, n, "dilation", op)
        self.output_padding = _ints(output_padding, n, "output_padding", op)
        if isinstance(padding, str):
            raise errors.ValueError(f"{op}: padding must be numbers, got {padding!r}")
        self.pads = conv_pads(padding, n, op=op)

    @property
    def name(self):
        return self.op

    def forward(self, x, w, b=None):
        y = _CONV_T[self.n](x, w, b, self.stride, self.pads, self.output_padding, self.groups,
                            self.dilation)
        if self.needs:
            nx, nw = self.needs[0], self.needs[1]
            self.w_shape = w.shape
            self.x = x if nw else None
            self.w = w if nx else None
        return y

    def backward(self, dy):
        nx, nw = self.needs[0], self.needs[1]
        nb = len(self.needs) > 2 and self.needs[2]
        args = (self.stride, self.pads, self.dilation, self.groups)
        # The transposed conv maps x to y as conv_grad_input does, so its adjoint is the
        # convolution from y's shape back to x's (output_padding only adds positions that no
        # window of that convolution reaches past).
        dx = _CONV[self.n](dy, self.w, None, *args) if nx else None
        dw = _GRAD_WEIGHT[self.n](self.x, dy, self.w_shape, *args) if nw else None
        db = ops.reduction("sum", dy, (0,) + tuple(range(2, dy.ndim))) if nb else None
        return dx, dw, db


def conv1d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) of x (N, C_in, L) with w (C_out, C_in / groups, k),
    plus b (C_out) when given. padding: int, 2 ints (begin, end), 'same' or 'valid'."""
    return _call(Conv(1, stride, padding, dilation, groups, "conv1d"), x, w, b, "conv1d")


def conv2d(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of x (N, C_in, H, W) with w (C_out, C_in / groups,
    kh, kw), plus b (C_out) when given, as torch.nn.functional.conv2d.

    padding: an int, (ph, pw) symmetric, (top, left, bottom, right) in ONNX order, 'valid', or
    'same' (asymmetric when needed, the extra row/column at the end)."""
    return _call(Conv(2, stride, padding, dilation, groups, "conv2d"), x, w, b, "conv2d")


def conv_transpose1d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 1-D convolution of x (N, C_in, L) with w (C_in, C_out / groups, k), as
    torch.nn.functional.conv_transpose1d (the gradient of conv1d with respect to its input)."""
    op = "conv_transpose1d"
    return _call(ConvTranspose(1, stride, padding, output_padding, groups, dilation, op),
                 x, w, b, op)


def conv_transpose2d(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution of x (N, C_in, H, W) with w (C_in, C_out / groups, kh, kw),
    as torch.nn.functional.conv_transpose2d. padding may also be 4 ints in ONNX order."""
    op = "conv_transpose2d"
    return _call(ConvTranspose(2, stride, padding, output_padding, groups, dilation, op),
                 x, w, b, op)


def conv_fused(x, w, b=None, residual=None, stride=1, padding=0, dilation=1, groups=1,
               act="none", alpha=0.0, beta=0.0, packed=None):
    """hl.ops.conv_fused_forward (act(conv(x, w, b) + residual) in one pass, for inference). It has no
    gradient: where one would be recorded it refuses, rather than drop it silently."""
    if is_grad_enabled() and any(getattr(t, "requires_grad", False)
                                 for t in (x, w, b, residual)):
        raise errors.UnsupportedError(
            "conv_fused: an inference kernel without a gradient, called on tensors that "
            "require one; use conv2d (or conv1d), add and the activation, or hl.no_grad()")
    return ops.conv_fused_forward(x, w, b, residual, stride=stride, padding=padding,
                          dilation=dilation, groups=groups, act=act, alpha=alpha, beta=beta,
                          packed=packed)
