"""Shape ops with gradients: the views (reshape, permute, squeeze, expand, flip, basic
indexing, split) stay views in forward, and the copies (concat, stack, pad, tile) move dy
back to where each element came from.

Shape inference for the views runs the real view op on a *probe*: one element seen through
zero strides with the input's shape. It allocates nothing, and it gives exactly the plain
op's output shape and its error for a bad argument.
"""
import numpy as np

from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, norm_axis
from ..ops.shape import _PAD_MODES, pad_amounts
from .function import Function, sum_to
from .mode import state as _grad
from .placeholder import Placeholder

_PROBE_SCALARS = {}


def probe(x):
    """A tensor of x's shape and dtype without memory: a 0-d zero expanded to x.shape."""
    s = _PROBE_SCALARS.get(x.dtype)
    if s is None:
        s = _PROBE_SCALARS[x.dtype] = ops.zeros(dtype=x.dtype)
    return ops.expand_forward(s, *x.shape)


def _plain(x):
    """x is a tensor whose ops need no recording (no gradient wanted, or grad mode off)."""
    return x.__class__ is Tensor and not (x.requires_grad and _grad.enabled)


def _desc(x):
    return f"{tuple(x.shape)} {x.dtype.name}"


class Rearrange(Function):
    """y = op(x, *args) for an op that keeps the elements in order and only renames the axes
    (reshape, view, flatten, squeeze, unsqueeze): dx is dy reshaped to x's shape."""

    def __init__(self, op, *args, kernel):
        self.op, self.args, self.kernel = op, args, kernel

    @property
    def name(self):
        return self.op.__name__

    def forward(self, x):
        self.x_shape = x.shape
        return self.kernel(x, *self.args)

    def backward(self, dy):
        return ops.reshape_forward(dy, *self.x_shape)


# A Rearrange record keeps the op users called (its name is the exporter's key) and the
# kernel its forward runs.

def reshape(x, *shape):
    """x with a new shape (one entry may be -1): a view when the strides allow, else a copy."""
    if _plain(x):
        return ops.reshape_forward(x, *shape)
    return Rearrange(reshape, *shape, kernel=ops.reshape_forward)(x)


def view(x, *shape):
    """Like reshape, but never copies: raises when the strides do not allow a view."""
    if _plain(x):
        return ops.view_forward(x, *shape)
    return Rearrange(view, *shape, kernel=ops.view_forward)(x)


def flatten(x, start_dim=0, end_dim=-1):
    """Axes start_dim..end_dim merged into one."""
    if _plain(x):
        return _flatten(x, start_dim, end_dim)
    return Rearrange(flatten, start_dim, end_dim, kernel=_flatten)(x)


def _flatten(x, start_dim, end_dim):
    if x.ndim == 0:
        return ops.reshape_forward(x, 1)
    s, e = norm_axis(start_dim, x.ndim, "flatten"), norm_axis(end_dim, x.ndim, "flatten")
    shp = x.shape
    merged = -1 if 0 not in shp else int(np.prod(shp[s:e + 1]))
    return ops.reshape_forward(x, *shp[:s], merged, *shp[e + 1:])


def squeeze(x, axis=None):
    """Removes size-1 axes: all of them (axis=None) or those named (an int or a sequence)."""
    if _plain(x):
        return ops.squeeze_forward(x, axis)
    return Rearrange(squeeze, axis, kernel=ops.squeeze_forward)(x)


def unsqueeze(x, axis):
    """A new axis of size 1 at position axis."""
    if _plain(x):
        return ops.unsqueeze_forward(x, axis)
    return Rearrange(unsqueeze, axis, kernel=ops.unsqueeze_forward)(x)


expand_dims = unsqueeze


class Permute(Function):
    def __init__(self, axes):
        self.axes = axes

    def forward(self, x):
        return ops.permute_forward(x, *self.axes)

    def backward(self, dy):
        n = len(self.axes)
        inverse = [0] * n
        for i, a in enumerate(self.axes):
            inverse[a % n] = i
        return ops.permute_forward(dy, *inverse)


def permute(x, *axes):
    """The axes reordered (a view): axis i of the result is axis axes[i] of x."""
    if _plain(x):
        return ops.permute_forward(x, *axes)
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    return Permute(tuple(int(a) for a in axes))(x)


