"""Reductions with gradients: sum, mean, max/min (amax/amin), prod, logsumexp, vector_norm,
var, std and cumsum. argmax, argmin, any, all and count_nonzero have no gradient: they stay
the plain ops, and only infer shapes for placeholders.

The gradient of a reduction is dy broadcast back over the reduced axes: reshape dy to the
kept-dims shape, then expand (a view, no copy) or let broadcasting do it.

Where a derivative is undefined hl picks PyTorch's choice, or 0 where PyTorch gives NaN:
max/min share the gradient equally among tied maxima (torch.amax); the 2-norm and std of a
zero vector have gradient 0 (a subgradient; PyTorch gives 0 for the norm, NaN for std).
"""
import math

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, norm_axes, norm_axis
from ..ops.reduce import _axis_arg, _keep_arg, _scalar_axis
from .autocast import state as _amp
from .function import Function, tracing
from .mode import state as _grad
from .placeholder import Placeholder

_unary, _binary, _select = ops.elementwise.unary, ops.elementwise.binary, ops.elementwise.select


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
        dy = ops.reshape_forward(dy, *kept)
    return ops.expand_forward(dy, *x_shape)


class Reduction(Function):
    op = None

    def __init__(self, axis, keepdims):
        self.axis, self.keepdims = axis, keepdims

    def _axes(self, x):
        return norm_axes(_scalar_axis(x, self.axis), x.ndim, self.op)

    def result_dtype(self, dtype):
        return dtype


