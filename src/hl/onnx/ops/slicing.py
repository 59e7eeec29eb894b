"""Joining and cutting: Concat, Split, Slice, Pad, CenterCropPad, Col2Im (import handlers),
and the export rules of hl's BasicIndex (x[...]), Split, Concat, Pad and Flip.

Sizes, axes and pads arrive as small int64 tensors and are read on the host (``n.ints``);
every shape a node asks for is checked (check_shape) before anything is allocated.
"""

import numpy as np

from ... import errors
from ...autograd.shape import BasicIndex, Concat, Flip, Pad, Split
from ...ops._util import norm_axes, norm_axis
from ..registry import exports, onnx_op
from ._util import attr_or_input, axes_of, axis_of, check_shape, const, F, prod


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
    sizes = attr_or_input(n, "split", split, 13)
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
    for a, s, e, st in zip(axes_of(n, axes, x.ndim), starts, ends, steps):
        key[a] = _slice_bounds(n, x.shape[a], s, e, st)
    return F.getitem(x, tuple(key))


def pad_amounts(n, x, pads, axes=None):
    """ONNX pads ([begins..., ends...] over ``axes``) as flat amounts over every axis,
    checked against x's shape."""
    r = x.ndim
    axes = list(range(r)) if axes is None else axes_of(n, axes, r)
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
    axes = list(range(x.ndim)) if axes is None else axes_of(n, axes, x.ndim)
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
    kk = prod(block)
    if min(blocks) < 1 or prod(blocks) != L or cb % kk:
        raise n.error(f"input {tuple(x.shape)} does not match image_shape {image}, "
                      f"block_shape {block}, strides {strides}, dilations {dil}, pads {pads} "
                      f"({prod(blocks)} blocks of {kk} elements)", errors.ShapeError)
    c = cb // kk
    check_shape(n, [nb, c] + padded)
    # pos[k, l]: flat position in the padded image of element k of block l.
    offs = np.indices(block).reshape(k, -1) * np.array(dil)[:, None]              # (k, K)
    starts = np.indices(blocks).reshape(k, -1) * np.array(strides)[:, None]       # (k, L)
    coords = offs[:, :, None] + starts[:, None, :]                                # (k, K, L)
    pos = np.ravel_multi_index(tuple(coords), padded).reshape(1, 1, kk * L)
    idx = const(np.broadcast_to(pos, (nb, c, kk * L)), like=x, dtype=np.int64)
    zeros = F.zeros(nb, c, prod(padded), dtype=x.dtype, device=x.device)
    y = F.scatter_elements(zeros, idx, F.reshape(x, nb, c, kk * L), 2, "add")
    y = F.reshape(y, nb, c, *padded)
    return F.getitem(y, (slice(None), slice(None)) + tuple(
        slice(pads[i], pads[i] + image[i]) for i in range(k)))


# ---- export: hl Functions as ONNX nodes --------------------------------------------------

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


@exports(Flip)
def export_flip(g, f, xs, ys):
    (x,), (y,) = xs, ys
    axes = list(norm_axes(f.axis, x.ndim, "flip"))
    if not axes:
        return g.op("Identity", [x.name], out=y.name)
    k = len(axes)
    g.op("Slice", [x.name, g.ints([-1] * k), g.ints([INT64_MIN] * k), g.ints(axes),
                   g.ints([-1] * k)], out=y.name)


@exports(BasicIndex)
def export_basic_index(g, f, xs, ys):
    """x[key] for ints, slices, None and ...: one Slice for the slices, a Gather per int
    (which drops its axis and takes negative indices), an Unsqueeze for the Nones."""
    (x,), (y,) = xs, ys
    key = f.key if isinstance(f.key, tuple) else (f.key,)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    parts = []
    for k in key:
        if k is Ellipsis:
            parts.extend([slice(None)] * (x.ndim - used))
        else:
            parts.append(k)
    if Ellipsis not in key:
        parts.extend([slice(None)] * (x.ndim - used))
    starts, ends, axes, steps = [], [], [], []
    ints = []          # (axis of x, index)
    news = []          # positions of the Nones in the result
    axis, out_pos = 0, 0
    for k in parts:
        if k is None:
            news.append(out_pos)
            out_pos += 1
            continue
        if isinstance(k, slice):
            step = 1 if k.step is None else int(k.step)
            if (k.start, k.stop, step) != (None, None, 1):
                starts.append((0 if step > 0 else INT64_MAX) if k.start is None
                              else int(k.start))
                ends.append((INT64_MAX if step > 0 else INT64_MIN) if k.stop is None
                            else int(k.stop))
                axes.append(axis)
                steps.append(step)
            out_pos += 1
        else:
            ints.append((axis, int(k)))
        axis += 1
    steps_todo = []  # (op, extra inputs, attributes), the last one writing y
    if axes:
        steps_todo.append(("Slice", [g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)],
                           {}))
    for a, i in reversed(ints):  # from the last axis, so earlier axis numbers still hold
        steps_todo.append(("Gather", [g.const(np.asarray(i, dtype=np.int64))], {"axis": a}))
    if news:
        steps_todo.append(("Unsqueeze", [g.ints(news)], {}))
    if not steps_todo:
        steps_todo.append(("Identity", [], {}))
    cur = x.name
    for k, (op, extra, attrs) in enumerate(steps_todo):
        last = k == len(steps_todo) - 1
        cur = g.op(op, [cur] + extra, out=y.name if last else None, **attrs)


@exports(Split)
def export_split(g, f, xs, ys):
    """Split along an axis; where that axis is dynamic the parts must be equal and ONNX splits
    it evenly by itself (no sizes written)."""
    (x,) = xs
    g.varies("parts")
    axis = norm_axis(f.axis, max(x.ndim, 1), "split")
    sizes = [v.shape[axis] for v in ys]
    outs = [v.name for v in ys]
    if x.dynamic(axis):
        if len({v.sig[axis] for v in ys}) != 1:
            raise g.error(f"splitting dynamic axis {axis} into unequal parts {sizes}")
        if g.opset >= 18:
            return g.node("Split", [x.name], out=outs, axis=axis, num_outputs=len(ys))
        return g.node("Split", [x.name], out=outs, axis=axis)
    g.node("Split", [x.name, g.ints(sizes)], out=outs, axis=axis)


@exports(Concat)
def export_concat(g, f, xs, ys):
    axis = norm_axis(f.axis, xs[0].ndim, "concat")
    g.op("Concat", [v.name for v in xs], out=ys[0].name, axis=axis)


@exports(Pad)
def export_pad(g, f, xs, ys):
    (x,), (y,) = xs, ys
    mode = {"replicate": "edge"}.get(f.mode, f.mode)
    ins = [x.name, g.ints(f.flat)]
    if mode == "constant":
        ins.append(g.scalar(f.value, x.dtype))
    g.op("Pad", ins, out=y.name, mode=mode)
