"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
ReduceLogSum, ReduceLogSumExp, ReduceSumSquare.

Their axes are an attribute until an opset (13 for ReduceSum, 18 for the rest) made them an
optional input; no axes means every axis, unless noop_with_empty_axes asks for none (the
op's element-wise part still applies: ReduceL1 gives |x|). Reducing an empty set gives the
reduction's identity (0 for sums, 1 for products, -inf for max and log-sums).
"""

import math

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ...autograd.reduce import (CumSum, Extreme, LogSumExp, Mean, Prod, ShapeOnly, Sum, Var,
                                VectorNorm)
from ...ops._util import norm_axes, norm_axis
from ...ops.reduce import _scalar_axis
from ..registry import exports, onnx_op
from ._util import axis_of, const, F, float_input, via_float32


def _axes(n, x, axes_input, input_since):
    if n.opset >= input_since:
        axes = n.ints(axes_input, "axes") if axes_input is not None else None
        noop = bool(n.attr("noop_with_empty_axes", 0))
    else:
        axes, noop = n.attr("axes"), False
    if x.ndim == 0:
        return ()
    if not axes:
        return () if noop else tuple(range(x.ndim))
    axes = [axis_of(n, a, x.ndim, "axes") for a in axes]
    if len(set(axes)) != len(axes):
        raise n.error(f"axes {axes} repeat an axis", errors.ValueError)
    return tuple(sorted(axes))


def _lowest(dtype):
    if dtype.is_floating:
        return -np.inf
    return False if dtype.name == "bool" else np.iinfo(dtype.np).min


def _highest(dtype):
    if dtype.is_floating:
        return np.inf
    return True if dtype.name == "bool" else np.iinfo(dtype.np).max


def _reducer(op_type, fn, empty):
    """Registers ``op_type``: fn(x, axes, keepdims) reduces; empty(dtype) is its value over
    an empty set."""
    input_since = 13 if op_type == "ReduceSum" else 18

    @onnx_op(op_type)
    @via_float32
    def handler(n, x, axes=None):
        axes = _axes(n, x, axes, input_since)
        keep = bool(n.attr("keepdims", 1))
        if x.size == 0:
            shape = [1 if a in axes else d for a, d in enumerate(x.shape)] if keep else \
                [d for a, d in enumerate(x.shape) if a not in axes]
            return const(np.full(shape, empty(x.dtype)).astype(x.dtype.np), like=x)
        y = fn(x, axes, keep)
        # integer inputs keep their dtype (ReduceL2 of ints truncates, as ONNX's reference)
        return y if y.dtype == x.dtype else F.cast(y, x.dtype.name)
    handler.__name__ = op_type
    return handler


def _sum(x, axes, keep):
    return F.sum(x, axis=axes, keepdims=keep)


_reducer("ReduceSum", _sum, lambda dt: 0)
_reducer("ReduceMean", lambda x, a, k: F.mean(x, axis=a, keepdims=k), lambda dt: np.nan)
_reducer("ReduceMax", lambda x, a, k: F.max(x, axis=a, keepdims=k), _lowest)
_reducer("ReduceMin", lambda x, a, k: F.min(x, axis=a, keepdims=k), _highest)
_reducer("ReduceProd", lambda x, a, k: F.prod(x, axis=a, keepdims=k), lambda dt: 1)
_reducer("ReduceL1", lambda x, a, k: _sum(F.abs(x), a, k), lambda dt: 0)
_reducer("ReduceL2", lambda x, a, k: F.sqrt(_sum(F.square(x), a, k)), lambda dt: 0)
_reducer("ReduceSumSquare", lambda x, a, k: _sum(F.square(x), a, k), lambda dt: 0)
_reducer("ReduceLogSum", lambda x, a, k: F.log(_sum(x, a, k)), lambda dt: -np.inf)
_reducer("ReduceLogSumExp", lambda x, a, k: F.logsumexp(x, axis=a, keepdims=k),
         lambda dt: -np.inf)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- reductions --------------------------------------------------------------------------

def _rule_axes(f, x):
    return list(norm_axes(_scalar_axis(x, f.axis), x.ndim, f.op))


@exports(Sum, Prod)
def export_sum_prod(g, f, xs, ys):
    (x,), (y,) = xs, ys
    src = x.name if x.dtype.is_floating or x.dtype is _dt.int64 else g.cast(x.name, _dt.int64)
    g.reduce("ReduceSum" if isinstance(f._fn, Sum) else "ReduceProd", src, _rule_axes(f, x),
             f.keepdims, out=y.name)


# hl reductions that are one ONNX Reduce* each (float_input: hl's mean of integers is float)
_REDUCE_AS = {Mean: "ReduceMean", LogSumExp: "ReduceLogSumExp"}


@exports(Mean, LogSumExp, Extreme)
def export_reduction(g, f, xs, ys):
    (x,), (y,) = xs, ys
    if isinstance(f._fn, Extreme):
        op, src = ("ReduceMax" if f.op == "max" else "ReduceMin"), x.name
    else:
        op, src = _REDUCE_AS[type(f._fn)], float_input(g, x)
    g.reduce(op, src, _rule_axes(f, x), f.keepdims, out=y.name)


@exports(VectorNorm)
def export_vector_norm(g, f, xs, ys):
    (x,), (y,) = xs, ys
    axes, keep, p = _rule_axes(f, x), f.keepdims, f.ord
    src = float_input(g, x)
    if p == 2:
        return g.reduce("ReduceL2", src, axes, keep, out=y.name)
    if p == 1:
        return g.reduce("ReduceL1", src, axes, keep, out=y.name)
    if p in (math.inf, -math.inf):
        return g.reduce("ReduceMax" if p > 0 else "ReduceMin", g.op("Abs", [src]), axes, keep,
                        out=y.name)
    dtype = x.dtype if x.dtype.is_floating else _dt.float32
    if p == 0:  # how many are not zero
        nz = g.cast(g.op("Not", [g.op("Equal", [src, g.scalar(0.0, dtype)])]), dtype)
        return g.reduce("ReduceSum", nz, axes, keep, out=y.name)
    powered = g.op("Pow", [g.op("Abs", [src]), g.scalar(float(p), dtype)])
    total = g.reduce("ReduceSum", powered, axes, keep)
    g.op("Pow", [total, g.scalar(1.0 / float(p), dtype)], out=y.name)


@exports(Var)
def export_var(g, f, xs, ys):
    """sum((x - mean)^2) / (n - ddof), n the number of elements reduced (read from the shape
    when a reduced axis is dynamic); std its square root."""
    (x,), (y,) = xs, ys
    axes = _rule_axes(f, x)
    src = float_input(g, x)
    dtype = x.dtype if x.dtype.is_floating else _dt.float32
    d = g.op("Sub", [src, g.reduce("ReduceMean", src, axes, True)])
    ss = g.reduce("ReduceSum", g.op("Mul", [d, d]), axes, f.keepdims)
    if all(not x.dynamic(a) for a in axes):
        n = 1
        for a in axes:
            n *= x.shape[a]
        denom = g.scalar(float(max(n - f.ddof, 0)), dtype)
    else:
        sizes = g.op("Gather", [g.op("Shape", [x.name]), g.ints(axes)], axis=0)
        n = g.cast(g.reduce("ReduceProd", sizes, [0], False), dtype)
        denom = g.op("Max", [g.op("Sub", [n, g.scalar(float(f.ddof), dtype)]),
                             g.scalar(0.0, dtype)])
    v = g.op("Div", [ss, denom])
    if f.std:
        return g.op("Sqrt", [v], out=y.name)
    g.op("Identity", [v], out=y.name)


@exports(ShapeOnly)
def export_shape_only(g, f, xs, ys):
    """argmax, argmin, any, all, count_nonzero."""
    (x,), (y,) = xs, ys
    op = f.op
    if op in ("argmax", "argmin"):
        onnx_op = "ArgMax" if op == "argmax" else "ArgMin"
        axis = _scalar_axis(x, f.axis)
        if axis is None:  # over the flattened tensor
            flat = g.op("Reshape", [x.name, g.ints([-1])])
            r = g.op(onnx_op, [flat], axis=0, keepdims=0)
            if f.keepdims:
                return g.op("Reshape", [r, g.ints([1] * x.ndim)], out=y.name)
            return g.op("Identity", [r], out=y.name)
        return g.op(onnx_op, [x.name], out=y.name, axis=norm_axis(axis, x.ndim, op),
                    keepdims=int(f.keepdims))
    truth = x.name if x.dtype is _dt.bool_ else g.cast(x.name, _dt.bool_)
    axes = _rule_axes(f, x)
    if op == "count_nonzero":
        return g.reduce("ReduceSum", g.cast(truth, _dt.int64), axes, f.keepdims, out=y.name)
    # any / all: ONNX reduces no bools, so through int32
    r = g.reduce("ReduceMax" if op == "any" else "ReduceMin", g.cast(truth, _dt.int32), axes,
                 f.keepdims)
    g.cast(r, _dt.bool_, out=y.name)


@exports(CumSum)
def export_cumsum(g, f, xs, ys):
    (x,), (y,) = xs, ys
    src = x.name if x.dtype.is_floating or x.dtype is _dt.int64 else g.cast(x.name, _dt.int64)
    axis = _scalar_axis(x, f.axis)
    if axis is None:  # over the flattened tensor
        src, axis = g.op("Reshape", [src, g.ints([-1])]), 0
    else:
        axis = norm_axis(axis, x.ndim, "cumsum")
    g.op("CumSum", [src, g.const(np.asarray(axis, dtype=np.int64))], out=y.name,
         exclusive=int(f.exclusive), reverse=int(f.reverse))