def transpose(x, *axes):
    """transpose() reverses the axes; transpose(a, b) swaps two (PyTorch);
    transpose((2, 0, 1)) permutes (numpy)."""
    if len(axes) == 1 and isinstance(axes[0], (tuple, list)):
        axes = tuple(axes[0])
    if not axes:
        return permute(x, *reversed(range(x.ndim)))
    if len(axes) == 2 and x.ndim != 2:
        a, b = norm_axis(axes[0], x.ndim, "transpose"), norm_axis(axes[1], x.ndim, "transpose")
        perm = list(range(x.ndim))
        perm[a], perm[b] = perm[b], perm[a]
        return permute(x, *perm)
    return permute(x, *axes)


class Expand(Function):
    def __init__(self, shape):
        self.shape = shape

    def forward(self, x):
        self.x_shape = x.shape
        return ops.expand_forward(x, *self.shape)

    def backward(self, dy):
        return sum_to(dy, self.x_shape)


def expand(x, *shape):
    """x broadcast to shape (-1 keeps a dimension); a view with zero strides."""
    if _plain(x):
        return ops.expand_forward(x, *shape)
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return Expand(tuple(int(s) for s in shape))(x)


broadcast_to = expand


class Flip(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        return ops.flip_forward(x, self.axis)

    def backward(self, dy):
        return ops.flip_forward(dy, self.axis)


def flip(x, axis=None):
    """The order of elements reversed along the given axes (all by default); a view."""
    if _plain(x):
        return ops.flip_forward(x, axis)
    return Flip(axis)(x)


# ---- indexing ----------------------------------------------------------------------------

class BasicIndex(Function):
    """x[key] for ints, slices (any step), None and ...: a view. Its gradient is dy written
    through the same key into zeros (each element of x appears at most once in a view)."""

    def __init__(self, key):
        self.key = key

    def forward(self, x):
        self.x_shape = x.shape
        return ops.getitem_forward(x, self.key)

    def backward(self, dy):
        dx = ops.zeros(*self.x_shape, dtype=dy.dtype, device=dy.device)
        ops.setitem(dx, self.key, dy)
        return dx


class Split(Function):
    """Views of x along axis (split or chunk); the gradient joins the parts' gradients."""

    def __init__(self, op, parts, axis, kernel):
        self.op, self.parts, self.axis, self.kernel = op, parts, axis, kernel

    @property
    def name(self):
        return self.op.__name__

    def forward(self, x):
        self.axis = norm_axis(self.axis, max(x.ndim, 1), self.name)
        return tuple(self.kernel(x, self.parts, self.axis))

    def backward(self, *dys):
        return ops.concat_forward(list(dys), self.axis)


def split(x, sizes_or_sections, axis=0):
    """Views of x along axis: into n equal parts (an int), or of the sizes listed."""
    if _plain(x):
        return ops.split_forward(x, sizes_or_sections, axis)
    return list(Split(split, sizes_or_sections, axis, ops.split_forward)(x))


def chunk(x, chunks, axis=0):
    """PyTorch's chunk: parts of ceil(n / chunks) along axis (the last may be smaller)."""
    if _plain(x):
        return _chunk(x, chunks, axis)
    return list(Split(chunk, chunks, axis, _chunk)(x))


def _chunk(x, chunks, axis):
    if x.ndim == 0:
        raise errors.IndexError("chunk: a 0-d tensor has no axis to split")
    if int(chunks) <= 0:
        raise errors.ValueError(f"chunk: chunks must be positive, got {chunks}")
    n = x.shape[norm_axis(axis, x.ndim, "chunk")]
    if n == 0:  # PyTorch gives `chunks` empty parts
        return ops.split_forward(x, [0] * int(chunks), axis)
    step = -(-n // chunks)
    return ops.split_forward(x, [step] * (n // step) + ([n % step] if n % step else []), axis)


class Concat(Function):
    def __init__(self, axis):
        self.axis = axis

    def forward(self, *xs):
        self.axis = norm_axis(self.axis, xs[0].ndim, "concat")
        self.sizes = [x.shape[self.axis] for x in xs]
        return ops.concat_forward(xs, self.axis)

    def backward(self, dy):
        return tuple(ops.split_forward(dy, self.sizes, self.axis))


def _joinable(xs, op):
    """xs as tensors (or placeholders) of one dtype, the casts recorded."""
    from .binary import cast
    from .. import dtypes as _dt
    xs = [x if isinstance(x, (Tensor, Placeholder)) else as_tensor(x) for x in xs]
    if not xs:
        raise errors.ValueError(f"{op}: needs at least one tensor")
    d = xs[0].dtype
    for x in xs[1:]:
        d = _dt.promote(d, x.dtype)
    return [x if x.dtype is d else cast(x, d) for x in xs]


def concat(xs, axis=0):
    """Joins tensors along an existing axis (dtypes are promoted together)."""
    xs = _joinable(xs, "concat")
    if all(_plain(x) for x in xs):
        return ops.concat_forward(xs, axis)
    return Concat(axis)(*xs)


concatenate = cat = concat


def stack(xs, axis=0):
    """Joins tensors of one shape along a new axis."""
    xs = _joinable(xs, "stack")
    axis = norm_axis(axis, xs[0].ndim + 1, "stack")
    return concat([unsqueeze(x, axis) for x in xs], axis)


# ---- pad and tile ------------------------------------------------------------------------

class Pad(Function):
    """Pads (or, with negative amounts, crops) x; see hl.ops.pad_forward.

    Gradient: constant padding passes dy's inner part back (a pad with the amounts negated);
    reflect and edge padding copy an element to several places, so each axis's gradient
    adds those places up (gather_grad through the index map numpy.pad gives on arange)."""

    def __init__(self, flat, mode, value):
        self.flat, self.mode, self.value = flat, mode, value

    def forward(self, x):
        self.x_shape = x.shape
        return ops.pad_forward(x, self.flat, self.mode, self.value)

    def backward(self, dy):
        nd = len(self.x_shape)
        begins, ends = self.flat[:nd], self.flat[nd:]
        if self.mode == "constant":
            return ops.pad_forward(dy, [-p for p in self.flat])
        np_mode = "reflect" if self.mode == "reflect" else "edge"
        kept = [n + min(b, 0) + min(e, 0) for n, b, e in zip(self.x_shape, begins, ends)]
        shape = list(dy.shape)
        for d in range(nd):
            b, e = max(begins[d], 0), max(ends[d], 0)
            if b or e:  # element j of dy's axis d came from element src[j] of x's
                src = np.pad(np.arange(kept[d], dtype=np.int64), (b, e), mode=np_mode)
                shape[d] = kept[d]
                dy = ops.gather_grad(dy, as_tensor(src, device=dy.device), d, shape)
        crops = [max(-b, 0) for b in begins] + [max(-e, 0) for e in ends]
        return ops.pad_forward(dy, crops) if any(crops) else dy


def pad(x, pads, mode="constant", value=0.0):
    """Pads (or, with negative amounts, crops) x; see hl.ops.pad_forward for the styles of pads.
    mode: 'constant' (with value), 'reflect' or 'edge' ('replicate')."""
    if _plain(x) or not isinstance(x, (Tensor, Placeholder)):
        return ops.pad_forward(x, pads, mode, value)
    if mode not in _PAD_MODES:
        raise errors.ValueError(f"pad: mode must be one of {sorted(_PAD_MODES)}, got {mode!r}")
    return Pad(pad_amounts(pads, x.ndim), mode, value)(x)


class Tile(Function):
    """numpy.tile with repeats as long as x's ndim (the wrapper adds leading axes first).
    Gradient: each repeated axis viewed as (repeats, size) and summed over the repeats."""

    def __init__(self, repeats):
        self.repeats = repeats

    def forward(self, x):
        self.x_shape = x.shape
        return ops.tile_forward(x, self.repeats)

    def backward(self, dy):
        shape = list(dy.shape)
        for d, (n, r) in enumerate(zip(self.x_shape, self.repeats)):
            if r == 1:
                continue
            before = 1
            for s in shape[:d]:
                before *= s
            after = 1
            for s in shape[d + 1:]:
                after *= s
            # 4-D whatever x's rank: (before, repeats, n, after), summed over the repeats
            dy = ops.reduction("sum", ops.reshape_forward(dy, before, r, n, after), 1)
            shape[d] = n
            dy = ops.reshape_forward(dy, *shape)
        return dy


def tile(x, repeats):
    """numpy.tile: x repeated along each axis; repeats shorter than x's ndim apply to the
    last axes, longer ones add leading axes."""
    if _plain(x) or not isinstance(x, (Tensor, Placeholder)):
        return ops.tile_forward(x, repeats)
    repeats = [int(repeats)] if isinstance(repeats, (int, np.integer)) else [
        int(r) for r in repeats]
    if len(repeats) < x.ndim:
        repeats = [1] * (x.ndim - len(repeats)) + repeats
    while x.ndim < len(repeats):
        x = unsqueeze(x, 0)
    return Tile(repeats)(x)


__all__ = ["reshape", "view", "flatten", "permute", "transpose", "squeeze", "unsqueeze",
           "expand_dims", "expand", "broadcast_to", "flip", "split", "chunk", "concat",
           "concatenate", "cat", "stack", "pad", "tile"]
