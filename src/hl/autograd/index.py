"""Indexing ops with gradients: gather (take, index_select), gather_elements,
scatter_elements and topk. one_hot and nonzero have no gradient and stay the plain ops.

A gathered element may be picked several times; its gradient is the sum over the picks.
gather's backward is the core's gather_grad, which adds repeats (in a fixed order, so the
result does not depend on the thread count); gather_elements' is a scatter with 'add'.
Indices never get a gradient.
"""
import numbers

import numpy as np

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, norm_axis
from ..ops.index import _indices
from .function import Function, tracing
from .placeholder import Placeholder
from .shape import _desc, _plain, reshape


def _index_arg(indices, x, op):
    """indices as an int32/int64 tensor on x's device."""
    return _indices(indices, x, op)


def _data_arg(x):
    return x if isinstance(x, (Tensor, Placeholder)) else as_tensor(x)


class Gather(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x, idx):
        if self.needs:
            self.x_shape, self.idx = x.shape, idx
        return ops.gather_forward(x, idx, self.axis)

    def backward(self, dy):
        return ops.gather_grad(dy, self.idx, self.axis, self.x_shape), None


def gather(x, indices, axis=0, out=None):
    """ONNX Gather / numpy.take along one axis: the result has shape
    x.shape[:axis] + indices.shape + x.shape[axis+1:]."""
    if out is not None:
        return ops.gather_forward(x, indices, axis, out=out)
    x = _data_arg(x)
    idx = _index_arg(indices, x, "gather")
    if _plain(x) and _plain(idx):
        return ops.gather_forward(x, idx, axis)
    return Gather(axis)(x, idx)


def take(x, indices, axis=None, out=None):
    """numpy.take: like gather, over the flattened x when axis is None."""
    x = _data_arg(x)
    if axis is None:
        x, axis = reshape(x, -1), 0
    return gather(x, indices, axis, out=out)


def index_select(x, axis, indices, out=None):
    """torch.index_select (argument order: x, axis, indices): gather with 1-D indices."""
    x = _data_arg(x)
    idx = _index_arg(indices, x, "index_select")
    if idx.ndim != 1:
        raise errors.ShapeError(f"index_select: indices must be 1-D, got shape {idx.shape}")
    return gather(x, idx, axis, out=out)


def _scatter_add_into_zeros(shape, idx, updates, axis):
    zeros = ops.zeros(*shape, dtype=updates.dtype, device=updates.device)
    return ops.scatter_elements_forward(zeros, idx, updates, axis, "add")


class GatherElements(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x, idx):
        if self.needs:
            self.x_shape, self.idx = x.shape, idx
        return ops.gather_elements_forward(x, idx, self.axis)

    def backward(self, dy):
        return _scatter_add_into_zeros(self.x_shape, self.idx, dy, self.axis), None


def gather_elements(x, indices, axis=0, out=None):
    """ONNX GatherElements / torch.gather: out[..., j, ...] = x[..., indices[..., j, ...], ...]
    along axis; the result has indices' shape."""
    if out is not None:
        return ops.gather_elements_forward(x, indices, axis, out=out)
    x = _data_arg(x)
    idx = _index_arg(indices, x, "gather_elements")
    if _plain(x) and _plain(idx):
        return ops.gather_elements_forward(x, idx, axis)
    return GatherElements(axis)(x, idx)


class ScatterElements(Function):
    """A copy of x with updates written at indices along axis (reduction 'none' or 'add').

    With 'none' an overwritten element of x gets no gradient, and each update gets dy at the
    place it was written to (torch.scatter's convention: of repeated indices, every update
    gets that gradient, though only one of them survives in the output)."""

    def __init__(self, axis, reduction):
        self.axis, self.reduction = axis, reduction

    def forward(self, x, idx, updates):
        if self.needs and self.reduction not in ("none", None, "add", "sum") and (
                self.needs[0] or self.needs[2]):
            raise errors.UnsupportedError(
                f"scatter_elements: reduction {self.reduction!r} has no gradient here (only "
                f"'none' and 'add' do); scatter under hl.no_grad() or on detached tensors")
        if self.needs:
            self.idx = idx
        return ops.scatter_elements_forward(x, idx, updates, self.axis, self.reduction)

    def backward(self, dy):
        nx, _, nu = self.needs
        dx = du = None
        if nx:
            dx = dy if self.reduction in ("add", "sum") else ops.scatter_elements_forward(
                dy, self.idx, 0.0, self.axis)
        if nu:
            du = ops.gather_elements_forward(dy, self.idx, self.axis)
        return dx, None, du


def scatter_elements(x, indices, updates, axis=0, reduction="none", out=None):
    """ONNX ScatterElements: a copy of x with updates written at the positions indices name
    along axis. reduction: 'none' (replace), 'add', 'mul', 'max', 'min'; gradients flow
    through 'none' and 'add'. updates has indices' shape, or is a scalar."""
    if out is not None:
        return ops.scatter_elements_forward(x, indices, updates, axis, reduction, out=out)
    x = _data_arg(x)
    idx = _index_arg(indices, x, "scatter_elements")
    if not isinstance(updates, (Tensor, Placeholder)):
        updates = ops.full(idx.shape, updates, dtype=x.dtype, device=x.device) if isinstance(
            updates, (numbers.Number, np.generic)) else as_tensor(updates, dtype=x.dtype,
                                                                  device=x.device)
    elif updates.dtype is not x.dtype:
        from .binary import cast
        updates = cast(updates, x.dtype)
    if _plain(x) and _plain(updates) and _plain(idx):
        return ops.scatter_elements_forward(x, idx, updates, axis, reduction)
    return ScatterElements(axis, reduction)(x, idx, updates)


class TopK(Function):
    """The k best values along axis and their positions; only the values have a gradient,
    which goes back to the positions they came from."""

    def __init__(self, k, axis, largest, sorted):
        self.k, self.axis, self.largest, self.sorted = k, axis, largest, sorted

    def forward(self, x):
        v, i = ops.topk_forward(x, self.k, self.axis, self.largest, self.sorted)
        if self.needs:
            self.x_shape, self.idx = x.shape, i
            self.axis = norm_axis(self.axis, x.ndim, "topk")
        return v, i

    def backward(self, dv, di):
        return _scatter_add_into_zeros(self.x_shape, self.idx, dv, self.axis)


def topk(x, k, axis=-1, largest=True, sorted=True):  # noqa: A002
    """The k largest (or smallest) elements along axis and their int64 positions, best first
    (see hl.ops.topk_forward). The values carry the gradient; the positions are plain tensors."""
    x = _data_arg(x)
    if _plain(x):
        return ops.topk_forward(x, k, axis, largest, sorted)
    v, i = TopK(int(k), axis, largest, sorted)(x)
    if i.__class__ is Tensor and not tracing(x):  # positions are data, not a function of x
        i = i.detach()  # no history (to_onnx's trace keeps following them)
    return v, i


__all__ = ["gather", "take", "index_select", "gather_elements", "scatter_elements", "topk"]
