"""Pooling (MaxPool, AveragePool, LpPool, their global forms, MaxUnpool): import handlers and
the export rules of hl's MaxPool and AvgPool.
"""

import numpy as np

from ... import errors
from ...autograd.pool import AvgPool, MaxPool
from ..registry import exports, onnx_op
from ._spatial import (cast_back, CORE_FLOATS, float32_for_core, ints_attr, pad_spatial,
                       pool_geometry, spatial_input, window_counts, window_keys, window_sum)
from ._util import check_shape, const, F, HALF, prod


# ---- pooling ---------------------------------------------------------------------------

def _lowest(dtype):
    if dtype.is_floating:
        return float("-inf")
    if dtype.name == "bool":
        return False
    return int(np.iinfo(dtype.np).min)


def _spatial_index(sizes, offs, strides, dil, pads, out, column_major):
    """For one kernel offset, the flat position within the input plane of the element each
    output position reads (ONNX MaxPool's Indices; padding positions never win)."""
    coords = np.meshgrid(*[np.arange(m) * s + o * d - b for m, s, o, d, (b, _) in
                           zip(out, strides, offs, dil, pads)], indexing="ij")
    coords = [np.clip(c, 0, size - 1) for c, size in zip(coords, sizes)]
    return np.ravel_multi_index(coords, sizes, order="F" if column_major else "C")


def _max_pool_generic(x, kernel, strides, dil, pads, extra, out, want_indices, column_major):
    xp = pad_spatial(x, pads, extra, value=_lowest(x.dtype))
    sizes = list(x.shape[2:])
    best = index = None
    for offs, key in window_keys(kernel, strides, dil, out):
        v = F.getitem(xp, key)
        pos = None
        if want_indices:
            pos = const(_spatial_index(sizes, offs, strides, dil, pads, out, column_major)
                        .reshape([1, 1] + out).astype(np.int64), like=x)
        if best is None:
            best, index = v, pos
            continue
        better = F.gt(v, best)  # strict: the first maximum wins, as ONNX's reference has it
        best = F.where(better, v, best)
        if want_indices:
            index = F.where(better, pos, index)
    if want_indices:
        index = F.add(index, F.zeros(*best.shape, dtype="int64", device=x.device))
    return best, index


def _plane_offsets(x, index):
    """Indices within each plane made positions in the whole flattened input."""
    nb, c = x.shape[:2]
    planes = np.arange(nb * c, dtype=np.int64).reshape([nb, c] + [1] * (x.ndim - 2))
    return F.add(index, const(planes * prod(x.shape[2:]), like=x))


def _empty_pool(x, out, want_indices=False):
    """The result of a pool whose kernel outgrows the input: no windows at all."""
    shape = list(x.shape[:2]) + out
    y = F.zeros(*shape, dtype=x.dtype.name, device=x.device)
    return (y, F.zeros(*shape, dtype="int64", device=x.device)) if want_indices else y


def _core_pool(x, kind, kernel, strides, dil, pads, ceil, include=False):
    """A max or average pool over any number of spatial axes with the core's 1-D and 2-D
    kernels. Past two axes it is separable, since a window is a box: the last two axes are
    pooled with the leading spatial axes folded into the batch, then each leading axis with
    the 1-D kernel, moved last. The max of a box is the max of its per-axis maxima; the
    positions a box averages over are a product of per-axis ranges (with or without the
    padding), so its average is the average of the per-axis averages. Returns float32 for
    half-precision input on the CPU, cast back by the caller."""
    nd = x.ndim - 2
    if nd <= 2:
        return _pool_axes(x, kind, kernel, strides, dil, pads, ceil, include)
    nb, c, *sizes = x.shape
    folded = F.reshape(x, nb * c * prod(sizes[:-2]), 1, *sizes[-2:])
    y = _pool_axes(folded, kind, kernel[-2:], strides[-2:], dil[-2:], pads[-2:], ceil, include)
    y = F.reshape(y, nb, c, *sizes[:-2], *y.shape[2:])
    for a in range(2, 2 + nd - 2):  # the leading spatial axes, one at a time
        order = [i for i in range(y.ndim) if i != a] + [a]
        moved = F.permute(y, *order)
        rows = F.reshape(moved, prod(moved.shape[:-1]), 1, moved.shape[-1])
        j = a - 2
        r = _pool_axes(rows, kind, kernel[j:j + 1], strides[j:j + 1], dil[j:j + 1],
                       pads[j:j + 1], ceil, include)
        r = F.reshape(r, *moved.shape[:-1], r.shape[-1])
        y = F.permute(r, *[order.index(i) for i in range(y.ndim)])
    return y


