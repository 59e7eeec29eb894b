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
from .function import Function, tracing
from .mode import state as _grad
from .placeholder import Placeholder


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
        return spread(dy * (1.0 / (n if n > 0 else 1)), self.x_shape, self.axes)

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




def _kept(t, x_shape, axes):
    """t (a reduction's output or its gradient) with the reduced axes kept as size 1."""
    kept = _kept_shape(x_shape, axes)
    return t if t.shape == kept else ops.reshape(t, *kept)


def _nonzero_or_one(t):
    """t with its zeros replaced by ones: a divisor that is safe where the numerator is 0."""
    return ops.where(ops.eq(t, 0.0), 1.0, t)


def _share_among(mask, dyk, axes):
    """dyk shared equally among the True places of mask along the reduced axes."""
    m = mask.astype(dyk.dtype)
    return m * (dyk / ops.sum(m, axes, keepdims=True))


class Extreme(Reduction):
    """max or min; ties share the gradient equally (torch.amax, torch.amin)."""

    def __init__(self, op, axis, keepdims):
        super().__init__(axis, keepdims)
        self.op = op

    @property
    def name(self):
        return self.op

    def forward(self, x):
        y = getattr(ops, self.op)(x, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes = self.x, self.axes
        hit = ops.eq(x, _kept(self.y, x.shape, axes))
        return _share_among(hit, _kept(dy, x.shape, axes), axes)


def max(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Largest element over the given axes; tied maxima share the gradient equally."""
    if out is not None:
        return ops.max(x, axis, keepdims, out=out, dim=dim, keepdim=keepdim)
    if _plain(x):
        return ops.max(x, axis, keepdims, dim=dim, keepdim=keepdim)
    return Extreme("max", _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, None))


def min(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):  # noqa: A001
    """Smallest element over the given axes; tied minima share the gradient equally."""
    if out is not None:
        return ops.min(x, axis, keepdims, out=out, dim=dim, keepdim=keepdim)
    if _plain(x):
        return ops.min(x, axis, keepdims, dim=dim, keepdim=keepdim)
    return Extreme("min", _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, None))


amax, amin = max, min


class Prod(Reduction):
    """Product. d y / d x_i is the product of the other elements: y / x_i when the slice has
    no zero; with exactly one zero, only that zero's gradient is non-zero (the product of the
    rest); with two or more zeros, every gradient is 0. No division by zero is ever made."""
    op = "prod"

    def forward(self, x):
        if self.needs:
            self.x, self.axes = x, self._axes(x)
        return ops.prod(x, self.axis, self.keepdims)

    def backward(self, dy):
        x, axes = self.x, self.axes
        zero = ops.eq(x, 0.0)
        zeros = ops.sum(zero, axes, keepdims=True)
        nonzero = ops.where(zero, 1.0, x)
        rest = ops.prod(nonzero, axes, keepdims=True)  # product of the non-zero elements
        g = ops.where(ops.eq(zeros, 0), rest / nonzero,
                      ops.where(ops.logical_and(zero, ops.eq(zeros, 1)), rest, 0.0))
        return g * _kept(dy, x.shape, axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.int64


def prod(x, axis=None, keepdims=False, *, dtype=None, out=None, dim=None, keepdim=None):
    """Product of the elements over the given axes (1 for an empty reduction)."""
    if out is not None:
        return ops.prod(x, axis, keepdims, dtype=dtype, out=out, dim=dim, keepdim=keepdim)
    if _plain(x):
        return ops.prod(x, axis, keepdims, dtype=dtype, dim=dim, keepdim=keepdim)
    return Prod(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(_prepare(x, dtype))


class LogSumExp(Reduction):
    """log(sum(exp(x))); its gradient is softmax(x) over the reduced axes."""
    op = "logsumexp"

    def forward(self, x):
        y = ops.logsumexp(x, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes = self.x, self.axes
        return ops.exp(x - _kept(self.y, x.shape, axes)) * _kept(dy, x.shape, axes)

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def logsumexp(x, axis=None, keepdims=False, *, out=None, dim=None, keepdim=None):
    """log(sum(exp(x))) over the given axes, computed stably (shifted by the max)."""
    if out is not None:
        return ops.logsumexp(x, axis, keepdims, out=out, dim=dim, keepdim=keepdim)
    if _plain(x):
        return ops.logsumexp(x, axis, keepdims, dim=dim, keepdim=keepdim)
    x = _floating(_prepare(x, None))
    return LogSumExp(_axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


def _plain(x):
    """x is a tensor whose reductions need no recording: the plain op runs directly."""
    return x.__class__ is Tensor and not (x.requires_grad and _grad.enabled)


def _floating(x):
    """x, cast (recorded) to float32 when it is not floating."""
    if x.dtype.is_floating:
        return x
    from .elementwise import cast
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


class VectorNorm(Reduction):
    """torch.linalg.vector_norm. Gradients: x / ||x|| for ord 2 (0 for a zero vector),
    sign(x) for ord 1, sign(x) shared equally among the elements of largest (smallest)
    magnitude for inf (-inf), 0 for ord 0, sign(x) |x|^(p-1) / ||x||^(p-1) otherwise."""
    op = "norm"

    def __init__(self, ord, axis, keepdims):  # noqa: A002
        super().__init__(axis, keepdims)
        self.ord = ord

    def forward(self, x):
        y = ops.vector_norm(x, self.ord, self.axis, self.keepdims)
        if self.needs:
            self.x, self.axes, self.y = x, self._axes(x), y.detach()
        return y

    def backward(self, dy):
        x, axes, p = self.x, self.axes, self.ord
        dyk = _kept(dy, x.shape, axes)
        if p == 0:
            return ops.zeros_like(x)
        if p == 1:
            return ops.sign(x) * dyk
        yk = _kept(self.y, x.shape, axes)
        if p in (_INF, -_INF):
            return ops.sign(x) * _share_among(ops.eq(ops.abs(x), yk), dyk, axes)
        if p == 2:  # x is all zeros where the norm is 0, so the gradient there is 0
            return x * (dyk / _nonzero_or_one(yk))
        ax = ops.abs(x)
        g = ops.sign(x) * ops.pow(ax, p - 1.0) / ops.pow(_nonzero_or_one(yk), p - 1.0)
        return ops.where(ops.eq(x, 0.0), 0.0, g) * dyk

    def result_dtype(self, dtype):
        return dtype if dtype.is_floating else _dt.float32


def vector_norm(x, ord=None, axis=None, keepdims=False, *, dim=None, keepdim=None):  # noqa: A002
    """Vector norm over the given axes (all by default), as torch.linalg.vector_norm:
    ord None, 2 or 'fro' (Euclidean), 1, inf, -inf, 0 (count of non-zeros) or any other
    positive number p (sum(|x|**p)**(1/p))."""
    if _plain(x):
        return ops.vector_norm(x, ord, axis, keepdims, dim=dim, keepdim=keepdim)
    x = _floating(_prepare(x, None))
    return VectorNorm(_norm_kind(ord), _axis_arg(axis, dim), _keep_arg(keepdims, keepdim))(x)


norm = vector_norm


class Var(Reduction):
    """Variance with n - ddof in the denominator; with std=True its square root. The
    gradient is 2 (x - mean) / (n - ddof) times dy (divided by 2 std for std, and 0 where
    std is 0: every deviation is 0 there)."""
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
        d = ops.sub(x, ops.mean(x, axes, keepdims=True))
        denom = n - self.ddof
        y = ops.true_divide(ops.sum(ops.mul(d, d), axes, self.keepdims),
                            float(denom if denom > 0 else 0.0))
        if self.std:
            y = ops.sqrt(y)
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

    def __init__(self, axis, exclusive, reverse):
        self.axis, self.exclusive, self.reverse = axis, bool(exclusive), bool(reverse)

    def forward(self, x):
        self.x_shape = x.shape
        return ops.cumsum(x, self.axis, exclusive=self.exclusive, reverse=self.reverse)

    def backward(self, dy):
        axis = self.axis if self.axis is not None and len(self.x_shape) else None
        dx = ops.cumsum(dy, 0 if axis is None else axis, exclusive=self.exclusive,
                        reverse=not self.reverse)
        return ops.reshape(dx, *self.x_shape) if axis is None else dx


def cumsum(x, axis=None, *, exclusive=False, reverse=False, dtype=None, out=None, dim=None):
    """Cumulative sum along axis (of the flattened tensor when axis is None). exclusive: each
    element gets the sum of those before it; reverse: sums run from the end (ONNX CumSum)."""
    if out is not None:
        return ops.cumsum(x, axis, exclusive=exclusive, reverse=reverse, dtype=dtype, out=out,
                          dim=dim)
    if _plain(x):
        return ops.cumsum(x, axis, exclusive=exclusive, reverse=reverse, dtype=dtype, dim=dim)
    x = _prepare(x, dtype)
    return CumSum(_axis_arg(axis, dim), exclusive, reverse)(x)


# ---- no gradient: the plain ops, with shapes for placeholders -----------------------------

class ShapeOnly(Reduction):
    """A reduction without a derivative (argmax, any, ...): the plain op, as a Function so
    that placeholders (compile) take it on meta tensors."""

    def __init__(self, op, axis, keepdims, dtype):
        super().__init__(axis, keepdims)
        self.op, self.dtype = op, dtype

    def forward(self, x):
        return getattr(ops, self.op)(x, self.axis, self.keepdims)


def _shape_only(name, dtype):
    plain = getattr(ops, name)

    def f(x, *args, **kwargs):
        if x.__class__ is not Placeholder and not (tracing(x) and kwargs.get("out") is None):
            return plain(x, *args, **kwargs)
        axis = args[0] if args else kwargs.get("axis", kwargs.get("dim"))
        keep = args[1] if len(args) > 1 else kwargs.get("keepdims", kwargs.get("keepdim", False))
        return ShapeOnly(name, axis, bool(keep), dtype)(x)
    f.__name__ = name
    f.__doc__ = plain.__doc__
    return f


argmax = _shape_only("argmax", _dt.int64)
argmin = _shape_only("argmin", _dt.int64)
any = _shape_only("any", _dt.bool_)  # noqa: A001
all = _shape_only("all", _dt.bool_)  # noqa: A001
count_nonzero = _shape_only("count_nonzero", _dt.int64)

__all__ = ["sum", "mean", "max", "min", "amax", "amin", "prod", "logsumexp", "vector_norm",
           "norm", "var", "std", "cumsum", "argmax", "argmin", "any", "all", "count_nonzero"]
