"""Pooling with gradients: max and average pooling in 1-D and 2-D, global average and max.

Max pooling asks the core for the positions of the maxima when it records, and its backward
hands dy back to those positions (max_pool*_grad); average pooling spreads dy over each
window with the forward's divisor (avg_pool*_grad). The global pools are the same ops with
the window as large as the input. (hl.ops has no adaptive pooling, so neither has this.)
"""
from .. import dtypes as _dt
from .. import errors, ops
from ..ops.conv import _ints, conv_pads
from ._nn import as_input, check_rank, window_out
from .function import Function

__all__ = ["max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "global_avg_pool2d",
           "global_max_pool2d"]

_MAX = {1: ops.max_pool1d_forward, 2: ops.max_pool2d_forward}
_MAX_GRAD = {1: ops.max_pool1d_grad, 2: ops.max_pool2d_grad}
_AVG = {1: ops.avg_pool1d_forward, 2: ops.avg_pool2d_forward}
_AVG_GRAD = {1: ops.avg_pool1d_grad, 2: ops.avg_pool2d_grad}


class Pool(Function):
    """The window arguments, checked once, and shape inference shared by both pools."""

    def __init__(self, n, kernel_size, stride, padding, dilation, ceil_mode, op):
        self.n, self.op, self.ceil_mode = n, op, bool(ceil_mode)
        self.kernel = _ints(kernel_size, n, "kernel_size", op)
        self.stride = self.kernel if stride is None or stride == () or stride == [] else \
            _ints(stride, n, "stride", op)
        self.dilation = _ints(dilation, n, "dilation", op)
        if isinstance(padding, str):
            raise errors.ValueError(f"{op}: padding must be numbers, got {padding!r}")
        self.pads = conv_pads(padding, n, op=op)

    @property
    def name(self):
        return self.op


class MaxPool(Pool):
    indices = None

    def __init__(self, n, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                 op):
        super().__init__(n, kernel_size, stride, padding, dilation, ceil_mode, op)
        self.return_indices = return_indices

    def forward(self, x):
        if not (self.needs or self.return_indices):
            return _MAX[self.n](x, self.kernel, self.stride, self.pads, self.dilation,
                                self.ceil_mode)
        y, self.indices = _MAX[self.n](x, self.kernel, self.stride, self.pads, self.dilation,
                                       self.ceil_mode, return_indices=True)
        self.x_shape = x.shape
        return y

    def backward(self, dy):
        return _MAX_GRAD[self.n](dy, self.indices, self.x_shape, self.kernel, self.stride,
                                 self.pads, self.dilation, self.ceil_mode)


class AvgPool(Pool):
    def __init__(self, n, kernel_size, stride, padding, ceil_mode, count_include_pad, op):
        super().__init__(n, kernel_size, stride, padding, 1, ceil_mode, op)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x):
        self.x_shape = x.shape
        return _AVG[self.n](x, self.kernel, self.stride, self.pads, self.ceil_mode,
                            self.count_include_pad)

    def backward(self, dy):
        return _AVG_GRAD[self.n](dy, self.x_shape, self.kernel, self.stride, self.pads,
                                 self.ceil_mode, self.count_include_pad)


def _max_pool(n, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op):
    fn = MaxPool(n, kernel_size, stride, padding, dilation, ceil_mode, return_indices, op)
    y = fn(as_input(x, op))
    if not return_indices:
        return y
    from .placeholder import follow
    return y, follow(fn.indices, y)


def max_pool1d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling of x (N, C, L); stride defaults to kernel_size. With return_indices,
    also the int64 positions of the maxima (within each row)."""
    return _max_pool(1, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     "max_pool1d")


def max_pool2d(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling of x (N, C, H, W), as torch.nn.functional.max_pool2d. padding: an int,
    (ph, pw), or (top, left, bottom, right) in ONNX order. With return_indices, also the int64
    flat positions h * W + w of the maxima within each plane (they carry no gradient)."""
    return _max_pool(2, x, kernel_size, stride, padding, dilation, ceil_mode, return_indices,
                     "max_pool2d")


def avg_pool1d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling of x (N, C, L); see avg_pool2d."""
    op = "avg_pool1d"
    return AvgPool(1, kernel_size, stride, padding, ceil_mode, count_include_pad, op)(
        as_input(x, op))


def avg_pool2d(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling of x (N, C, H, W), as torch.nn.functional.avg_pool2d: with
    count_include_pad the padding counts in the divisor (but not positions past it that
    ceil_mode adds); without, only input elements count."""
    op = "avg_pool2d"
    return AvgPool(2, kernel_size, stride, padding, ceil_mode, count_include_pad, op)(
        as_input(x, op))


def global_avg_pool2d(x):
    """The mean over each (H, W) plane of x (N, C, H, W), shape (N, C, 1, 1) (ONNX
    GlobalAveragePool)."""
    x = as_input(x, "global_avg_pool2d")
    check_rank(x, 2, "global_avg_pool2d")
    return avg_pool2d(x, tuple(x.shape[2:]))


def global_max_pool2d(x):
    """The maximum over each (H, W) plane of x (N, C, H, W), shape (N, C, 1, 1) (ONNX
    GlobalMaxPool)."""
    x = as_input(x, "global_max_pool2d")
    check_rank(x, 2, "global_max_pool2d")
    return max_pool2d(x, tuple(x.shape[2:]))
