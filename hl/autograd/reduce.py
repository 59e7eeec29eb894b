"""Reductions with gradients: sum and mean (the rest of the family joins here).

The gradient of a reduction is dy broadcast back over the reduced axes: reshape dy to the
kept-dims shape, then expand (a view, no copy) to the input's shape.
"""
from .. import dtypes as _dt
from .. import ops
from .._tensor import Tensor
from ..ops._util import as_tensor, norm_axes
from ..ops.reduce import _axis_arg, _keep_arg, _scalar_axis
from .function import Function


def _kept_shape(shape, axes):
    return tuple(1 if i in axes else d for i, d in enumerate(shape))


def _reduced_shape(shape, axes, keepdims):
    if keepdims:
        return _kept_shape(shape, axes)
    return tuple(d for i, d in enumerate(shape) if i not in axes)


def spread(dy, x_shape, axes):
    """dy (reduced over axes, with or without kept dims) broadcast back to x_shape."""
    kept = _kept_shape(x_shape, axes)
    if dy.shape != kept:
        dy = ops.reshape(dy, *kept)
    return ops.expand(dy, *x_shape)


class Reduction(Function):
    op = None

    def __init__(self, axis, keepdims):
        self.axis, self.keepdims = axis, keepdims

    def _axes(self, x):
        return norm_axes(_scalar_axis(x, self.axis), x.ndim, self.op)

    def infer(self, x):
        axes = self._axes(x)
        return _reduced_shape(x.shape, axes, self.keepdims), self.result_dtype(x.dtype)

    def result_dtype(self, dtype):
        return dtype


class Sum(Reduction):
    op = "sum"

    def forward(self, x):
        self.x_shape, self.axes = x.shape, self._axes(x)
        return ops.sum(x, self.axis, self.keepdims)

    def backward(self, dy):
        return spread(dy, self.x_shape, self.axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.int64


class Mean(Reduction):
    op = "mean"

    def forward(self, x):
        self.x_shape, self.axes = x.shape, self._axes(x)
        return ops.mean(x, self.axis, self.keepdims)

    def backward(self, dy):
        n = 1
        for a in self.axes:
            n *= self.x_shape[a]
        return spread(dy * (1.0 / max(n, 1)), self.x_shape, self.axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def _prepare(x, dtype):
    if not hasattr(x, "shape"):
        x = as_tensor(x)
    if dtype is not None:
        from .elementwise import cast
        x = cast(x, dtype)
    return x


def sum(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):  # noqa: A001
    """Sum of the elements over the given axes (float32 accumulates in float64)."""
    if out is not None:
        return ops.sum(x, axis, keepdims, dtype=dtype, out=out, dim=dim, keepdim=keepdim)
    x = _prepare(x, dtype)
    return Sum(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


def mean(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Arithmetic mean over the given axes."""
    if out is not None:
        return ops.mean(x, axis, keepdims, dtype=dtype, out=out, dim=dim, keepdim=keepdim)
    x = _prepare(x, dtype)
    if x.__class__ is Tensor and not x.dtype.is_floating:
        x = x.astype(_dt.float32)
    return Mean(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


__all__ = ["sum", "mean"]
