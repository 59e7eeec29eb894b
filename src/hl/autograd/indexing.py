"""numpy-style indexing with gradients: ``x[key]``.

A composite of two families, so it sits above both: basic keys (ints, slices, None, ...)
are one view (shape.BasicIndex); an integer array or a bool mask becomes the plain op's
recipe, each step recorded (a view, index.gather along the array's axis, a permute), so
repeated indices add up through gather's gradient.
"""
import numpy as np

from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor
from ..ops.shape import _expand_key, _is_advanced, _is_int_key
from .index import gather
from .shape import BasicIndex, _plain, permute, reshape

__all__ = ["getitem"]


def _is_mask(key):
    return (isinstance(key, Tensor) and key.dtype.name == "bool") or (
        isinstance(key, np.ndarray) and key.dtype == np.bool_)


def _is_array_key(key):
    if type(key) is tuple:
        return any(_is_advanced(k) for k in key)
    return _is_advanced(key)


def getitem(x, key):
    """numpy indexing: ints, slices (with steps), None, ..., and at most one integer array
    (gathers along its axis) or a bool mask over the leading axes. Basic keys give views;
    an integer array or mask gathers, and its gradient adds up repeated indices."""
    if _plain(x) and (type(key) is int or not _is_array_key(key)):  # (x[i] checked first)
        return ops.getitem_forward(x, key)  # basic keys: one view, nothing to record
    if _is_mask(key):
        mask = as_tensor(key, device=x.device)
        if mask.shape != x.shape[:mask.ndim]:
            raise errors.IndexError(f"boolean index of shape {mask.shape} does not match the "
                                    f"tensor's leading shape {x.shape[:mask.ndim]}")
        idx = ops.reshape_forward(ops.nonzero(ops.reshape_forward(mask, -1)), -1)
        return gather(reshape(x, -1, *x.shape[mask.ndim:]), idx, 0)
    parts = _expand_key(key, x.ndim)
    adv = [i for i, k in enumerate(parts) if _is_advanced(k)]
    if not adv:
        return BasicIndex(key)(x)
    # The plain op's recipe, each step recorded: the basic part of the key as a view, then
    # a gather along the array's axis, then numpy's axis order.
    if len(adv) > 1:
        raise errors.UnsupportedError("indexing with more than one integer array is not "
                                      "supported; index one axis at a time")
    pos = adv[0]
    idx = as_tensor(parts[pos], device=x.device)
    if idx.dtype.name == "bool":
        raise errors.UnsupportedError("a bool mask must be the whole index (x[mask])")
    adv_pos = sorted([pos] + [i for i, k in enumerate(parts) if _is_int_key(k)])
    to_front = adv_pos[-1] - adv_pos[0] + 1 != len(adv_pos)
    parts[pos] = slice(None)
    basic = tuple(parts)
    y = x if all(isinstance(k, slice) and k == slice(None) for k in basic) else \
        BasicIndex(basic)(x)
    axis = sum(1 for k in parts[:pos] if not _is_int_key(k))
    y = gather(y, idx, axis)
    if to_front and axis:
        n = idx.ndim
        y = permute(y, *range(axis, axis + n), *range(axis), *range(axis + n, y.ndim))
    return y
