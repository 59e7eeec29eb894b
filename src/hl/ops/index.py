"""The indexing kernels: gather and its gradient, gather_elements, scatter_elements, topk,
and the ops with nothing to differentiate, one_hot and nonzero (defined here once; the
differentiable ones users call, take and index_select among them, are in hl.autograd.index).

Index arguments may be tensors, numpy arrays or lists of int32/int64 (uint8 is widened to
int64). Negative indices count from the end of the axis. Every index value is checked by
the core before anything is written: one out of range raises ``hl.errors.IndexError`` naming
the value, the axis and its size.
"""
import numbers

import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, into

__all__ = ["gather_forward", "gather_grad", "gather_elements_forward",
           "scatter_elements_forward", "one_hot", "nonzero", "topk_forward"]


def _tensor(x, device=None):
    return x if isinstance(x, Tensor) else as_tensor(x, device=device)


def _indices(indices, like, op):
    """indices as an int32/int64 tensor on like's device (like=None: any device)."""
    if not isinstance(indices, Tensor):
        arr = np.asarray(indices)
        if arr.size == 0 and arr.dtype.kind == "f":  # [] comes out of numpy as float64
            arr = arr.astype(np.int64)
        indices = as_tensor(arr, device=None if like is None else like.device)
    elif like is not None and indices.device != like.device:
        raise errors.DeviceError(f"{op}: indices are on {indices.device}, the data on "
                                 f"{like.device}")
    d = indices.dtype
    if d is _dt.int32 or d is _dt.int64:
        return indices
    if d is _dt.uint8:
        return indices.astype(_dt.int64)
    raise errors.DTypeError(f"{op}: indices must be integers (int32 or int64), got "
                            f"{d.name} with shape {indices.shape}")


def gather_forward(x, indices, axis=0, out=None):
    """ONNX Gather / numpy.take along one axis: the result has shape
    x.shape[:axis] + indices.shape + x.shape[axis+1:]. indices may have any shape,
    including 0-d (which removes the axis). Works on every dtype."""
    x = _tensor(x)
    idx = _indices(indices, x, "gather")
    return _wrap(_core.call("gather", x._h, int(axis), idx._h, _core.out(into(out))), x._dtype)


def gather_grad(dy, indices, axis, x_shape, out=None):
    """The gradient of gather(x, indices, axis) for x of shape x_shape: dy added into zeros
    of x_shape at the gathered positions (repeated indices accumulate). float32/float64;
    the result does not depend on the thread count."""
    dy = _tensor(dy)
    idx = _indices(indices, dy, "gather_grad")
    shape = [int(s) for s in x_shape]
    return _wrap(_core.call("gather_grad", dy._h, int(axis), idx._h, len(shape), shape,
                            _core.out(into(out))), dy._dtype)


def gather_elements_forward(x, indices, axis=0, out=None):
    """ONNX GatherElements / torch.gather: out[..., j, ...] = x[..., indices[..., j, ...], ...]
    along axis. indices has x's rank and is no larger than x on the other axes; the result
    has indices' shape."""
    x = _tensor(x)
    idx = _indices(indices, x, "gather_elements")
    return _wrap(_core.call("gather_elements", x._h, int(axis), idx._h, _core.out(into(out))),
                 x._dtype)


_REDUCTIONS = {"none": 0, None: 0, "add": 1, "sum": 1, "mul": 2, "prod": 2, "multiply": 2,
               "max": 3, "amax": 3, "min": 4, "amin": 4}


def scatter_elements_forward(x, indices, updates, axis=0, reduction="none", out=None):
    """ONNX ScatterElements: a copy of x with updates written at the positions indices name
    along axis (the transpose of gather_elements). reduction: 'none' (replace; of repeated
    indices the last in row-major order wins), 'add', 'mul', 'max', 'min' (combined in
    row-major order; max/min propagate NaN). updates has indices' shape, or is a scalar.
    Pass out=x to scatter in place."""
    x = _tensor(x)
    if reduction not in _REDUCTIONS:
        raise errors.ValueError(f"scatter_elements: reduction must be one of 'none', 'add', "
                                f"'mul', 'max', 'min', got {reduction!r}")
    idx = _indices(indices, x, "scatter_elements")
    if isinstance(updates, (numbers.Number, np.generic)):
        from .creation import full
        updates = full(idx.shape, updates, dtype=x.dtype, device=x.device)
    else:
        updates = as_tensor(updates, device=x.device)
        if updates.dtype is not x.dtype:
            updates = updates.astype(x.dtype)
    return _wrap(_core.call("scatter_elements", x._h, int(axis), idx._h, updates._h,
                            _REDUCTIONS[reduction], _core.out(into(out))), x._dtype)


def one_hot(indices, depth, axis=-1, on_value=1, off_value=0, dtype=_dt.float32, out=None):
    """ONNX OneHot: a new axis of size depth at position axis (-1: last) holding on_value
    where the index equals the position and off_value elsewhere. Negative indices count from
    depth; indices outside [-depth, depth) give a row of off_value (as ONNX says)."""
    d = _dt.dtype(dtype)
    idx = _indices(indices, None, "one_hot")
    return _wrap(_core.call("one_hot", idx._h, int(depth), int(axis), float(on_value),
                            float(off_value), d.code, _core.out(into(out))), d)


def nonzero(x):
    """ONNX NonZero: int64 (x.ndim, count) coordinates of the non-zero elements in row-major
    order (numpy.nonzero stacked; -0.0 is zero, NaN is not). The size depends on the data,
    so it cannot be recorded into a graph-mode plan."""
    x = _tensor(x)
    return _wrap(_core.call("nonzero", x._h, _core.OUT), _dt.int64)


def topk_forward(x, k, axis=-1, largest=True, sorted=True):
    """The k largest (or smallest) elements along axis and their int64 positions, best first.
    Equal values keep the lower position first (ONNX TopK); NaN counts as larger than every
    number. The result is always sorted. Raises ValueError when k exceeds the axis size."""
    x = _tensor(x)
    v, i = _core.call("topk", x._h, int(k), int(axis), int(bool(largest)), int(bool(sorted)),
                      _core.OUT, _core.OUT)
    return _wrap(v, x._dtype), _wrap(i, _dt.int64)