class Sum(Reduction):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "sum"

    def forward(self, x):
        self.x_shape, self.axes = x.shape, self._axes(x)
        return ops.reduction("sum", x, self.axis, self.keepdims)

    def backward(self, dy):
        return spread(dy, self.x_shape, self.axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.int64


class Mean(Reduction):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "mean"

    def forward(self, x):
        self.x_shape, self.axes = x.shape, self._axes(x)
        return ops.reduction("mean", x, self.axis, self.keepdims)

    def backward(self, dy):
        n = 1
        for a in self.axes:
            n *= self.x_shape[a]
        return spread(dy * (1.0 / (n if n > 0 else 1)), self.x_shape, self.axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def _prepare(x, dtype):
    if not hasattr(x, "shape"):
        x = as_tensor(x)
    if dtype is not None:
        from .binary import cast
        x = cast(x, dtype)
    return x


# reductions whose result is floating (integer input computes in float32, as in PyTorch)
_FLOAT_RESULT = ("mean", "logsumexp", "l2")


def _into(out, name, x, axis, keepdims, dtype, dim, keepdim):
    """The plain reduction, nothing recorded (out= given, or nothing needs a gradient)."""
    x = x if isinstance(x, Tensor) else as_tensor(x)
    if dtype is not None:
        x = x.astype(dtype)
    elif name in _FLOAT_RESULT and not x.dtype.is_floating:
        x = x.astype(_dt.float32)
    return ops.reduction(name, x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim), out)


def sum(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):  # noqa: A001
    """Sum of the elements over the given axes (float32 accumulates in float64)."""
    if out is not None:
        return _into(out, "sum", x, axis, keepdims, dtype, dim, keepdim)
    x = _prepare(x, dtype)
    return Sum(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


def mean(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Arithmetic mean over the given axes."""
    if out is not None:
        return _into(out, "mean", x, axis, keepdims, dtype, dim, keepdim)
    x = _prepare(x, dtype)
    if x.__class__ is Tensor and not x.dtype.is_floating:
        x = x.astype(_dt.float32)
    return Mean(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)




def _kept(t, x_shape, axes):
    """t (a reduction's output or its gradient) with the reduced axes kept as size 1."""
    kept = _kept_shape(x_shape, axes)
    return t if t.shape == kept else ops.reshape_forward(t, *kept)


def _nonzero_or_one(t):
    """t with its zeros replaced by ones: a divisor that is safe where the numerator is 0."""
    return _select(_binary("eq", t, 0.0), 1.0, t)


def _share_among(mask, dyk, axes):
    """dyk shared equally among the True places of mask along the reduced axes."""
    m = mask.astype(dyk.dtype)
    return m * (dyk / ops.reduction("sum", m, axes, True))


class Extreme(Reduction):
    """max or min; ties share the gradient equally (torch.amax, torch.amin)."""

    def __init__(self, op, axis, keepdims):
        super().__init__(axis, keepdims)
        self.op = op

    @property
    def name(self):
        return self.op

    def forward(self, x):
        y = ops.reduction(self.op, x, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes = self.x, self.axes
        hit = _binary("eq", x, _kept(self.y, x.shape, axes))
        return _share_among(hit, _kept(dy, x.shape, axes), axes)


def max(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Largest element over the given axes; tied maxima share the gradient equally."""
    if out is not None or _plain(x):
        return _into(out, "max", x, axis, keepdims, None, dim, keepdim)
    return Extreme("max", _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, None))


def min(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Smallest element over the given axes; tied minima share the gradient equally."""
    if out is not None or _plain(x):
        return _into(out, "min", x, axis, keepdims, None, dim, keepdim)
    return Extreme("min", _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, None))


amax, amin = max, min


class Prod(Reduction):
    """Product. d y / d x_i is the product of the other elements: y / x_i when the slice has
    no zero; with exactly one zero, only that zero's gradient is non-zero (the product of the
    rest); with two or more zeros, every gradient is 0. No division by zero is ever made."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "prod"

    def forward(self, x):
        if self.needs:
            self.x, self.axes = x, self._axes(x)
        return ops.reduction("prod", x, self.axis, self.keepdims)

    def backward(self, dy):
        x, axes = self.x, self.axes
        zero = _binary("eq", x, 0.0)
        zeros = ops.reduction("sum", zero, axes, True)
        nonzero = _select(zero, 1.0, x)
        rest = ops.reduction("prod", nonzero, axes, True)  # product of the non-zero elements
        g = _select(_binary("eq", zeros, 0), rest / nonzero,
                      _select(_binary("logical_and", zero, _binary("eq", zeros, 1)), rest, 0.0))
        return g * _kept(dy, x.shape, axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.int64


def prod(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Product of the elements over the given axes (1 for an empty reduction)."""
    if out is not None or _plain(x):
        return _into(out, "prod", x, axis, keepdims, dtype, dim, keepdim)
    return Prod(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, dtype))


class LogSumExp(Reduction):
    """log(sum(exp(x))); its gradient is softmax(x) over the reduced axes."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "logsumexp"

    def forward(self, x):
        y = ops.reduction("logsumexp", x, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes = self.x, self.axes
        return _unary("exp", x - _kept(self.y, x.shape, axes)) * _kept(dy, x.shape, axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def logsumexp(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):
    """log(sum(exp(x))) over the given axes, computed stably (shifted by the max)."""
    if out is not None or _plain(x):
        return _into(out, "logsumexp", x, axis, keepdims, None, dim, keepdim)
    x = _floating(_prepare(x, None))
    return LogSumExp(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


def _plain(x):
    """x is a tensor whose reductions need no recording: the plain op runs directly."""
    return x.__class__ is Tensor and not (x.requires_grad and _grad.enabled) and not _amp.active


def _floating(x):
    """x, cast (recorded) to float32 when it is not floating."""
    if x.dtype.is_floating:
        return x
    from .binary import cast
    return cast(x, _dt.float32)


_INF = float("inf")


def _norm_kind(ord):  # noqa: A002
    """ord as one of 2, 1, inf, -inf, 0 or a float p > 0; ValueError for anything else."""
    if ord in (None, 2, 2.0, "fro"):
        return 2
    if isinstance(ord, (int, float)) and not isinstance(ord, bool) and (
            ord in (1, 0, _INF, -_INF) or ord > 0):
        return float(ord) if ord not in (1, 0) else int(ord)
    raise errors.ValueError(f"norm: unsupported ord {ord!r}; use None, 2, 'fro', 1, inf, -inf, "
                            f"0 or a positive number")


def _vector_norm(x, p, axis, keepdims):
    """The norm of kind p (_norm_kind's answer) of a floating x, from the kernels."""
    if p == 2:
        return ops.reduction("l2", x, axis, keepdims)
    if p == 0:
        return ops.reduction("sum", _binary("ne", x, 0).astype(x.dtype), axis, keepdims)
    ax = _unary("abs", x)
    if p == 1:
        return ops.reduction("sum", ax, axis, keepdims)
    if p in (_INF, -_INF):
        return ops.reduction("max" if p > 0 else "min", ax, axis, keepdims)
    return _binary("pow", ops.reduction("sum", _binary("pow", ax, p), axis, keepdims), 1.0 / p)


class VectorNorm(Reduction):
    """torch.linalg.vector_norm. Gradients: x / ||x|| for ord 2 (0 for a zero vector),
    sign(x) for ord 1, sign(x) shared equally among the elements of largest (smallest)
    magnitude for inf (-inf), 0 for ord 0, sign(x) |x|^(p-1) / ||x||^(p-1) otherwise."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "norm"

    def __init__(self, ord, axis, keepdims):  # noqa: A002
        super().__init__(axis, keepdims)
        self.ord = ord

    def forward(self, x):
        y = _vector_norm(x, self.ord, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes, p = self.x, self.axes, self.ord
        dyk = _kept(dy, x.shape, axes)
        if p == 0:
            return ops.zeros_like(x)
        if p == 1:
            return _unary("sign", x) * dyk
        yk = _kept(self.y, x.shape, axes)
        if p in (_INF, -_INF):
            return _unary("sign", x) * _share_among(_binary("eq", _unary("abs", x), yk), dyk, axes)
        if p == 2:  # x is all zeros where the norm is 0, so the gradient there is 0
            return x * (dyk / _nonzero_or_one(yk))
        ax = _unary("abs", x)
        g = _unary("sign", x) * _binary("pow", ax, p - 1.0) / _binary("pow", _nonzero_or_one(yk), p - 1.0)
        return _select(_binary("eq", x, 0.0), 0.0, g) * dyk

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def vector_norm(x, ord=None, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A002
    """Vector norm over the given axes (all by default), as torch.linalg.vector_norm:
    ord None, 2 or 'fro' (Euclidean), 1, inf, -inf, 0 (count of non-zeros) or any other
    positive number p (sum(|x|**p)**(1/p))."""
    x = _floating(_prepare(x, None))
    return VectorNorm(_norm_kind(ord), _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


norm = vector_norm


class Var(Reduction):
    """Variance with n - ddof in the denominator; with std=True its square root. The
    gradient is 2 (x - mean) / (n - ddof) times dy (divided by 2 std for std, and 0 where
    std is 0: every deviation is 0 there)."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "var"

    def __init__(self, axis, keepdims, ddof, std):
        super().__init__(axis, keepdims)
        self.ddof, self.std = ddof, std
        self.op = "std" if std else "var"

    def forward(self, x):
        axes = self._axes(x)
        n = 1
        for a in axes:
            n *= x.shape[a]
        d = _binary("sub", x, ops.reduction("mean", x, axes, True))
        denom = n - self.ddof
        from .binary import true_divide  # integers divide as float32
        y = true_divide(ops.reduction("sum", _binary("mul", d, d), axes, self.keepdims),
                        float(denom if denom > 0 else 0.0))
        if self.std:
            y = _unary("sqrt", y)
        if self.needs:
            self.d, self.axes, self.denom = d, axes, denom
            self.y = y.detach() if self.std else None
        return y

    def backward(self, dy):
        d, axes = self.d, self.axes
        dyk = _kept(dy, d.shape, axes)
        if self.denom <= 0:  # as numpy: the result was inf or nan, and so is its gradient
            return d * (dyk * math.inf)
        if self.std:
            return d * (dyk / (_nonzero_or_one(_kept(self.y, d.shape, axes)) * self.denom))
        return d * (dyk * (2.0 / self.denom))

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def var(x, axis=None, keepdims=False, *, ddof=0, dim=None, keepdim=None, correction=None):
    """Variance over the given axes: mean squared deviation, divided by n - ddof (numpy's ddof;
    PyTorch's correction is accepted as the same thing)."""
    x = _floating(_prepare(x, None))
    ddof = ddof if correction is None else correction
    return Var(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim), ddof, False)(x)


def std(x, axis=None, keepdims=False, *, ddof=0, dim=None, keepdim=None, correction=None):
    """Standard deviation: the square root of var (same arguments)."""
    x = _floating(_prepare(x, None))
    ddof = ddof if correction is None else correction
    return Var(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim), ddof, True)(x)


class CumSum(Function):
    """Cumulative sum along one axis (the flattened x when axis is None). Each x_i appears in
    the sums after it (before it when reverse), so its gradient is the cumulative sum of dy
    running the other way, exclusive when the forward was."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)

    def __init__(self, axis, exclusive, reverse):
        self.axis, self.exclusive, self.reverse = axis, bool(exclusive), bool(reverse)

    def forward(self, x):
        self.x_shape = x.shape
        return ops.cumsum_forward(x, self.axis, self.exclusive, self.reverse)

    def backward(self, dy):
        axis = self.axis if self.axis is not None and len(self.x_shape) else None
        dx = ops.cumsum_forward(dy, 0 if axis is None else axis, self.exclusive,
                                not self.reverse)
        return ops.reshape_forward(dx, *self.x_shape) if axis is None else dx


def cumsum(x, axis=None, *, exclusive=False, reverse=False, dtype=None, out=None, dim=None):
    """Cumulative sum along axis (of the flattened tensor when axis is None). exclusive: each
    element gets the sum of those before it; reverse: sums run from the end (ONNX CumSum)."""
    if out is not None or _plain(x):
        x = _prepare(x, dtype)
        return ops.cumsum_forward(x, _axis_arg(axis, dim), exclusive, reverse, out)
    x = _prepare(x, dtype)
    return CumSum(_axis_arg(axis, dim), exclusive, reverse)(x)


# ---- no gradient: the plain ops, with shapes for placeholders -----------------------------

class ShapeOnly(Reduction):
    """A reduction without a derivative (argmax, any, ...): the plain op, as a Function so
    that placeholders (compile) take it on meta tensors."""

    def __init__(self, op, axis, keepdims, dtype=None):
        super().__init__(axis, keepdims)
        self.op, self.dtype = op, dtype

    def forward(self, x):
        return _PLAIN[self.op](x, self.axis, self.keepdims)


_PLAIN = {}  # name -> the plain op (no placeholder dispatch), for ShapeOnly.forward


def _shape_only(plain):
    _PLAIN[plain.__name__] = plain

    def f(x, *args, **kwargs):
        if x.__class__ is not Placeholder and not (tracing(x) and kwargs.get("out") is None):
            return plain(x, *args, **kwargs)
        axis = args[0] if args else kwargs.get("axis", kwargs.get("dim"))
        keep = args[1] if len(args) > 1 else kwargs.get("keepdims", kwargs.get("keepdim", False))
        return ShapeOnly(plain.__name__, axis, bool(keep))(x)
    f.__name__ = f.__qualname__ = plain.__name__
    f.__doc__ = plain.__doc__
    return f


@_shape_only
def argmax(x, axis=None, keepdims=False, *, select_last=False, dim=None, keepdim=None):
    """Index (int64) of the largest element along axis (of the flattened tensor when axis is
    None). The first of equal maxima, or the last with select_last; a NaN counts as the
    maximum (numpy)."""
    return ops.arg_reduce("argmax", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim),
                          select_last)


@_shape_only
def argmin(x, axis=None, keepdims=False, *, select_last=False, dim=None, keepdim=None):
    """Index (int64) of the smallest element along axis; see argmax."""
    return ops.arg_reduce("argmin", x, _axis_arg(axis, dim), _keep_arg(keepdims, keepdim),
                          select_last)


def _as_bool(x):
    x = x if isinstance(x, Tensor) else as_tensor(x)
    return x if x.dtype is _dt.bool_ else _binary("ne", x, 0)


def _empty_result(x, axis, keepdims, value):
    """The result of a reduction over nothing (an empty set of elements), or None."""
    axes = norm_axes(axis, x.ndim, "reduce")
    n = 1
    for a in axes:
        n *= x.shape[a]
    if n:
        return None
    shape = tuple(1 if i in axes else s for i, s in enumerate(x.shape) if keepdims or i not in axes)
    return ops.full(shape, value, dtype=_dt.bool_, device=x.device)


def _logical(kernel, empty_value):
    def f(x, axis=None, keepdims=False, *, dim=None, keepdim=None):
        x = _as_bool(x)
        axis, keepdims = _axis_arg(axis, dim), _keep_arg(keepdims, keepdim)
        empty = _empty_result(x, axis, keepdims, empty_value)
        return empty if empty is not None else ops.reduction(kernel, x, axis, keepdims)
    return f


@_shape_only
def any(x, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A001
    """Whether any element over the given axes is non-zero (bool; False when empty)."""
    return _ANY(x, axis, keepdims, dim=dim, keepdim=keepdim)


@_shape_only
def all(x, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A001
    """Whether every element over the given axes is non-zero (bool; True when empty)."""
    return _ALL(x, axis, keepdims, dim=dim, keepdim=keepdim)


_ANY, _ALL = _logical("max", False), _logical("min", True)


@_shape_only
def count_nonzero(x, axis=None, keepdims=False):
    """Number (int64) of non-zero elements over the given axes."""
    return ops.reduction("sum", _as_bool(x), axis, keepdims)


__all__ = ["sum", "mean", "max", "min", "amax", "amin", "prod", "logsumexp", "vector_norm",
           "norm", "var", "std", "cumsum", "argmax", "argmin", "any", "all", "count_nonzero"]