def _pool_axes(x, kind, kernel, strides, dil, pads, ceil, include):
    """The core's 1-D or 2-D pool (x has as many spatial axes as kernel has entries)."""
    padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)  # ONNX order
    if kind == "max":
        pool = F.max_pool1d if len(kernel) == 1 else F.max_pool2d
        return pool(x, tuple(kernel), tuple(strides), padding, tuple(dil), ceil_mode=ceil)
    pool = F.avg_pool1d if len(kernel) == 1 else F.avg_pool2d
    return pool(x, tuple(kernel), tuple(strides), padding, ceil_mode=ceil,
                count_include_pad=include)


@onnx_op("MaxPool")
def max_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = pool_geometry(n, x)
    want = n.wants(1)
    if 0 in out or x.size == 0:
        return _empty_pool(x, out, want)
    column_major = bool(n.attr("storage_order", 0))
    nd = x.ndim - 2
    if nd in (1, 2) and x.dtype.name in CORE_FLOATS + HALF:
        xc, back = float32_for_core(x)
        pool = F.max_pool1d if nd == 1 else F.max_pool2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)
        r = pool(xc, tuple(kernel), tuple(strides), padding, tuple(dil), ceil_mode=ceil,
                 return_indices=want)
        y, index = (r if want else (r, None))
        y = cast_back(y, back)
        if want and column_major and nd == 2:  # h * W + w  ->  h + w * H
            h, wd = x.shape[2:]
            index = F.add(F.floor_divide(index, wd), F.mul(F.mod(index, wd), h))
    elif not want and x.dtype.name in CORE_FLOATS + HALF:  # 3-D and up, separable
        xc, back = float32_for_core(x)
        y, index = cast_back(_core_pool(xc, "max", kernel, strides, dil, pads, ceil), back), None
    else:  # the positions of a 3-D max, or an integer input: window by window
        y, index = _max_pool_generic(x, kernel, strides, dil, pads, extra, out, want,
                                     column_major)
    if not want:
        return y
    return y, _plane_offsets(x, index)


@onnx_op("AveragePool")
def average_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = pool_geometry(n, x, n.opset >= 19)
    include = bool(n.attr("count_include_pad", 0))
    if 0 in out or x.size == 0:
        return _empty_pool(x, out)
    if all(d == 1 for d in dil) and x.dtype.name in CORE_FLOATS + HALF:
        xc, back = float32_for_core(x)
        return cast_back(_core_pool(xc, "avg", kernel, strides, dil, pads, ceil, include), back)
    if not x.dtype.is_floating:
        raise n.error(f"needs a floating-point input, got {x.dtype.name}", errors.DTypeError)
    total = window_sum(x, kernel, strides, dil, pads, extra, out)
    counts = window_counts(x.shape[2:], kernel, strides, dil, pads, extra, out, include)
    return F.div(total, const(counts.reshape([1, 1] + out), like=x, dtype=x.dtype.np))


def _lp_order(n):
    p = n.attr("p", 2)
    if not isinstance(p, int) or p <= 0:
        raise n.error(f"p must be a positive integer (the norm's order), got {p!r}",
                      errors.ValueError)
    return p


@onnx_op("LpPool")
def lp_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = pool_geometry(n, x, n.opset >= 18)
    p = _lp_order(n)
    if not x.dtype.is_floating:
        raise n.error(f"needs a floating-point input, got {x.dtype.name}", errors.DTypeError)
    if 0 in out or x.size == 0:
        return _empty_pool(x, out)
    # the p-norm of each window, padding counting as zeros
    powered = F.square(x) if p == 2 else F.pow(F.abs(x), float(p))
    if not ceil and all(d == 1 for d in dil) and x.dtype.name in CORE_FLOATS:
        # every window lies inside the padded input: its sum is its average times its size
        mean = _core_pool(powered, "avg", kernel, strides, dil, pads, False, include=True)
        total = F.mul(mean, float(prod(kernel)))
    else:
        total = window_sum(powered, kernel, strides, dil, pads, extra, out)
    return F.sqrt(total) if p == 2 else F.pow(total, 1.0 / p)


