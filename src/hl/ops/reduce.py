"""The reduction kernels: ``reduction`` (sum, mean, max, min, prod, l2, logsumexp over any axes),
``arg_reduce`` (argmax, argmin) and ``cumsum_forward``, with the argument rules every
reduction shares. The reductions users call (hl.sum, hl.var, hl.any, ...) are defined once,
with their gradients, in hl.autograd.reduce.

``axis`` is None (every axis), an int or a tuple of ints (negative counts from the end); ``()``
reduces nothing. ``keepdims`` keeps reduced axes with size 1. PyTorch spellings ``dim`` and
``keepdim`` are accepted too. Result dtypes follow numpy: sums and products of int32, uint8
and bool give int64; max and min keep the dtype; the mean (and var, std, norm, logsumexp) of
an integer tensor is float32, as PyTorch's default float type.
"""
from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into, norm_axes, norm_axis

__all__ = ["reduction", "arg_reduce", "cumsum_forward"]

_OPS = {name: _core.op_code(name) for name in
        ("sum", "mean", "max", "min", "prod", "l2", "logsumexp", "argmax", "argmin")}


def _tensor(x):
    return x if isinstance(x, Tensor) else as_tensor(x)


def _axis_arg(axis, dim):
    if dim is not None:
        if axis is not None:
            raise errors.ValueError("give axis or dim, not both")
        return dim
    return axis


def _keep_arg(keepdims, keepdim):
    return bool(keepdims if keepdim is None else keepdim)


def _scalar_axis(x, axis):
    """numpy and PyTorch take axis 0 or -1 of a 0-d tensor as its only element."""
    if x.ndim == 0 and isinstance(axis, int) and axis in (0, -1):
        return None
    return axis


def reduction(name, x, axis=None, keepdims=False, out=None):
    """The core's reduction `name` (sum, mean, max, min, prod, l2, logsumexp) of x over axis
    (None: all; an int or a tuple)."""
    axes = norm_axes(_scalar_axis(x, axis), x.ndim, name)
    h = _core.call("reduce", _OPS[name], x._h, len(axes), list(axes) if axes else None,
                   int(keepdims), _core.out(into(out)))
    return _wrap(h)


def arg_reduce(name, x, axis=None, keepdims=False, select_last=False):
    """argmax or argmin (int64) along axis, of the flattened tensor when axis is None."""
    x = _tensor(x)
    axis = _scalar_axis(x, axis)
    if axis is None:
        from .shape import reshape_forward
        flat = reshape_forward(x, -1)
        h = _core.call("arg_reduce", _OPS[name], flat._h, 0, 0, int(select_last), _core.OUT)
        r = _wrap(h)
        return reshape_forward(r, *([1] * x.ndim)) if keepdims else reshape_forward(r)
    axis = norm_axis(axis, x.ndim, name)
    return _wrap(_core.call("arg_reduce", _OPS[name], x._h, axis, int(keepdims),
                            int(select_last), _core.OUT))


def cumsum_forward(x, axis=None, exclusive=False, reverse=False, out=None):
    """The core's cumulative sum along axis (of the flattened tensor when axis is None)."""
    x = _tensor(x)
    axis = _scalar_axis(x, axis)
    if axis is None:
        from .shape import reshape_forward
        x, axis = reshape_forward(x, -1), 0
    else:
        axis = norm_axis(axis, x.ndim, "cumsum")
    return _wrap(_core.call("cumsum", x._h, axis, int(exclusive), int(reverse),
                            _core.out(into(out))))
