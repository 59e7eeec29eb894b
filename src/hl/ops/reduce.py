"""Reductions: sum, mean, max, min, prod, norm, logsumexp over any axes; argmax, argmin; cumsum;
and what is built from them (any, all, var, std, count_nonzero).

``axis`` is None (every axis), an int or a tuple of ints (negative counts from the end); ``()``
reduces nothing. ``keepdims`` keeps reduced axes with size 1. PyTorch spellings ``dim`` and
``keepdim`` are accepted too. Result dtypes follow numpy: sums and products of int32, uint8
and bool give int64; max and min keep the dtype; the mean (and var, std, norm, logsumexp) of
an integer tensor is float32, as PyTorch's default float type.
"""
from .. import _core, errors
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, into, norm_axes, norm_axis

__all__ = ["sum", "mean", "max", "min", "amax", "amin", "prod", "norm", "vector_norm",
           "logsumexp", "argmax",
           "argmin", "cumsum", "any", "all", "var", "std", "count_nonzero"]

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


def _reduce(name, x, axis, keepdims, out=None):
    axes = norm_axes(_scalar_axis(x, axis), x.ndim, name)
    h = _core.call("reduce", _OPS[name], x._h, len(axes), list(axes) if axes else None,
                   int(keepdims), _core.out(into(out)))
    return _wrap(h)


def _floating(x):
    """x itself when floating, else cast to float32."""
    return x if x._dtype.is_floating else x.astype(_dt.float32)


