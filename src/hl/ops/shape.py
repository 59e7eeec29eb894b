"""The shape kernels: views (reshape, permute, squeeze, expand, flip, split, indexing) that
share storage, and the copies that change shape (concat, pad, tile), each ``<op>_forward``;
and setitem, which has no gradient and is defined here once. The ops users call (hl.reshape,
hl.flatten, hl.stack...) are defined once, with their gradients, in hl.autograd.shape."""
import numbers

import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, norm_axis, norm_axes


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def reshape_forward(x, *shape):
    """x with a new shape (one entry may be -1): a view when the strides allow, else a copy."""
    shape = _shape_arg(shape)
    return _wrap(_core.call("reshape", x._h, len(shape), list(shape), _core.OUT), x._dtype)


def view_forward(x, *shape):
    """Like reshape, but never copies: raises when the strides do not allow a view."""
    shape = _shape_arg(shape)
    return _wrap(_core.call("view_reshape", x._h, len(shape), list(shape), _core.OUT), x._dtype)


def permute_forward(x, *axes):
    axes = _shape_arg(axes)
    if len(axes) != x.ndim:
        raise errors.ValueError(f"permute: {len(axes)} axes given for a tensor of {x.ndim} "
                                f"dimensions")
    return _wrap(_core.call("view_permute", x._h, list(axes), _core.OUT), x._dtype)


def squeeze_forward(x, axis=None):
    """Removes size-1 axes: all of them (axis=None) or those named (an int or a sequence)."""
    axes = [] if axis is None else ([axis] if isinstance(axis, int) else list(axis))
    if axis is not None and not axes:  # an empty list names no axis (the core's 0 means all)
        return permute_forward(x, *range(x.ndim))
    return _wrap(_core.call("view_squeeze", x._h, len(axes), axes, _core.OUT), x._dtype)


def unsqueeze_forward(x, axis):
    return _wrap(_core.call("view_unsqueeze", x._h, int(axis), _core.OUT), x._dtype)


def expand_forward(x, *shape):
    """x broadcast to shape (-1 keeps a dimension); a view with zero strides."""
    shape = _shape_arg(shape)
    return _wrap(_core.call("view_expand", x._h, len(shape), list(shape), _core.OUT), x._dtype)


def flip_forward(x, axis=None):
    axes = list(range(x.ndim)) if axis is None else (
        [axis] if isinstance(axis, int) else list(axis))
    return _wrap(_core.call("view_flip", x._h, len(axes), axes, _core.OUT), x._dtype)


