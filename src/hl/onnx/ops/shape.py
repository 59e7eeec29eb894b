"""Shape operators: reshaping and reordering (Reshape, Flatten, Squeeze, Unsqueeze,
Transpose, DepthToSpace, SpaceToDepth) and repeating (Expand, Tile); joining and cutting
are in slicing.py, tensors made from shapes in creation.py.

Sizes, axes and pads arrive as small int64 tensors and are read on the host (``n.ints``);
every shape a node asks for is checked (check_shape) before anything is allocated. The data
itself only goes through F ops, so gradients flow through every handler here.
"""

from ... import errors
from ...autograd.shape import Expand, Permute, Rearrange, Tile
from ...ops._util import norm_axis
from ..registry import exports, onnx_op
from ._util import attr_or_input, axes_of, check_shape, F, prod


# ---- reshaping --------------------------------------------------------------------------

def reshape_target(n, in_shape, shape, allowzero=False):
    """ONNX's Reshape rules: 0 copies the input's dimension (unless allowzero), one -1 is
    inferred; the element count must not change."""
    out = [int(s) for s in shape]
    total = prod(in_shape)
    if any(s < -1 for s in out) or out.count(-1) > 1:
        raise n.error(f"shape {tuple(out)} may hold at most one -1 and no other negative "
                      f"value", errors.ShapeError)
    if allowzero and 0 in out and -1 in out:
        raise n.error(f"shape {tuple(out)} has both 0 and -1 with allowzero=1, so the -1 "
                      f"cannot be inferred", errors.ShapeError)
    if not allowzero:
        for i, s in enumerate(out):
            if s == 0:
                if i >= len(in_shape):
                    raise n.error(f"shape {tuple(out)} copies dimension {i} (a 0) of the "
                                  f"input {tuple(in_shape)}, which has no such dimension",
                                  errors.ShapeError)
                out[i] = in_shape[i]
    if -1 in out:
        known = prod(s for s in out if s != -1)
        if known == 0 or total % known:
            raise n.error(f"cannot reshape {tuple(in_shape)} ({total} elements) to "
                          f"{tuple(shape)}: the -1 cannot be inferred", errors.ShapeError)
        out[out.index(-1)] = total // known
    if prod(out) != total:
        raise n.error(f"cannot reshape {tuple(in_shape)} ({total} elements) to {tuple(shape)} "
                      f"({prod(out)} elements)", errors.ShapeError)
    return out


@onnx_op("Reshape")
def reshape(n, x, shape=None):
    # Before opset 5 the shape was an attribute.
    target = n.attr("shape") if n.opset < 5 else n.ints(shape, "shape")
    if target is None:
        raise n.error("needs a shape", errors.ValueError)
    return F.reshape(x, *reshape_target(n, x.shape, target, bool(n.attr("allowzero", 0))))


@onnx_op("Flatten")
def flatten(n, x):
    # axis may equal ndim (everything goes to the first dimension): axis_of would refuse it.
    axis = n.attr("axis", 1)
    if not -x.ndim <= axis <= x.ndim:
        raise n.error(f"axis {axis} is out of range for a tensor of {x.ndim} dimensions",
                      errors.IndexError)
    axis = axis + x.ndim if axis < 0 else axis
    return F.reshape(x, prod(x.shape[:axis]), prod(x.shape[axis:]))


@onnx_op("Squeeze")
def squeeze(n, x, axes=None):
    axes = attr_or_input(n, "axes", axes, 13)
    if not axes:  # omitted (or empty, as onnxruntime reads it): every axis of size 1
        keep = [d for d in x.shape if d != 1]
    else:
        axes = axes_of(n, axes, x.ndim)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise n.error(f"cannot squeeze axes {bad} of shape {tuple(x.shape)}: they are not "
                          f"of size 1", errors.ShapeError)
        keep = [d for i, d in enumerate(x.shape) if i not in axes]
    return F.reshape(x, *keep)


@onnx_op("Unsqueeze")
def unsqueeze(n, x, axes=None):
    axes = attr_or_input(n, "axes", axes, 13)
    if axes is None:
        raise n.error("needs axes", errors.ValueError)
    rank = x.ndim + len(axes)
    axes = set(axes_of(n, axes, rank))
    dims = iter(x.shape)
    return F.reshape(x, *[1 if i in axes else next(dims) for i in range(rank)])


@onnx_op("Transpose")
def transpose(n, x):
    perm = n.attr("perm", list(range(x.ndim))[::-1])
    if sorted(perm) != list(range(x.ndim)):
        raise n.error(f"perm {list(perm)} is not a permutation of the {x.ndim} axes of "
                      f"{tuple(x.shape)}", errors.ValueError)
    return F.permute(x, *perm)


@onnx_op("DepthToSpace")
def depth_to_space(n, x):
    b, c, h, w, bs = _blocks(n, x)
    if c % (bs * bs):
        raise n.error(f"channels {c} of {tuple(x.shape)} are not divisible by blocksize^2 "
                      f"({bs * bs})", errors.ShapeError)
    c2 = c // (bs * bs)
    if n.attr("mode", "DCR") == "DCR":  # depth, column, row
        t = F.permute(F.reshape(x, b, bs, bs, c2, h, w), 0, 3, 4, 1, 5, 2)
    else:                                # CRD: column, row, depth
        t = F.permute(F.reshape(x, b, c2, bs, bs, h, w), 0, 1, 4, 2, 5, 3)
    return F.reshape(t, b, c2, h * bs, w * bs)


