"""The pooling kernels: max and average pooling in 1-D and 2-D (kernel, stride, padding incl.
ONNX-style asymmetric pads, dilation for max, ceil_mode, count_include_pad) and their backward
kernels. The ops users call (hl.max_pool2d, the global pools...) are defined once, with their
gradients, in hl.autograd.pool.

Semantics follow torch.nn.functional: padding never wins a max; max pooling can return int64
indices, flat within each (H, W) plane (h * W + w), which max_pool*_grad takes back.
"""
from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor
from .conv import _ints, _shape, conv_pads

__all__ = ["max_pool1d_forward", "max_pool2d_forward", "avg_pool1d_forward",
           "avg_pool2d_forward", "max_pool1d_grad", "max_pool2d_grad", "avg_pool1d_grad",
           "avg_pool2d_grad"]


def _input(x, n, op):
    if not isinstance(x, Tensor):
        if x is None:
            raise errors.ValueError(f"{op}: input is None")
        x = as_tensor(x)
    if x.ndim != n + 2:
        layout = "(N, C, L)" if n == 1 else "(N, C, H, W)"
        raise errors.ShapeError(f"{op}: expected a {n + 2}-D input {layout}, got shape "
                                f"{tuple(x.shape)}")
    return x


def _attrs(n, kernel_size, stride, padding, dilation, op):
    kernel = _ints(kernel_size, n, "kernel_size", op)
    stride = kernel if stride is None or stride == () or stride == [] else \
        _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    if isinstance(padding, str):
        raise errors.ValueError(f"{op}: padding must be numbers, got {padding!r}")
    pads = conv_pads(padding, n, op=op)
    return kernel, stride, pads, dilation


def _pool(n, name, x, kernel_size, stride, padding, dilation, ceil_mode, count_include_pad,
          return_indices, op):
    x = _input(x, n, op)
    kernel, stride, pads, dilation = _attrs(n, kernel_size, stride, padding, dilation, op)
    if return_indices:
        y, idx = _core.call("pool", _core.OPS[name], x._h, kernel, stride, pads, dilation,
                            int(bool(ceil_mode)), int(bool(count_include_pad)), _core.OUT,
                            _core.OUT)
        return _wrap(y, x._dtype), _wrap(idx)
    y = _core.call("pool", _core.OPS[name], x._h, kernel, stride, pads, dilation,
                   int(bool(ceil_mode)), int(bool(count_include_pad)), _core.OUT, None)
    return _wrap(y, x._dtype)


def max_pool1d_forward(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling of x (N, C, L); stride defaults to kernel_size. With return_indices,
    also the int64 positions of the maxima (within each row)."""
    return _pool(1, "max_pool", x, kernel_size, stride, padding, dilation, ceil_mode, False,
                 return_indices, "max_pool1d")


def max_pool2d_forward(x, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """Max pooling of x (N, C, H, W), as torch.nn.functional.max_pool2d. padding: an int,
    (ph, pw), or (top, left, bottom, right) in ONNX order. With return_indices, also the int64
    flat positions h * W + w of the maxima within each plane."""
    return _pool(2, "max_pool", x, kernel_size, stride, padding, dilation, ceil_mode, False,
                 return_indices, "max_pool2d")


def avg_pool1d_forward(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling of x (N, C, L); see avg_pool2d."""
    return _pool(1, "avg_pool", x, kernel_size, stride, padding, 1, ceil_mode,
                 count_include_pad, False, "avg_pool1d")


def avg_pool2d_forward(x, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True):
    """Average pooling of x (N, C, H, W), as torch.nn.functional.avg_pool2d: with
    count_include_pad the padding counts in the divisor (but not positions past it that
    ceil_mode adds); without, only input elements count."""
    return _pool(2, "avg_pool", x, kernel_size, stride, padding, 1, ceil_mode,
                 count_include_pad, False, "avg_pool2d")


def _pool_grad(n, name, dy, indices, x_shape, kernel_size, stride, padding, dilation,
               ceil_mode, count_include_pad, op):
    if not isinstance(dy, Tensor):
        dy = as_tensor(dy)
    x_shape = _shape(x_shape, n, "x_shape", op)
    kernel, stride, pads, dilation = _attrs(n, kernel_size, stride, padding, dilation, op)
    ih = None
    if indices is not None:
        ih = (indices if isinstance(indices, Tensor) else as_tensor(indices))._h
    dx = _core.call("pool_grad", _core.OPS[name], dy._h, ih, x_shape, kernel, stride, pads,
                    dilation, int(bool(ceil_mode)), int(bool(count_include_pad)), _core.OUT)
    return _wrap(dx, dy._dtype)


def max_pool1d_grad(dy, indices, x_shape, kernel_size, stride=None, padding=0, dilation=1,
                    ceil_mode=False):
    """Gradient of max_pool1d with respect to its input (shape x_shape): dy added at the
    indices max_pool1d returned. The pooling arguments must be the forward's."""
    return _pool_grad(1, "max_pool", dy, indices, x_shape, kernel_size, stride, padding,
                      dilation, ceil_mode, False, "max_pool1d_grad")


def max_pool2d_grad(dy, indices, x_shape, kernel_size, stride=None, padding=0, dilation=1,
                    ceil_mode=False):
    """Gradient of max_pool2d with respect to its input (shape x_shape), from the indices
    max_pool2d(..., return_indices=True) gave."""
    return _pool_grad(2, "max_pool", dy, indices, x_shape, kernel_size, stride, padding,
                      dilation, ceil_mode, False, "max_pool2d_grad")


def avg_pool1d_grad(dy, x_shape, kernel_size, stride=None, padding=0, ceil_mode=False,
                    count_include_pad=True):
    """Gradient of avg_pool1d with respect to its input (shape x_shape)."""
    return _pool_grad(1, "avg_pool", dy, None, x_shape, kernel_size, stride, padding, 1,
                      ceil_mode, count_include_pad, "avg_pool1d_grad")


def avg_pool2d_grad(dy, x_shape, kernel_size, stride=None, padding=0, ceil_mode=False,
                    count_include_pad=True):
    """Gradient of avg_pool2d with respect to its input (shape x_shape)."""
    return _pool_grad(2, "avg_pool", dy, None, x_shape, kernel_size, stride, padding, 1,
                      ceil_mode, count_include_pad, "avg_pool2d_grad")
