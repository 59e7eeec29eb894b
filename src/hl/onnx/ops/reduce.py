"""Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
ReduceLogSum, ReduceLogSumExp, ReduceSumSquare.

Their axes are an attribute until an opset (13 for ReduceSum, 18 for the rest) made them an
optional input; no axes means every axis, unless noop_with_empty_axes asks for none (the
op's element-wise part still applies: ReduceL1 gives |x|). Reducing an empty set gives the
reduction's identity (0 for sums, 1 for products, -inf for max and log-sums).
"""
import numpy as np

from ... import errors
from . import onnx_op
from ._util import F, axis_of, const, via_float32


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