def sum(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):  # noqa: A001
    """Sum of the elements over the given axes (float32 accumulates in float64)."""
    x = _tensor(x)
    if dtype is not None:
        x = x.astype(dtype)
    return _reduce("sum", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def mean(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Arithmetic mean over the given axes; NaN where nothing is reduced."""
    x = _tensor(x)
    x = x.astype(dtype) if dtype is not None else _floating(x)
    return _reduce("mean", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def max(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Largest element over the given axes (numpy.max: a NaN wins; an empty reduction raises
    ValueError)."""
    return _reduce("max", _tensor(x), _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def min(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Smallest element over the given axes (numpy.min: a NaN wins)."""
    return _reduce("min", _tensor(x), _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


amax, amin = max, min


def prod(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Product of the elements over the given axes (1 for an empty reduction)."""
    x = _tensor(x)
    if dtype is not None:
        x = x.astype(dtype)
    return _reduce("prod", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def vector_norm(x, ord=None, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A002
    """Vector norm over the given axes (all by default), as torch.linalg.vector_norm:
    ord None, 2 or 'fro' (Euclidean), 1, inf, -inf, 0 (count of non-zeros) or any other
    positive number p (sum(|x|**p)**(1/p))."""
    x = _floating(_tensor(x))
    axis, keepdims = _axis_arg(axis, dim), _keep_arg(keepdims, keepdim)
    from . import elementwise as ew
    if ord in (None, 2, 2.0, "fro"):
        return _reduce("l2", x, axis, keepdims)
    if ord == 1:
        return _reduce("sum", ew.unary("abs", x), axis, keepdims)
    if ord == float("inf"):
        return _reduce("max", ew.unary("abs", x), axis, keepdims)
    if ord == float("-inf"):
        return _reduce("min", ew.unary("abs", x), axis, keepdims)
    if ord == 0:
        return _reduce("sum", ew.binary("ne", x, 0).astype(x._dtype), axis, keepdims)
    if isinstance(ord, (int, float)) and ord > 0:
        p = float(ord)
        return ew.binary("pow", _reduce("sum", ew.binary("pow", ew.unary("abs", x), p), axis, keepdims), 1.0 / p)
    raise errors.ValueError(f"norm: unsupported ord {ord!r}; use None, 2, 'fro', 1, inf, -inf, "
                            f"0 or a positive number")


norm = vector_norm


def logsumexp(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):
    """log(sum(exp(x))) over the given axes, computed stably (shifted by the max)."""
    x = _floating(_tensor(x))
    return _reduce("logsumexp", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def _arg(name, x, axis, keepdims, select_last):
    x = _tensor(x)
    axis = _scalar_axis(x, axis)
    if axis is None:
        from .shape import reshape
        flat = reshape(x, -1)
        h = _core.call("arg_reduce", _OPS[name], flat._h, 0, 0, int(select_last), _core.OUT)
        r = _wrap(h)
        return reshape(r, *([1] * x.ndim)) if keepdims else reshape(r)
    axis = norm_axis(axis, x.ndim, name)
    return _wrap(_core.call("arg_reduce", _OPS[name], x._h, axis, int(keepdims),
                            int(select_last), _core.OUT))


def argmax(x, axis=None, keepdims=False, *, select_last=False, dim=None, keepdim=None):
    """Index (int64) of the largest element along axis (of the flattened tensor when axis is
    None). The first of equal maxima, or the last with select_last; a NaN counts as the
    maximum (numpy)."""
    return _arg("argmax", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), select_last)


def argmin(x, axis=None, keepdims=False, *, select_last=False, dim=None, keepdim=None):
    """Index (int64) of the smallest element along axis; see argmax."""
    return _arg("argmin", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), select_last)


def cumsum(x, axis=None, *, exclusive=False, reverse=False, dtype=None, out=None, dim=None):
    """Cumulative sum along axis (of the flattened tensor when axis is None). exclusive: each
    element gets the sum of those before it; reverse: sums run from the end (ONNX CumSum)."""
    x = _tensor(x)
    if dtype is not None:
        x = x.astype(dtype)
    axis = _scalar_axis(x, _axis_arg(axis, dim))
    if axis is None:
        from .shape import reshape
        x, axis = reshape(x, -1), 0
    else:
        axis = norm_axis(axis, x.ndim, "cumsum")
    return _wrap(_core.call("cumsum", x._h, axis, int(exclusive), int(reverse),
                            _core.out(into(out))))


def _as_bool(x):
    from . import elementwise as ew
    return x if x._dtype is _dt.bool_ else ew.binary("ne", x, 0)


def _empty_result(x, axis, keepdims, value):
    """The result of a reduction over nothing (an empty set of elements), or None."""
    axes = norm_axes(axis, x.ndim, "reduce")
    n = 1
    for a in axes:
        n *= x.shape[a]
    if n:
        return None
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape) if keepdims or i not in axes)
    from .creation import full
    return full(shape, value, dtype=_dt.bool_, device=x.device)


def any(x, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A001
    """Whether any element over the given axes is non-zero (bool; False when empty)."""
    x = _as_bool(_tensor(x))
    axis, keepdims = _axis_arg(axis, dim), _keep_arg(keepdims, keepdim)
    empty = _empty_result(x, axis, keepdims, False)
    return empty if empty is not None else _reduce("max", x, axis, keepdims)


def all(x, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A001
    """Whether every element over the given axes is non-zero (bool; True when empty)."""
    x = _as_bool(_tensor(x))
    axis, keepdims = _axis_arg(axis, dim), _keep_arg(keepdims, keepdim)
    empty = _empty_result(x, axis, keepdims, True)
    return empty if empty is not None else _reduce("min", x, axis, keepdims)


def count_nonzero(x, axis=None, keepdims=False):
    """Number (int64) of non-zero elements over the given axes."""
    return _reduce("sum", _as_bool(_tensor(x)), axis, keepdims)


def var(x, axis=None, keepdims=False, *, ddof=0, dim=None, keepdim=None, correction=None):
    """Variance over the given axes: mean squared deviation, divided by n - ddof (numpy's ddof;
    PyTorch's correction is accepted as the same thing)."""
    from . import elementwise as ew
    x = _floating(_tensor(x))
    axis, keepdims = _axis_arg(axis, dim), _keep_arg(keepdims, keepdim)
    if correction is not None:
        ddof = correction
    axes = norm_axes(axis, x.ndim, "var")
    n = 1
    for a in axes:
        n *= x.shape[a]
    mu = _reduce("mean", x, axes, True)
    d = ew.binary("sub", x, mu)
    ss = _reduce("sum", ew.binary("mul", d, d), axes, keepdims)
    denom = n - ddof
    if denom <= 0:
        denom = 0.0  # numpy: division by zero gives inf (or nan for 0/0)
    return ew.binary("div", ss, float(denom))


def std(x, axis=None, keepdims=False, *, ddof=0, dim=None, keepdim=None, correction=None):
    """Standard deviation: the square root of var (same arguments)."""
    from . import elementwise as ew
    return ew.unary("sqrt", var(x, axis, keepdims, ddof=ddof, dim=dim, keepdim=keepdim,
                                correction=correction))