def split_forward(x, sizes_or_sections, axis=0):
    """Views of x along axis: into n equal parts (an int), or of the sizes listed."""
    if x.ndim == 0:
        raise errors.IndexError("split: a 0-d tensor has no axis to split")
    axis = norm_axis(axis, x.ndim, "split")
    n = x.shape[axis]
    if isinstance(sizes_or_sections, numbers.Integral):
        k = int(sizes_or_sections)
        if k <= 0 or n % k:
            raise errors.ShapeError(f"split: axis {axis} of size {n} does not divide into {k} "
                                    f"equal parts")
        sizes = [n // k] * k
    else:
        sizes = [int(s) for s in sizes_or_sections]
    hs = _core.call_many_out("view_split", len(sizes), x._h, axis, len(sizes), sizes)
    return [_wrap(h, x._dtype) for h in hs]


def concat_forward(xs, axis=0):
    """Joins tensors along an existing axis (dtypes are promoted together)."""
    xs = [as_tensor(x) for x in xs]
    if not xs:
        raise errors.ValueError("concat: needs at least one tensor")
    d = xs[0]._dtype
    for x in xs[1:]:
        d = _dt.promote(d, x._dtype)
    xs = [x if x._dtype is d else x.astype(d) for x in xs]
    arr = _core.tensor_array([x._h for x in xs])
    return _wrap(_core.call("concat", len(xs), arr, int(axis), _core.OUT), d)


_PAD_MODES = {"constant": 0, "reflect": 1, "edge": 2, "replicate": 2}


def pad_forward(x, pads, mode="constant", value=0.0):
    """Pads (or, with negative amounts, crops) x.

    pads: numpy-style ((before, after), ...) per axis (one pair, or one int, applies to every
    axis, as in numpy.pad), or ONNX-style flat [begins..., ends...] (2 * ndim ints; for a 1-D
    tensor the two styles agree). Negative amounts crop first (ONNX Pad); reflect and edge
    then pad from what is left. mode: 'constant' (with value), 'reflect' (numpy's: mirror
    without repeating the edge; each pad must be smaller than the axis), 'edge' (alias
    'replicate'). Note PyTorch's F.pad lists pads from the last axis; this does not."""
    x = as_tensor(x)
    if mode not in _PAD_MODES:
        raise errors.ValueError(f"pad: mode must be one of {sorted(_PAD_MODES)}, got {mode!r}")
    flat = pad_amounts(pads, x.ndim)
    return _wrap(_core.call("pad", x._h, flat, _PAD_MODES[mode], float(value), _core.OUT),
                 x._dtype)


def pad_amounts(pads, ndim):
    """pad's pads argument (any of its styles) as ONNX's flat [begins..., ends...]."""
    if isinstance(pads, numbers.Integral):
        pads = [(pads, pads)] * ndim
    pads = list(pads)
    if pads and isinstance(pads[0], (tuple, list)):
        if len(pads) == 1:
            pads = pads * ndim
        if len(pads) != ndim or any(len(p) != 2 for p in pads):
            raise errors.ValueError(f"pad: {len(pads)} (before, after) pairs for a tensor of "
                                    f"{ndim} dimensions")
        flat = [int(p[0]) for p in pads] + [int(p[1]) for p in pads]
    else:
        flat = [int(p) for p in pads]
    if len(flat) != 2 * ndim:
        raise errors.ValueError(f"pad: expected {2 * ndim} pad amounts for {ndim} "
                                f"dimensions, got {len(flat)}")
    return flat


def tile_forward(x, repeats):
    """numpy.tile: x repeated along each axis; repeats shorter than x's ndim apply to the
    last axes, longer ones add leading axes."""
    x = as_tensor(x)
    if isinstance(repeats, numbers.Integral):
        repeats = [repeats]
    repeats = [int(r) for r in repeats]
    if len(repeats) < x.ndim:
        repeats = [1] * (x.ndim - len(repeats)) + repeats
    while x.ndim < len(repeats):
        x = unsqueeze_forward(x, 0)
    return _wrap(_core.call("tile", x._h, repeats, _core.OUT), x._dtype)


# ---- indexing ----------------------------------------------------------------------------

def _is_advanced(k):
    return isinstance(k, (Tensor, np.ndarray, list)) and not _is_int_key(k)


def _expand_key(key, ndim):
    """The key as a tuple with Ellipsis expanded to full slices."""
    if not isinstance(key, tuple):
        key = (key,)
    n_ell = sum(1 for k in key if k is Ellipsis)
    if n_ell > 1:
        raise errors.IndexError("an index can only have a single ellipsis ('...')")
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    if used > ndim:
        raise errors.IndexError(f"too many indices for a tensor of {ndim} dimensions: {used} "
                                f"were indexed")
    out = []
    for k in key:
        if k is Ellipsis:
            out.extend([slice(None)] * (ndim - used))
        else:
            out.append(k)
    if not n_ell:
        out.extend([slice(None)] * (ndim - used))
    return out


def _basic_index(x, key):
    """x[key] for ints, slices and None: a view."""
    shape = x.shape
    starts, lengths, steps = [], [], []
    selects, new_axes = [], []
    axis = 0
    for k in key:
        if k is None:
            new_axes.append(len(starts) - len(selects) + len(new_axes))
            continue
        n = shape[axis]
        if isinstance(k, slice):
            if k.step == 0:
                raise errors.ValueError("slice step cannot be zero")
            s, e, st = k.indices(n)
            r = range(s, e, st)
            starts.append(r.start if len(r) else 0)
            lengths.append(len(r))
            steps.append(st)
        elif _is_int_key(k):
            i = int(k)
            if not -n <= i < n:
                raise errors.IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            starts.append(i % n if n else 0)
            lengths.append(1)
            steps.append(1)
            selects.append(axis)
        else:
            raise errors.IndexError(f"unsupported index {k!r}: use ints, slices, None, ..., "
                                    f"or one integer/bool array")
        axis += 1
    if len(starts) - len(selects) + len(new_axes) > 8:
        raise errors.ShapeError(f"index: the result would have "
                                f"{len(starts) - len(selects) + len(new_axes)} dimensions; hl "
                                f"tensors have at most 8")
    h = _core.call("view_slice", x._h, starts, lengths, steps, _core.OUT)
    for a in reversed(selects):
        h = _core.call("view_select", h, a, 0, _core.OUT)
    for a in new_axes:
        h = _core.call("view_unsqueeze", h, a, _core.OUT)
    return _wrap(h, x._dtype)


def getitem_forward(x, key):
    """x[key] for basic keys (ints, slices with steps, None, ...): one view. Integer arrays
    and bool masks are hl.autograd.indexing's composites of this and the gather kernel."""
    if type(key) is int and x.ndim:  # the common x[i]: one view call
        return _wrap(_core.call("view_select", x._h, 0, key, _core.OUT), x._dtype)
    if type(key) is tuple and len(key) <= x.ndim and all(type(k) is int for k in key):
        h = x._h  # x[i, j]: one select per int, the last axis first so axis numbers hold
        for axis in range(len(key) - 1, -1, -1):
            h = _core.call("view_select", h, axis, key[axis], _core.OUT)
        return _wrap(h, x._dtype)
    return _basic_index(x, _expand_key(key, x.ndim))


def _is_int_key(k):
    """An int, or a 0-d integer array or tensor (numpy treats those as ints)."""
    if isinstance(k, (numbers.Integral, np.integer)):
        return not isinstance(k, bool)
    if isinstance(k, np.ndarray):
        return k.ndim == 0 and k.dtype.kind in "iu"
    return isinstance(k, Tensor) and k.ndim == 0 and k.dtype.is_integer


def setitem(x, key, value):
    """x[key] = value for basic keys, and x[mask] = value for a bool mask of x's shape."""
    if (isinstance(key, Tensor) and key.dtype is _dt.bool_) or (
            isinstance(key, np.ndarray) and key.dtype == np.bool_):
        mask = as_tensor(key, device=x.device)
        if mask.shape != x.shape:
            raise errors.UnsupportedError(
                f"masked assignment needs a mask of the tensor's shape {x.shape}, got {mask.shape}")
        from .elementwise import select
        select(mask, as_tensor(value, dtype=x.dtype, device=x.device), x, out=x)
        return
    parts = _expand_key(key, x.ndim)
    if any(_is_advanced(k) for k in parts):
        raise errors.UnsupportedError("assignment through an integer-array index is not "
                                      "supported; use scatter_elements")
    target = _basic_index(x, parts)
    src = value if isinstance(value, Tensor) else as_tensor(value, dtype=x.dtype, device=x.device)
    _core.copy_into(target._h, src._h)


__all__ = ["reshape_forward", "view_forward", "permute_forward", "squeeze_forward",
           "unsqueeze_forward", "expand_forward", "flip_forward", "split_forward",
           "concat_forward", "pad_forward", "pad_amounts", "tile_forward", "getitem_forward",
           "setitem"]