@onnx_op("SpaceToDepth")
def space_to_depth(n, x):
    b, c, h, w, bs = _blocks(n, x)
    if h % bs or w % bs:
        raise n.error(f"spatial size {(h, w)} of {tuple(x.shape)} is not divisible by "
                      f"blocksize {bs}", errors.ShapeError)
    t = F.reshape(x, b, c, h // bs, bs, w // bs, bs)
    if n.attr("mode", "DCR") == "DCR":
        t = F.permute(t, 0, 3, 5, 1, 2, 4)
    else:
        t = F.permute(t, 0, 1, 3, 5, 2, 4)
    return F.reshape(t, b, c * bs * bs, h // bs, w // bs)


def _blocks(n, x):
    bs = n.attr("blocksize")
    if x.ndim != 4:
        raise n.error(f"input must be 4-D (N, C, H, W), got shape {tuple(x.shape)}",
                      errors.ShapeError)
    if bs is None or bs < 1:
        raise n.error(f"blocksize must be a positive integer, got {bs}", errors.ValueError)
    return (*x.shape, int(bs))


# ---- repeating --------------------------------------------------------------------------

@onnx_op("Expand")
def expand(n, x, shape):
    want = n.ints(shape, "shape")
    if any(s < 0 for s in want):
        raise n.error(f"shape {tuple(want)} has a negative dimension", errors.ShapeError)
    # Two-way broadcasting: a 1 in either shape takes the other's size.
    r = max(len(want), x.ndim)
    a = [1] * (r - x.ndim) + list(x.shape)
    b = [1] * (r - len(want)) + list(want)
    out = []
    for da, db in zip(a, b):
        if da != db and 1 not in (da, db):
            raise n.error(f"cannot expand {tuple(x.shape)} to {tuple(want)}",
                          errors.ShapeError)
        out.append(db if da == 1 else da)
    out = check_shape(n, out)
    return F.expand(x, *out)


@onnx_op("Tile")
def tile(n, x, repeats):
    reps = n.ints(repeats, "repeats")
    if len(reps) != x.ndim:
        raise n.error(f"repeats {reps} must have one entry per axis of {tuple(x.shape)}",
                      errors.ShapeError)
    if any(r < 0 for r in reps):
        raise n.error(f"repeats {reps} must not be negative", errors.ShapeError)
    check_shape(n, [d * r for d, r in zip(x.shape, reps)])
    return F.tile(x, reps)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- shapes ------------------------------------------------------------------------------

@exports(Rearrange)
def export_rearrange(g, f, xs, ys):
    """reshape, view, flatten, squeeze, unsqueeze: the elements stay in order."""
    (x,), (y,) = xs, ys
    g.varies("args")  # sizes that follow the dynamic axes are taken care of below
    kind = f.op.__name__
    if kind == "squeeze" and y.ndim < x.ndim:
        removed = _squeezed(x, y)
        if removed is not None:
            return g.squeeze(x.name, removed, out=y.name)
    if kind == "unsqueeze" and y.ndim == x.ndim + 1:
        axis = norm_axis(f.args[0], y.ndim, "unsqueeze")
        return g.unsqueeze(x.name, [axis], out=y.name)
    if kind == "flatten" and x.ndim >= 2 and y.ndim == 2 and y.sig[0] == x.sig[0]:
        return g.op("Flatten", [x.name], out=y.name, axis=1)
    if x.sig == y.sig:
        return g.op("Identity", [x.name], out=y.name)
    g.reshape(x, y, out=y.name)


def _squeezed(x, y):
    """The axes of x that squeeze removed to give y (None when it is no plain squeeze)."""
    removed, j = [], 0
    for i, s in enumerate(x.sig):
        if j < y.ndim and y.sig[j] == s:
            j += 1
        elif s == 1:
            removed.append(i)
        else:
            return None
    return removed if j == y.ndim else None


@exports(Permute)
def export_permute(g, f, xs, ys):
    (x,), (y,) = xs, ys
    n = x.ndim
    g.op("Transpose", [x.name], out=y.name, perm=[int(a) % n for a in f.axes])


@exports(Expand)
def export_expand(g, f, xs, ys):
    """ONNX's Expand broadcasts both ways, so an axis x keeps is written as 1; an axis that
    grows to a dynamic size takes it from Shape of a value that has it."""
    (x,), (y,) = xs, ys
    g.varies("shape")
    lead = y.ndim - x.ndim
    sig = []
    for j, s in enumerate(y.sig):
        i = j - lead
        sig.append(1 if i >= 0 and x.sig[i] == s else s)
    g.op("Expand", [x.name, g.shape_tensor(sig)], out=y.name)


@exports(Tile)
def export_tile(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.op("Tile", [x.name, g.ints(f.repeats)], out=y.name)