@onnx_op("GlobalAveragePool")
def global_average_pool(n, x):
    spatial_input(n, x)
    if x.ndim == 4 and x.dtype.name in CORE_FLOATS:
        return F.global_avg_pool2d(x)
    return F.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(n, x):
    spatial_input(n, x)
    return F.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalLpPool")
def global_lp_pool(n, x):
    spatial_input(n, x)
    p = _lp_order(n)
    axes = tuple(range(2, x.ndim))
    if p == 2:
        return F.sqrt(F.sum(F.square(x), axis=axes, keepdims=True))
    return F.pow(F.sum(F.pow(F.abs(x), float(p)), axis=axes, keepdims=True), 1.0 / p)


@onnx_op("MaxUnpool", since=9)
def max_unpool(n, x, indices, output_shape=None):
    nd = spatial_input(n, x)
    kernel = [int(k) for k in n.attr("kernel_shape", [])]
    if len(kernel) != nd:
        raise n.error(f"kernel_shape {kernel} must have one entry per spatial axis of input "
                      f"{x.shape}", errors.ShapeError)
    strides = ints_attr(n, "strides", nd, 1)
    p = ints_attr(n, "pads", 2 * nd, 0)
    if tuple(indices.shape) != tuple(x.shape):
        raise n.error(f"indices of shape {indices.shape} must have the input's shape {x.shape}",
                      errors.ShapeError)
    inferred = list(x.shape[:2]) + [(i - 1) * s - (p[a] + p[nd + a]) + k for a, (i, s, k) in
                                    enumerate(zip(x.shape[2:], strides, kernel))]
    shape = inferred if output_shape is None else n.ints(output_shape, "output_shape")
    if len(shape) != x.ndim or any(s < i for s, i in zip(shape, inferred)):
        raise n.error(f"output_shape {shape} must have {x.ndim} entries, each at least the "
                      f"unpooled shape {inferred}", errors.ShapeError)
    check_shape(n, shape)
    total = prod(inferred)
    idx = n.host(indices)
    if idx.size and (idx.min() < 0 or idx.max() >= total):
        raise n.error(f"indices must lie in [0, {total}) for the unpooled shape {inferred}",
                      errors.IndexError)
    flat = F.scatter_elements(F.zeros(total, dtype=x.dtype.name, device=x.device),
                              F.reshape(indices, -1), F.reshape(x, -1), axis=0)
    y = F.reshape(flat, *inferred)
    if shape != inferred:  # the unpooled values sit at the start of the larger output
        y = F.pad(y, [(0, s - i) for s, i in zip(shape, inferred)])
    return y


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


def _whole_plane(g, f, x):
    """Is this pool one window over each whole plane (hl's global pools)? Then it is written
    as ONNX's Global*Pool, which also follows spatial sizes that change."""
    n = f.n
    whole = (list(f.kernel) == list(x.shape[2:]) and not any(f.pads) and
             all(d == 1 for d in f.dilation))
    if g.varies("kernel", "stride") and not whole:
        raise g.error("its window changes with the dynamic axes but is not the whole plane")
    return whole and n >= 1


@exports(MaxPool)
def export_max_pool(g, f, xs, ys):
    (x,), y = xs, ys[0]
    if _whole_plane(g, f, x):
        return g.op("GlobalMaxPool", [x.name], out=y.name)
    g.op("MaxPool", [x.name], out=y.name, kernel_shape=list(f.kernel), strides=list(f.stride),
         pads=[int(p) for p in f.pads], dilations=list(f.dilation), ceil_mode=int(f.ceil_mode))


@exports(AvgPool)
def export_avg_pool(g, f, xs, ys):
    (x,), y = xs, ys[0]
    if _whole_plane(g, f, x):
        return g.op("GlobalAveragePool", [x.name], out=y.name)
    g.op("AveragePool", [x.name], out=y.name, kernel_shape=list(f.kernel),
         strides=list(f.stride), pads=[int(p) for p in f.pads], ceil_mode=int(f.ceil_mode),
         count_include_pad=int(f.count_include_pad))
