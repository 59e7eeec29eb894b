"""Shape operators: reshaping and reordering (Reshape, Flatten, Squeeze, Unsqueeze, Transpose,
DepthToSpace, SpaceToDepth), joining and cutting (Concat, Split, Slice, Pad, CenterCropPad,
Col2Im), repeating (Expand, Tile), and the ops that make tensors from shapes (Shape, Size,
Constant, ConstantOfShape, Range, EyeLike, Trilu).

Sizes, axes and pads arrive as small int64 tensors and are read on the host (``n.ints``);
every shape a node asks for is checked (check_shape) before anything is allocated. The data
itself only goes through F ops, so gradients flow through every handler here.
"""
import math

import numpy as np

from ... import errors
from ..graph import ELEM_TYPES
from . import onnx_op
from ._util import MAX_ELEMENTS, F, axis_of, check_shape, const, np_dtype_of_onnx



def _prod(xs):
    p = 1
    for v in xs:
        p *= int(v)
    return p


def _axes(n, axes, ndim, what="axes"):
    """A list of possibly negative axes, normalised, checked for range and repeats."""
    out = [axis_of(n, int(a), ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise n.error(f"{what} {list(axes)} name an axis twice", errors.ValueError)
    return out


def _attr_or_input(n, name, t, since):
    """An int list that is an attribute before opset ``since`` and an input from it on."""
    if n.opset >= since:
        return n.ints(t, name)
    return n.attr(name)


def _hl_dtype_name(n, a, what):
    name = str(np.asarray(a).dtype)
    if name not in ELEM_TYPES.values():  # the dtypes hl holds
        raise n.error(f"{what} has element type {name}, which hl cannot hold",
                      errors.UnsupportedError)
    return name


# ---- reshaping --------------------------------------------------------------------------

def reshape_target(n, in_shape, shape, allowzero=False):
    """ONNX's Reshape rules: 0 copies the input's dimension (unless allowzero), one -1 is
    inferred; the element count must not change."""
    out = [int(s) for s in shape]
    total = _prod(in_shape)
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
        known = _prod(s for s in out if s != -1)
        if known == 0 or total % known:
            raise n.error(f"cannot reshape {tuple(in_shape)} ({total} elements) to "
                          f"{tuple(shape)}: the -1 cannot be inferred", errors.ShapeError)
        out[out.index(-1)] = total // known
    if _prod(out) != total:
        raise n.error(f"cannot reshape {tuple(in_shape)} ({total} elements) to {tuple(shape)} "
                      f"({_prod(out)} elements)", errors.ShapeError)
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
    return F.reshape(x, _prod(x.shape[:axis]), _prod(x.shape[axis:]))


@onnx_op("Squeeze")
def squeeze(n, x, axes=None):
    axes = _attr_or_input(n, "axes", axes, 13)
    if not axes:  # omitted (or empty, as onnxruntime reads it): every axis of size 1
        keep = [d for d in x.shape if d != 1]
    else:
        axes = _axes(n, axes, x.ndim)
        bad = [a for a in axes if x.shape[a] != 1]
        if bad:
            raise n.error(f"cannot squeeze axes {bad} of shape {tuple(x.shape)}: they are not "
                          f"of size 1", errors.ShapeError)
        keep = [d for i, d in enumerate(x.shape) if i not in axes]
    return F.reshape(x, *keep)


@onnx_op("Unsqueeze")
def unsqueeze(n, x, axes=None):
    axes = _attr_or_input(n, "axes", axes, 13)
    if axes is None:
        raise n.error("needs axes", errors.ValueError)
    rank = x.ndim + len(axes)
    axes = set(_axes(n, axes, rank))
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


# ---- joining and cutting ----------------------------------------------------------------

@onnx_op("Concat")
def concat(n, *xs):
    xs = [x for x in xs if x is not None]
    if not xs:
        raise n.error("needs at least one input", errors.ValueError)
    axis = axis_of(n, n.attr("axis", 1), xs[0].ndim)
    for x in xs[1:]:
        if x.dtype != xs[0].dtype:
            raise n.error(f"inputs have different dtypes: {[x.dtype.name for x in xs]}",
                          errors.DTypeError)
        if x.ndim != xs[0].ndim or any(a != b for i, (a, b) in
                                       enumerate(zip(x.shape, xs[0].shape)) if i != axis):
            raise n.error(f"input shapes {[tuple(x.shape) for x in xs]} differ outside axis "
                          f"{axis}", errors.ShapeError)
    return F.cat(xs, axis) if len(xs) > 1 else xs[0]


@onnx_op("Split")
def split(n, x, split=None):
    axis = axis_of(n, n.attr("axis", 0), x.ndim)
    dim = x.shape[axis]
    sizes = _attr_or_input(n, "split", split, 13)
    count = n.noutputs
    if sizes is None:
        parts = n.attr("num_outputs") if n.opset >= 18 else None
        if parts is not None:
            if parts < 1 or parts != count:
                raise n.error(f"num_outputs = {parts} but the node has {count} outputs",
                              errors.ValueError)
            # Opset 18: parts of ceil(dim / parts), the last one smaller.
            size = -(-dim // parts)
            sizes = [min(size, max(dim - i * size, 0)) for i in range(parts)]
        else:
            if dim % count:
                raise n.error(f"axis {axis} of size {dim} cannot be split into {count} equal "
                              f"parts", errors.ShapeError)
            sizes = [dim // count] * count
    if len(sizes) != count or any(s < 0 for s in sizes) or sum(sizes) != dim:
        raise n.error(f"split sizes {list(sizes)} must be {count} non-negative sizes adding "
                      f"up to {dim} (axis {axis} of {tuple(x.shape)})", errors.ShapeError)
    return tuple(F.split(x, list(sizes), axis))


def _slice_bounds(n, dim, start, end, step):
    """ONNX's clamping of one axis's (start, end, step) as a Python slice."""
    if step == 0:
        raise n.error("slice steps must not be 0", errors.ValueError)
    if start < 0:
        start += dim
    if end < 0:
        end += dim
    if step > 0:
        start, end = min(max(start, 0), dim), min(max(end, 0), dim)
        return slice(start, end, step)
    if dim == 0:
        return slice(0, 0, 1)
    start, end = min(max(start, 0), dim - 1), min(max(end, -1), dim - 1)
    # end == -1 here means "past the first element", which a Python slice spells None.
    return slice(start, end if end >= 0 else None, step)


@onnx_op("Slice")
def slice_(n, x, starts=None, ends=None, axes=None, steps=None):
    if n.opset < 10:  # attributes before opset 10
        starts, ends, axes, steps = n.attr("starts"), n.attr("ends"), n.attr("axes"), None
    else:
        starts, ends = n.ints(starts, "starts"), n.ints(ends, "ends")
        axes, steps = n.ints(axes, "axes"), n.ints(steps, "steps")
    if starts is None or ends is None or len(starts) != len(ends):
        raise n.error(f"starts {starts} and ends {ends} must be given, of one length",
                      errors.ValueError)
    axes = list(range(len(starts))) if axes is None else axes
    steps = [1] * len(starts) if steps is None else steps
    if not len(axes) == len(steps) == len(starts):
        raise n.error(f"starts, ends, axes and steps must have one length, got "
                      f"{len(starts)}, {len(ends)}, {len(axes)}, {len(steps)}", errors.ValueError)
    key = [slice(None)] * x.ndim
    for a, s, e, st in zip(_axes(n, axes, x.ndim), starts, ends, steps):
        key[a] = _slice_bounds(n, x.shape[a], s, e, st)
    return F.getitem(x, tuple(key))


def pad_amounts(n, x, pads, axes=None):
    """ONNX pads ([begins..., ends...] over ``axes``) as flat amounts over every axis,
    checked against x's shape."""
    r = x.ndim
    axes = list(range(r)) if axes is None else _axes(n, axes, r)
    if len(pads) != 2 * len(axes):
        raise n.error(f"pads {list(pads)} must hold 2 values per padded axis ({len(axes)} "
                      f"axes of {tuple(x.shape)})", errors.ValueError)
    flat = [0] * (2 * r)
    for i, a in enumerate(axes):
        flat[a], flat[a + r] = int(pads[i]), int(pads[i + len(axes)])
    new = [d + flat[i] + flat[i + r] for i, d in enumerate(x.shape)]
    if any(d < 0 for d in new):
        raise n.error(f"pads {list(pads)} crop {tuple(x.shape)} below nothing",
                      errors.ShapeError)
    check_shape(n, new)
    return flat


@onnx_op("Pad")
def pad(n, x, pads=None, constant_value=None, axes=None):
    mode = n.attr("mode", "constant")
    if n.opset < 11:
        pads, value = n.attr("pads"), n.attr("value", 0.0)
        if pads is None:
            raise n.error("needs pads", errors.ValueError)
    else:
        pads, value = n.ints(pads, "pads"), n.scalar(constant_value, 0)
    axes = n.ints(axes, "axes")
    flat = pad_amounts(n, x, pads, axes)
    r = x.ndim
    if mode == "wrap":
        return _wrap_pad(n, x, flat)
    if mode not in ("constant", "reflect", "edge"):
        raise n.error(f"mode {mode!r} is not one of constant, reflect, edge, wrap",
                      errors.ValueError)
    # Checked here so the message names the node: reflect (numpy's, the edge not repeated)
    # needs every pad smaller than what is left of its axis after cropping; edge needs one
    # element to repeat.
    for i, d in enumerate(x.shape):
        grow = max(flat[i], flat[i + r])
        if mode == "reflect" and grow > 0 and grow >= d + min(flat[i], 0) + min(flat[i + r], 0):
            raise n.error(f"reflect pads {pads} must be smaller than axis {i} of "
                          f"{tuple(x.shape)}", errors.ValueError)
        if mode == "edge" and grow > 0 and d + min(flat[i], 0) + min(flat[i + r], 0) == 0:
            raise n.error(f"cannot edge-pad the empty axis {i} of {tuple(x.shape)}",
                          errors.ValueError)
    if mode == "constant" and x.dtype.name == "bool":
        value = bool(value)
    return F.pad(x, flat, mode, value)


def _wrap_pad(n, x, flat):
    """Wrap padding (the tensor as a torus): crop the negative amounts, then gather each
    padded axis with its positions taken modulo its size."""
    r = x.ndim
    x = F.pad(x, [min(p, 0) for p in flat])
    for a in range(r):
        before, after = max(flat[a], 0), max(flat[a + r], 0)
        if before or after:
            d = x.shape[a]
            if d == 0:
                raise n.error(f"cannot wrap-pad the empty axis {a}", errors.ValueError)
            idx = np.arange(-before, d + after, dtype=np.int64) % d
            x = F.gather(x, const(idx, like=x), a)
    return x


@onnx_op("CenterCropPad")
def center_crop_pad(n, x, shape):
    want = n.ints(shape, "shape")
    axes = n.attr("axes")
    axes = list(range(x.ndim)) if axes is None else _axes(n, axes, x.ndim)
    if len(want) != len(axes):
        raise n.error(f"shape {want} must have one size per axis in {axes}", errors.ValueError)
    check_shape(n, want)
    key = [slice(None)] * x.ndim
    pads = [0] * (2 * x.ndim)
    for a, s in zip(axes, want):
        d = x.shape[a]
        if s < d:  # crop, the extra element (for an odd difference) from the end
            start = (d - s) // 2
            key[a] = slice(start, start + s)
        elif s > d:
            pads[a] = (s - d) // 2
            pads[a + x.ndim] = s - d - pads[a]
    return F.pad(F.getitem(x, tuple(key)), pads)


@onnx_op("Col2Im")
def col2im(n, x, image_shape, block_shape):
    """Adds each column block back into the image: a scatter-add of x into the padded image
    at positions computed on the host, then the pads cropped off."""
    image, block = n.ints(image_shape, "image_shape"), n.ints(block_shape, "block_shape")
    k = len(image)
    if k < 1 or len(block) != k or x.ndim != 3:
        raise n.error(f"input {tuple(x.shape)} must be (N, C*prod(block), L) and image_shape "
                      f"{image} and block_shape {block} of one length", errors.ShapeError)
    strides = n.attr("strides", [1] * k)
    dil = n.attr("dilations", [1] * k)
    pads = n.attr("pads", [0] * (2 * k))
    if (len(strides), len(dil), len(pads)) != (k, k, 2 * k) or min(block) < 1 or \
            min(strides) < 1 or min(dil) < 1 or min(pads) < 0:
        raise n.error(f"bad block_shape {block}, strides {strides}, dilations {dil} or pads "
                      f"{pads} for {k} spatial axes", errors.ValueError)
    padded = [image[i] + pads[i] + pads[i + k] for i in range(k)]
    blocks = [(padded[i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(k)]
    nb, cb, L = x.shape
    kk = _prod(block)
    if min(blocks) < 1 or _prod(blocks) != L or cb % kk:
        raise n.error(f"input {tuple(x.shape)} does not match image_shape {image}, "
                      f"block_shape {block}, strides {strides}, dilations {dil}, pads {pads} "
                      f"({_prod(blocks)} blocks of {kk} elements)", errors.ShapeError)
    c = cb // kk
    check_shape(n, [nb, c] + padded)
    # pos[k, l]: flat position in the padded image of element k of block l.
    offs = np.indices(block).reshape(k, -1) * np.array(dil)[:, None]              # (k, K)
    starts = np.indices(blocks).reshape(k, -1) * np.array(strides)[:, None]       # (k, L)
    coords = offs[:, :, None] + starts[:, None, :]                                # (k, K, L)
    pos = np.ravel_multi_index(tuple(coords), padded).reshape(1, 1, kk * L)
    idx = const(np.broadcast_to(pos, (nb, c, kk * L)), like=x, dtype=np.int64)
    zeros = F.zeros(nb, c, _prod(padded), dtype=x.dtype, device=x.device)
    y = F.scatter_elements(zeros, idx, F.reshape(x, nb, c, kk * L), 2, "add")
    y = F.reshape(y, nb, c, *padded)
    return F.getitem(y, (slice(None), slice(None)) + tuple(
        slice(pads[i], pads[i] + image[i]) for i in range(k)))


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


# ---- tensors made from shapes -----------------------------------------------------------

@onnx_op("Shape")
def shape_(n, x):
    dims = list(x.shape)
    r = len(dims)

    def clamp(v):
        return min(max(v + r if v < 0 else v, 0), r)
    start, end = clamp(n.attr("start", 0)), clamp(n.attr("end", r))
    return const(np.array(dims[start:end], dtype=np.int64), like=x)


@onnx_op("Size")
def size(n, x):
    return const(np.array(_prod(x.shape), dtype=np.int64), like=x)


@onnx_op("ConstantOfShape")
def constant_of_shape(n, shape):
    dims = check_shape(n, n.ints(shape, "shape"))
    value = n.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    if np.asarray(value).size != 1:
        raise n.error(f"value must hold one element, got shape {np.shape(value)}",
                      errors.ValueError)
    dtype = _hl_dtype_name(n, value, "value")
    return F.full(dims, np.asarray(value).reshape(-1)[0].item(), dtype=dtype,
                  device=shape.device)


@onnx_op("Constant")
def constant(n):
    found = [k for k in ("value", "sparse_value", "value_float", "value_floats", "value_int",
                         "value_ints", "value_string", "value_strings") if n.has(k)]
    if len(found) != 1:
        raise n.error(f"needs exactly one value attribute, got {found}", errors.ONNXError)
    key = found[0]
    v = n.attr(key)
    if key.startswith("value_string"):
        raise n.error("string constants are not supported by hl", errors.UnsupportedError)
    if key.startswith("value_float"):
        v = np.array(v, dtype=np.float32)
    elif key.startswith("value_int"):
        v = np.array(v, dtype=np.int64)
    _hl_dtype_name(n, v, "value")
    return const(v, device=n.device)  # no input to take a device from


@onnx_op("Range")
def range_(n, start, limit, delta):
    dtype = start.dtype
    s, e, d = (n.scalar(t) for t in (start, limit, delta))
    if d == 0:
        raise n.error("delta must not be 0", errors.ValueError)
    if dtype.is_integer:
        count = max(-((s - e) // d), 0)  # ceil((e - s) / d) in exact integer arithmetic
    else:
        if not all(math.isfinite(v) for v in (s, e, d)):
            raise n.error(f"start {s}, limit {e} and delta {d} must be finite",
                          errors.ValueError)
        q = (e - s) / d
        count = max(math.ceil(q), 0) if math.isfinite(q) else MAX_ELEMENTS + 1
    check_shape(n, [count])
    # start + i * delta, computed in float64 (or int64) and rounded once to the dtype.
    wide = np.int64 if dtype.is_integer else np.float64
    values = np.arange(count, dtype=wide) * wide(d) + wide(s)
    return F.cast(const(values, like=start), dtype)


@onnx_op("EyeLike")
def eye_like(n, x):
    if x.ndim != 2:
        raise n.error(f"input must be 2-D, got shape {tuple(x.shape)}", errors.ShapeError)
    dtype = x.dtype if n.attr("dtype") is None else np_dtype_of_onnx(n, n.attr("dtype"))
    return F.eye(x.shape[0], x.shape[1], k=n.attr("k", 0), dtype=dtype, device=x.device)


@onnx_op("Trilu")
def trilu(n, x, k=None):
    if x.ndim < 2:
        raise n.error(f"input must have at least 2 dimensions, got shape {tuple(x.shape)}",
                      errors.ShapeError)
    k = int(n.scalar(k, 0))
    # Beyond the matrix every diagonal is the same; keep k within C's int64 comfortably.
    lim = x.shape[-1] + x.shape[-2] + 1
    k = min(max(k, -lim), lim)
    return F.triu(x, k) if n.attr("upper", 1) else F.tril(x, k)
