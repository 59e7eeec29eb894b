"""Neural-network operators: convolutions, pooling, normalization, Dropout, the Softmax family,
Gemm/MatMul, Resize/Upsample and the two classification losses.

The core has fast 1-D and 2-D float32/float64 kernels for convolution and pooling; shapes it
does not cover (3-D and up, dilated average pooling, integer max pooling) go through a
generic path built from strided slices (one slice per kernel offset), which is slower but
differentiable like the rest.
"""
import itertools
import math

import numpy as np

from ... import errors
from ...autograd import no_grad
from . import onnx_op
from ._util import HALF as _HALF_FLOATS, F, axis_of, check_shape, const, prod as _prod, via_float32

_CORE_FLOATS = ("float32", "float64")




def _float32_for_core(x):
    """(x in a dtype the core kernels take, the dtype to cast the result back to or None):
    float16/bfloat16 compute in float32."""
    if x.dtype.name in _HALF_FLOATS:
        return F.cast(x, "float32"), x.dtype.name
    return x, None


def _back(y, dtype):
    return y if dtype is None else F.cast(y, dtype)


def _spatial_input(n, x, what="input"):
    if x.ndim < 3:
        raise n.error(f"{what} must be (N, C, spatial...), got shape {x.shape}", errors.ShapeError)
    return x.ndim - 2


# ---- geometry shared by convolutions and pools -----------------------------------------

def _ints_attr(n, name, nd, default):
    v = [int(a) for a in n.attr(name, [default] * nd)]
    if len(v) != nd:
        raise n.error(f"{name} {v} must have {nd} entries, one per spatial axis",
                      errors.ShapeError)
    return v


def _strides_dilations(n, nd):
    strides = _ints_attr(n, "strides", nd, 1)
    dil = _ints_attr(n, "dilations", nd, 1)
    if any(v < 1 for v in strides + dil):
        raise n.error(f"strides {strides} and dilations {dil} must be >= 1", errors.ValueError)
    return strides, dil


def _pads(n, sizes, kernel, strides, dil):
    """ONNX's pads ([begins..., ends...]) or auto_pad, as [(begin, end)] per spatial axis."""
    nd = len(kernel)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, k, s, d in zip(sizes, kernel, strides, dil):
            out = -(-size // s)
            total = max((out - 1) * s + (k - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            # the odd pixel goes at the end for SAME_UPPER, at the beginning for SAME_LOWER
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return pads
    if auto == "VALID":
        return [(0, 0)] * nd
    if auto != "NOTSET":
        raise n.error(f"auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got {auto!r}",
                      errors.ValueError)
    p = _ints_attr(n, "pads", 2 * nd, 0)
    if any(v < 0 for v in p):
        raise n.error(f"pads {p} must not be negative", errors.ValueError)
    return list(zip(p[:nd], p[nd:]))


def _pool_geometry(n, x, with_dilations=True):
    """kernel, strides, dilations, pads, output size and, per axis, how many positions past
    the end padding the last window reaches (ceil_mode)."""
    nd = _spatial_input(n, x)
    kernel = n.attr("kernel_shape")
    if kernel is None or len(kernel) != nd:
        raise n.error(f"kernel_shape {kernel} must have one entry per spatial axis of input "
                      f"{x.shape}", errors.ShapeError)
    kernel = [int(k) for k in kernel]
    strides, dil = _strides_dilations(n, nd)
    if not with_dilations:
        dil = [1] * nd
    sizes = list(x.shape[2:])
    pads = _pads(n, sizes, kernel, strides, dil)
    # with auto_pad the pads give the output size exactly; ceil_mode only applies to explicit pads
    ceil = bool(n.attr("ceil_mode", 0)) and n.attr("auto_pad", "NOTSET") == "NOTSET"
    out, extra = [], []
    for size, k, s, d, (b, e) in zip(sizes, kernel, strides, dil, pads):
        if k < 1:
            raise n.error(f"kernel_shape {kernel} must be positive", errors.ValueError)
        span = size + b + e - ((k - 1) * d + 1)  # negative: the kernel outgrows the input
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and (o - 1) * s >= size + b:  # the last window must start inside the input
            o -= 1
        out.append(max(o, 0))
        extra.append(max((o - 1) * s + (k - 1) * d + 1 - (size + b + e), 0))
    return kernel, strides, dil, pads, out, extra, ceil


def _window_keys(kernel, strides, dil, out, lead=2):
    """For each kernel offset, the index key that picks, for every output position, the input
    element under that offset (in an input padded so every window fits)."""
    for offs in itertools.product(*(range(k) for k in kernel)):
        yield offs, (slice(None),) * lead + tuple(
            slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, s, m in zip(offs, dil, strides, out))


def _window_counts(sizes, kernel, strides, dil, pads, extra, out, include_pad):
    """How many positions each window covers inside the input (or, include_pad, inside the
    explicitly padded input): average pooling's divisors, computed on the host."""
    mask = np.zeros([b + sz + e + x for sz, (b, e), x in zip(sizes, pads, extra)])
    mask[tuple(slice(0 if include_pad else b, b + sz + (e if include_pad else 0))
               for sz, (b, e) in zip(sizes, pads))] = 1
    total = np.zeros(out)
    for _, key in _window_keys(kernel, strides, dil, out, lead=0):
        total += mask[key]
    return total


def _pad_spatial(x, pads, extra=None, value=0.0):
    extra = extra or [0] * len(pads)
    if not any(b or e for b, e in pads) and not any(extra):
        return x
    return F.pad(x, [(0, 0), (0, 0)] + [(b, e + x_) for (b, e), x_ in zip(pads, extra)],
                 value=value)


def _window_sum(x, kernel, strides, dil, pads, extra, out):
    """The sum over each (zero-padded) window, one strided slice per kernel offset."""
    xp = _pad_spatial(x, pads, extra)
    total = None
    for _, key in _window_keys(kernel, strides, dil, out):
        v = F.getitem(xp, key)
        total = v if total is None else F.add(total, v)
    return total


# ---- convolution -----------------------------------------------------------------------

def _check_conv(n, x, w, group, transpose=False):
    nd = _spatial_input(n, x)
    if w.ndim != x.ndim:
        raise n.error(f"weights of shape {w.shape} do not match input {x.shape} (expected "
                      f"{x.ndim} dimensions)", errors.ShapeError)
    if group < 1:
        raise n.error(f"group must be >= 1, got {group}", errors.ValueError)
    c = x.shape[1]
    if transpose:
        ok = w.shape[0] == c and c % group == 0
        want = f"(C={c}, M/group, k...)"
    else:
        ok = w.shape[1] * group == c and w.shape[0] % group == 0
        want = f"(M, C/group={c // group if c % group == 0 else c / group}, k...)"
    if not ok:
        raise n.error(f"weights of shape {w.shape} do not fit input {x.shape} with group "
                      f"{group}: expected {want}", errors.ShapeError)
    kernel = n.attr("kernel_shape")
    if kernel is not None and list(kernel) != list(w.shape[2:]):
        raise n.error(f"kernel_shape {list(kernel)} differs from the weights' shape {w.shape}",
                      errors.ShapeError)
    return nd


def _conv_folded(x, w, strides, dil, group):
    """Convolution of an already padded x of any rank with the core's 1-D and 2-D kernels:
    past two spatial axes, the sum over the first axis's kernel offsets of convolutions one
    dimension lower, that axis's output positions folded into the batch."""
    nd = x.ndim - 2
    if nd <= 2:
        conv = F.conv1d if nd == 1 else F.conv2d
        return conv(x, w, None, stride=tuple(strides), padding=0, dilation=tuple(dil),
                    groups=group)
    k, s, d = w.shape[2], strides[0], dil[0]
    out = (x.shape[2] - (k - 1) * d - 1) // s + 1
    nb, c = x.shape[:2]
    rest = list(range(3, x.ndim))
    total = None
    for i in range(k):
        part = F.getitem(x, (slice(None), slice(None), slice(i * d, i * d + (out - 1) * s + 1, s)))
        part = F.reshape(F.permute(part, 0, 2, 1, *rest), nb * out, c, *x.shape[3:])
        y = _conv_folded(part, F.getitem(w, (slice(None), slice(None), i)), strides[1:],
                         dil[1:], group)
        total = y if total is None else F.add(total, y)
    return F.permute(F.reshape(total, nb, out, *total.shape[1:]), 0, 2, 1, *rest)


def _add_channel_bias(y, b):
    if b is None:
        return y
    return F.add(y, F.reshape(b, 1, b.shape[0], *([1] * (y.ndim - 2))))


def _conv(n, x, w, b, group):
    nd = _check_conv(n, x, w, group)
    if b is not None and tuple(b.shape) != (w.shape[0],):
        raise n.error(f"bias of shape {b.shape} must be ({w.shape[0]},)", errors.ShapeError)
    if x.dtype.name not in _CORE_FLOATS + _HALF_FLOATS:
        raise n.error(f"needs floating-point input, got {x.dtype.name}", errors.DTypeError)
    strides, dil = _strides_dilations(n, nd)
    pads = _pads(n, x.shape[2:], w.shape[2:], strides, dil)
    x, back = _float32_for_core(x)
    if back:
        w = F.cast(w, "float32")
        b = None if b is None else F.cast(b, "float32")
    if nd <= 2:
        conv = F.conv1d if nd == 1 else F.conv2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)  # ONNX order
        return _back(conv(x, w, b, stride=tuple(strides), padding=padding,
                          dilation=tuple(dil), groups=group), back)
    xp = _pad_spatial(x, pads)
    if any(size < (k - 1) * d + 1 for size, k, d in zip(xp.shape[2:], w.shape[2:], dil)):
        raise n.error(f"kernel {list(w.shape[2:])} (dilations {dil}) does not fit input "
                      f"{x.shape} padded by {pads}", errors.ShapeError)
    return _back(_add_channel_bias(_conv_folded(xp, w, strides, dil, group), b), back)


@onnx_op("Conv")
def conv(n, x, w, b=None):
    return _conv(n, x, w, b, n.attr("group", 1))


@onnx_op("ConvInteger", since=10)
def conv_integer(n, x, w, x_zero_point=None, w_zero_point=None):
    # Exact in float64: products of 8-bit values summed over any realistic kernel stay far
    # below 2**53.
    xf = _minus_zero_point(n, x, x_zero_point, 1)
    wf = _minus_zero_point(n, w, w_zero_point, 0)
    return F.cast(F.round(_conv(n, xf, wf, None, n.attr("group", 1))), "int32")


def _minus_zero_point(n, t, zp, axis):
    """An integer tensor minus its zero point (a scalar, or one per entry of ``axis``), as
    float64."""
    tf = F.cast(t, "float64")
    if zp is None:
        return tf
    zf = F.cast(zp, "float64")
    if zf.size > 1:
        if zf.ndim != 1 or zf.shape[0] != t.shape[axis]:
            raise n.error(f"zero point of shape {zp.shape} must be a scalar or have "
                          f"{t.shape[axis]} entries", errors.ShapeError)
        zf = F.reshape(zf, *[-1 if i == axis else 1 for i in range(t.ndim)])
    elif zf.ndim:
        zf = F.reshape(zf, *([1] * t.ndim))
    return F.sub(tf, zf)


def _conv_transpose_full(x, w, strides, dil, group):
    """The transposed convolution before pads crop it, s * (in - 1) + (k - 1) * d + 1 per
    axis, with the core's 1-D and 2-D kernels: past two spatial axes, each kernel offset of
    the first axis transposes the input one dimension lower (that axis folded into the
    batch), spreads the results s apart and shifts them by offset * d."""
    nd = x.ndim - 2
    if nd <= 2:
        conv_t = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
        return conv_t(x, w, None, stride=tuple(strides), padding=0, output_padding=0,
                      groups=group, dilation=tuple(dil))
    k, s, d = w.shape[2], strides[0], dil[0]
    nb, c, depth = x.shape[:3]
    rest = list(range(3, x.ndim))
    folded = F.reshape(F.permute(x, 0, 2, 1, *rest), nb * depth, c, *x.shape[3:])
    span = (depth - 1) * s + 1
    total = None
    for i in range(k):
        y = _conv_transpose_full(folded, F.getitem(w, (slice(None), slice(None), i)),
                                 strides[1:], dil[1:], group)
        y = F.permute(F.reshape(y, nb, depth, *y.shape[1:]), 0, 2, 1, *rest)
        if s > 1:  # s - 1 zeros between neighbours along the first spatial axis
            shape = list(y.shape)
            y = F.stack([y] + [F.zeros_like(y)] * (s - 1), axis=3)
            shape[2] *= s
            y = F.getitem(F.reshape(y, *shape), (slice(None), slice(None), slice(0, span)))
        y = F.pad(y, [(0, 0), (0, 0), (i * d, (k - 1 - i) * d)] + [(0, 0)] * len(rest))
        total = y if total is None else F.add(total, y)
    return total


@onnx_op("ConvTranspose")
def conv_transpose(n, x, w, b=None):
    group = n.attr("group", 1)
    nd = _check_conv(n, x, w, group, transpose=True)
    m = w.shape[1] * group
    if b is not None and tuple(b.shape) != (m,):
        raise n.error(f"bias of shape {b.shape} must be ({m},)", errors.ShapeError)
    strides, dil = _strides_dilations(n, nd)
    out_pad = _ints_attr(n, "output_padding", nd, 0)
    kernel = list(w.shape[2:])
    sizes = list(x.shape[2:])
    full = [s * (i - 1) + (k - 1) * d + 1 for s, i, k, d in zip(strides, sizes, kernel, dil)]
    auto = n.attr("auto_pad", "NOTSET")
    out_shape = n.attr("output_shape")
    if out_shape is not None or auto in ("SAME_UPPER", "SAME_LOWER"):
        # The pads follow from the output shape asked for (SAME: input * stride).
        target = [int(v) for v in out_shape][-nd:] if out_shape is not None else \
            [i * s for i, s in zip(sizes, strides)]
        if len(target) != nd:
            raise n.error(f"output_shape {out_shape} must name the {nd} spatial sizes",
                          errors.ShapeError)
        pads = []
        for f, op, t in zip(full, out_pad, target):
            total = f + op - t
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
    elif auto == "VALID":
        pads = [(0, 0)] * nd
    else:
        pads = _pads(n, sizes, kernel, strides, dil)
    if x.dtype.name not in _CORE_FLOATS + _HALF_FLOATS:
        raise n.error(f"needs floating-point input, got {x.dtype.name}", errors.DTypeError)
    final = [f - pb - pe + op for f, (pb, pe), op in zip(full, pads, out_pad)]
    check_shape(n, [x.shape[0], m] + final)
    x, back = _float32_for_core(x)
    if back:
        w = F.cast(w, "float32")
        b = None if b is None else F.cast(b, "float32")
    if nd in (1, 2) and not any(out_pad) and all(p >= 0 for pair in pads for p in pair):
        conv_t = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)
        return _back(conv_t(x, w, b, stride=tuple(strides), padding=padding, groups=group,
                            dilation=tuple(dil)), back)
    y = _conv_transpose_full(x, w, strides, dil, group)
    # pads crop the full result; output_padding adds positions past its end (bias only)
    y = F.pad(y, [(0, 0), (0, 0)] + [(-pb, op - pe) for (pb, pe), op in zip(pads, out_pad)])
    return _back(_add_channel_bias(y, b), back)


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
    xp = _pad_spatial(x, pads, extra, value=_lowest(x.dtype))
    sizes = list(x.shape[2:])
    best = index = None
    for offs, key in _window_keys(kernel, strides, dil, out):
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
    return F.add(index, const(planes * _prod(x.shape[2:]), like=x))


def _empty_pool(x, out, want_indices=False):
    """The result of a pool whose kernel outgrows the input: no windows at all."""
    shape = list(x.shape[:2]) + out
    y = F.zeros(*shape, dtype=x.dtype.name, device=x.device)
    return (y, F.zeros(*shape, dtype="int64", device=x.device)) if want_indices else y


@onnx_op("MaxPool")
def max_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = _pool_geometry(n, x)
    want = n.wants(1)
    if 0 in out or x.size == 0:
        return _empty_pool(x, out, want)
    column_major = bool(n.attr("storage_order", 0))
    nd = x.ndim - 2
    if nd in (1, 2) and x.dtype.name in _CORE_FLOATS + _HALF_FLOATS:
        xc, back = _float32_for_core(x)
        pool = F.max_pool1d if nd == 1 else F.max_pool2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)
        r = pool(xc, tuple(kernel), tuple(strides), padding, tuple(dil), ceil_mode=ceil,
                 return_indices=want)
        y, index = (r if want else (r, None))
        y = _back(y, back)
        if want and column_major and nd == 2:  # h * W + w  ->  h + w * H
            h, wd = x.shape[2:]
            index = F.add(F.floor_divide(index, wd), F.mul(F.mod(index, wd), h))
    else:
        y, index = _max_pool_generic(x, kernel, strides, dil, pads, extra, out, want,
                                     column_major)
    if not want:
        return y
    return y, _plane_offsets(x, index)


@onnx_op("AveragePool")
def average_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = _pool_geometry(n, x, n.opset >= 19)
    include = bool(n.attr("count_include_pad", 0))
    if 0 in out or x.size == 0:
        return _empty_pool(x, out)
    nd = x.ndim - 2
    if nd in (1, 2) and all(d == 1 for d in dil) and x.dtype.name in _CORE_FLOATS + _HALF_FLOATS:
        xc, back = _float32_for_core(x)
        pool = F.avg_pool1d if nd == 1 else F.avg_pool2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)
        return _back(pool(xc, tuple(kernel), tuple(strides), padding, ceil_mode=ceil,
                          count_include_pad=include), back)
    if not x.dtype.is_floating:
        raise n.error(f"needs a floating-point input, got {x.dtype.name}", errors.DTypeError)
    total = _window_sum(x, kernel, strides, dil, pads, extra, out)
    counts = _window_counts(x.shape[2:], kernel, strides, dil, pads, extra, out, include)
    return F.div(total, const(counts.reshape([1, 1] + out), like=x, dtype=x.dtype.np))


def _lp_order(n):
    p = n.attr("p", 2)
    if not isinstance(p, int) or p <= 0:
        raise n.error(f"p must be a positive integer (the norm's order), got {p!r}",
                      errors.ValueError)
    return p


@onnx_op("LpPool")
def lp_pool(n, x):
    kernel, strides, dil, pads, out, extra, ceil = _pool_geometry(n, x, n.opset >= 18)
    p = _lp_order(n)
    if not x.dtype.is_floating:
        raise n.error(f"needs a floating-point input, got {x.dtype.name}", errors.DTypeError)
    if 0 in out or x.size == 0:
        return _empty_pool(x, out)
    # the p-norm of each window, padding counting as zeros
    powered = F.square(x) if p == 2 else F.pow(F.abs(x), float(p))
    total = _window_sum(powered, kernel, strides, dil, pads, extra, out)
    return F.sqrt(total) if p == 2 else F.pow(total, 1.0 / p)


@onnx_op("GlobalAveragePool")
def global_average_pool(n, x):
    _spatial_input(n, x)
    if x.ndim == 4 and x.dtype.name in _CORE_FLOATS:
        return F.global_avg_pool2d(x)
    return F.mean(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalMaxPool")
def global_max_pool(n, x):
    _spatial_input(n, x)
    return F.max(x, axis=tuple(range(2, x.ndim)), keepdims=True)


@onnx_op("GlobalLpPool")
def global_lp_pool(n, x):
    _spatial_input(n, x)
    p = _lp_order(n)
    axes = tuple(range(2, x.ndim))
    if p == 2:
        return F.sqrt(F.sum(F.square(x), axis=axes, keepdims=True))
    return F.pow(F.sum(F.pow(F.abs(x), float(p)), axis=axes, keepdims=True), 1.0 / p)


@onnx_op("MaxUnpool", since=9)
def max_unpool(n, x, indices, output_shape=None):
    nd = _spatial_input(n, x)
    kernel = [int(k) for k in n.attr("kernel_shape", [])]
    if len(kernel) != nd:
        raise n.error(f"kernel_shape {kernel} must have one entry per spatial axis of input "
                      f"{x.shape}", errors.ShapeError)
    strides = _ints_attr(n, "strides", nd, 1)
    p = _ints_attr(n, "pads", 2 * nd, 0)
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
    total = _prod(inferred)
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


# ---- normalization ---------------------------------------------------------------------

def _channel_shaped(t, ndim):
    """A per-channel (C,) or (C, d...) parameter shaped to broadcast against (N, C, d...)."""
    return F.reshape(t, 1, *t.shape, *([1] * (ndim - 1 - t.ndim)))


@onnx_op("BatchNormalization")
def batch_norm(n, x, scale, bias, mean, var):
    if x.ndim < 2:
        raise n.error(f"input must be (N, C, ...), got shape {x.shape}", errors.ShapeError)
    eps = n.attr("epsilon", 1e-5)
    momentum = n.attr("momentum", 0.9)
    spatial = bool(n.attr("spatial", 1)) if n.opset < 9 else True
    want = (x.shape[1],) if spatial else tuple(x.shape[1:])
    for name, t in (("scale", scale), ("B", bias), ("mean", mean), ("var", var)):
        if tuple(t.shape) != want:
            raise n.error(f"{name} of shape {t.shape} must be {want} for input {x.shape}",
                          errors.ShapeError)
    axes = (0,) + tuple(range(2, x.ndim)) if spatial else (0,)
    fast = spatial and x.dtype.name in _CORE_FLOATS and \
        all(t.dtype == x.dtype for t in (scale, bias, mean, var))
    batch_stats = n.training or bool(n.attr("training_mode", 0))
    if not batch_stats:
        if fast:
            y = F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)
        else:
            y = _normalize(x, _channel_shaped(mean, x.ndim), _channel_shaped(var, x.ndim),
                           scale, bias, eps)
        return y, mean, var, mean, var
    if fast:
        y = F.batch_norm(x, None, None, scale, bias, training=True, eps=eps)
    else:
        y = _normalize(x, F.mean(x, axis=axes, keepdims=True),
                       F.var(x, axis=axes, keepdims=True), scale, bias, eps)
    with no_grad():
        # ONNX's momentum weighs the running value (PyTorch's weighs the batch), and the
        # batch variance is the biased one.
        batch_mean = F.mean(x, axis=axes)
        batch_var = F.var(x, axis=axes)
        new_mean = F.add(F.mul(mean, momentum), F.mul(F.cast(batch_mean, mean.dtype.name),
                                                      1.0 - momentum))
        new_var = F.add(F.mul(var, momentum), F.mul(F.cast(batch_var, var.dtype.name),
                                                    1.0 - momentum))
        if n.training:  # hl training an imported model: the running statistics learn
            mean.copy_(new_mean)
            var.copy_(new_var)
    return y, new_mean, new_var, batch_mean, batch_var


def _normalize(x, mean, var, scale, bias, eps):
    y = F.div(F.sub(x, mean), F.sqrt(F.add(var, eps)))
    y = F.add(F.mul(y, _channel_shaped(scale, x.ndim)), _channel_shaped(bias, x.ndim))
    return y if y.dtype == x.dtype else F.cast(y, x.dtype.name)


@onnx_op("InstanceNormalization")
def instance_norm(n, x, scale, bias):
    _spatial_input(n, x)
    for name, t in (("scale", scale), ("B", bias)):
        if tuple(t.shape) != (x.shape[1],):
            raise n.error(f"{name} of shape {t.shape} must be ({x.shape[1]},)", errors.ShapeError)
    return F.instance_norm(x, None, None, scale, bias, eps=n.attr("epsilon", 1e-5))


def _stats_dtype(n, x):
    """LayerNormalization/GroupNormalization compute in float32 (stash_type 1) at least."""
    return "float32" if x.dtype.name in _HALF_FLOATS and n.attr("stash_type", 1) == 1 else None


@onnx_op("LayerNormalization", since=17)
def layer_norm(n, x, scale, bias=None):
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    eps = n.attr("epsilon", 1e-5)
    shape = tuple(x.shape[axis:])
    stash = _stats_dtype(n, x)
    xc = F.cast(x, stash) if stash else x
    exact = tuple(scale.shape) == shape and (bias is None or tuple(bias.shape) == shape) \
        and not stash
    y, mean, invstd = F.layer_norm(xc, axis=axis, weight=scale if exact else None,
                                   bias=bias if exact else None, eps=eps, return_stats=True)
    if not exact:  # float16 input, or parameters that broadcast to the normalized shape
        y = F.mul(F.cast(y, x.dtype.name) if stash else y, scale)
        y = y if bias is None else F.add(y, bias)
    stats_shape = tuple(x.shape[:axis]) + (1,) * (x.ndim - axis)
    return y, F.reshape(mean, *stats_shape), F.reshape(invstd, *stats_shape)


@onnx_op("GroupNormalization", since=18)
def group_norm(n, x, scale, bias):
    if x.ndim < 2:
        raise n.error(f"input must be (N, C, ...), got shape {x.shape}", errors.ShapeError)
    groups = n.attr("num_groups")
    c = x.shape[1]
    if not groups or c % groups:
        raise n.error(f"num_groups {groups} must divide the {c} channels", errors.ValueError)
    per = groups if n.opset < 21 else c  # opset 18 scales per group, opset 21 per channel
    for name, t in (("scale", scale), ("bias", bias)):
        if tuple(t.shape) != (per,):
            raise n.error(f"{name} of shape {t.shape} must be ({per},) at opset {n.opset}",
                          errors.ShapeError)
    if per != c:
        repeat = const(np.repeat(np.arange(groups), c // groups), like=x)
        scale, bias = F.gather(scale, repeat), F.gather(bias, repeat)
    stash = _stats_dtype(n, x)
    if stash:
        x, scale, bias = (F.cast(t, stash) for t in (x, scale, bias))
    y = F.group_norm(x, groups, scale, bias, eps=n.attr("epsilon", 1e-5))
    return F.cast(y, x.dtype.name) if stash else y


@onnx_op("LRN")
def lrn(n, x):
    size = n.attr("size")
    if not size or size < 1:
        raise n.error(f"size must be a positive integer, got {size}", errors.ValueError)
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    if x.ndim < 3:
        raise n.error(f"input must be (N, C, d...), got shape {x.shape}", errors.ShapeError)
    # sum of squares over the channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
    sq = F.pad(F.square(x), [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    total = None
    for i in range(size):
        v = F.getitem(sq, (slice(None), slice(i, i + c)))
        total = v if total is None else F.add(total, v)
    return F.div(x, F.pow(F.add(F.mul(total, alpha / size), bias), beta))


@onnx_op("MeanVarianceNormalization", since=9)
def mean_variance_norm(n, x):
    axes = tuple(axis_of(n, a, x.ndim, "axes") for a in n.attr("axes", [0, 2, 3]))
    mean = F.mean(x, axis=axes, keepdims=True)
    std = F.sqrt(F.var(x, axis=axes, keepdims=True))
    return F.div(F.sub(x, mean), F.add(std, 1e-9))  # ONNX's function adds 1e-9


@onnx_op("LpNormalization")
def lp_normalization(n, x):
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    p = n.attr("p", 2)
    if p not in (1, 2):
        raise n.error(f"p must be 1 or 2, got {p}", errors.ValueError)
    norm = F.sum(F.abs(x), axis=axis, keepdims=True) if p == 1 else \
        F.sqrt(F.sum(F.square(x), axis=axis, keepdims=True))
    # an all-zero slice stays zero (ONNX's 0 / 0 = 0) instead of becoming NaN
    return F.div(x, F.where(F.eq(norm, 0), F.ones_like(norm), norm))


# ---- Dropout ---------------------------------------------------------------------------

@onnx_op("Dropout")
def dropout(n, x, ratio=None, training_mode=None):
    if n.opset >= 12:
        p = float(n.scalar(ratio, 0.5))
        active = n.training or bool(n.scalar(training_mode, False))
    else:
        p = float(n.attr("ratio", 0.5))
        active = n.training
    if not 0.0 <= p < 1.0:
        raise n.error(f"ratio must be in [0, 1), got {p}", errors.ValueError)
    mask_dtype = "bool" if n.opset >= 10 else x.dtype.name
    if not active or p == 0.0:
        mask = F.ones(*x.shape, dtype=mask_dtype, device=x.device) if n.wants(1) else None
        return x, mask
    keep = F.ge(F.rand(*x.shape, device=x.device), p)
    y = F.mul(F.mul(x, F.cast(keep, x.dtype.name)), 1.0 / (1.0 - p))
    return y, F.cast(keep, mask_dtype)


# ---- Softmax, LogSoftmax, Hardmax --------------------------------------------------------

def _along_axis(n, x, fn):
    """Before opset 13 the input is seen as 2-D, split at ``axis`` (default 1); from 13 the
    op acts along one axis (default -1)."""
    if n.opset < 13:
        axis = axis_of(n, n.attr("axis", 1), x.ndim)
        lead = _prod(x.shape[:axis])
        return F.reshape(fn(F.reshape(x, lead, _prod(x.shape[axis:])), 1), *x.shape)
    return fn(x, axis_of(n, n.attr("axis", -1), x.ndim))


@onnx_op("Softmax")
@via_float32
def softmax(n, x):
    return _along_axis(n, x, lambda t, a: F.softmax(t, axis=a))


@onnx_op("LogSoftmax")
@via_float32
def log_softmax(n, x):
    return _along_axis(n, x, lambda t, a: F.log_softmax(t, axis=a))


@onnx_op("Hardmax")
def hardmax(n, x):
    def one_hot_max(t, axis):
        if t.size == 0:
            return t
        return F.one_hot(F.argmax(t, axis=axis), t.shape[axis], axis=axis, dtype=t.dtype)
    return _along_axis(n, x, one_hot_max)


# ---- Gemm, MatMul ------------------------------------------------------------------------

@onnx_op("Gemm")
@via_float32
def gemm(n, a, b, c=None):
    if a.ndim != 2 or b.ndim != 2:
        raise n.error(f"A {a.shape} and B {b.shape} must be matrices", errors.ShapeError)
    return F.gemm(a, b, c, trans_a=bool(n.attr("transA", 0)), trans_b=bool(n.attr("transB", 0)),
                  alpha=n.attr("alpha", 1.0), beta=n.attr("beta", 1.0))


@onnx_op("MatMul")
@via_float32
def matmul(n, a, b):
    return F.matmul(a, b)


@onnx_op("MatMulInteger", since=10)
def matmul_integer(n, a, b, a_zero_point=None, b_zero_point=None):
    # int32 holds the exact products and sums of 8-bit values
    def shifted(t, zp, axis):
        t32 = F.cast(t, "int32")
        if zp is None:
            return t32
        z = F.cast(zp, "int32")
        if z.size > 1:  # one zero point per row of A / column of B
            if t.ndim < 2 or z.shape[-1] != t.shape[axis]:
                raise n.error(f"zero point of shape {zp.shape} does not fit {t.shape}",
                              errors.ShapeError)
            z = F.reshape(z, -1, 1) if axis == t.ndim - 2 else z
        return F.sub(t32, z)
    return F.matmul(shifted(a, a_zero_point, a.ndim - 2), shifted(b, b_zero_point, b.ndim - 1))


# ---- Resize, Upsample --------------------------------------------------------------------

_CORE_COORDS = ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel")
_COORDS = _CORE_COORDS + ("half_pixel_symmetric", "tf_crop_and_resize")
_NEAREST = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def _source_coords(coord, out_len, in_len, scale, roi):
    """Where each output position samples the input, per ONNX's coordinate modes. ``scale``
    may differ from out_len / in_len (scales given, or keep_aspect_ratio_policy); the
    'output width' ONNX divides by is then in_len * scale, possibly fractional."""
    j = np.arange(out_len, dtype=np.float64)
    width = in_len * scale
    if coord == "half_pixel":
        return (j + 0.5) / scale - 0.5
    if coord == "half_pixel_symmetric":
        offset = in_len / 2 * (1 - out_len / width)
        return offset + (j + 0.5) / scale - 0.5
    if coord == "pytorch_half_pixel":
        return (j + 0.5) / scale - 0.5 if out_len > 1 else np.zeros(out_len)
    if coord == "align_corners":
        return j * (in_len - 1) / (width - 1) if width != 1 else np.zeros(out_len)
    if coord == "asymmetric":
        return j / scale
    start, end = roi  # tf_crop_and_resize
    if width == 1:
        return np.full(out_len, (end - start) * (in_len - 1) / 2 + start * (in_len - 1))
    return start * (in_len - 1) + j * (end - start) * (in_len - 1) / (width - 1)


def _nearest_index(src, nearest_mode, scale):
    if nearest_mode == "legacy":  # Resize-10 and Upsample: ceil down-sampling, floor up
        nearest_mode = "ceil" if scale < 1 else "floor"
    if nearest_mode == "round_prefer_floor":
        return np.ceil(src - 0.5)
    if nearest_mode == "round_prefer_ceil":
        return np.floor(src + 0.5)
    return np.floor(src) if nearest_mode == "floor" else np.ceil(src)


def _kernel(mode, d, a):
    """The linear or cubic interpolation kernel at distances d."""
    d = np.abs(d)
    if mode == "linear":
        return np.clip(1 - d, 0, None)
    d2, d3 = d * d, d * d * d
    return np.where(d <= 1, (a + 2) * d3 - (a + 3) * d2 + 1,
                    np.where(d < 2, a * d3 - 5 * a * d2 + 8 * a * d - 4 * a, 0.0))


def _interp_matrix(src, in_len, mode, scale, a, exclude_outside, antialias):
    """(out, in) weights: output j = sum_i W[j, i] * input i. Antialiasing stretches the
    kernel by 1 / scale when down-sampling; samples outside the input take the edge value,
    or with exclude_outside, no weight."""
    stretch = min(scale, 1.0) if antialias else 1.0
    support = (1.0 if mode == "linear" else 2.0) / stretch
    first = np.floor(src - support).astype(np.int64)
    taps = first[:, None] + np.arange(int(2 * math.ceil(support)) + 2)[None, :]
    w = _kernel(mode, (taps - src[:, None]) * stretch, a)
    w = w / np.where(w.sum(1, keepdims=True) == 0, 1, w.sum(1, keepdims=True))
    if exclude_outside:
        w = np.where((taps < 0) | (taps >= in_len), 0.0, w)
        s = w.sum(1, keepdims=True)
        w = w / np.where(s == 0, 1, s)
    m = np.zeros((len(src), in_len))
    rows = np.repeat(np.arange(len(src)), taps.shape[1])
    np.add.at(m, (rows, np.clip(taps, 0, in_len - 1).reshape(-1)), w.reshape(-1))
    return m


def _along(x, axis, fn):
    """fn applied to x with ``axis`` moved last, moved back after."""
    if axis == x.ndim - 1:
        return fn(x)
    perm = [i for i in range(x.ndim) if i != axis] + [axis]
    inv = [perm.index(i) for i in range(x.ndim)]
    return F.permute(fn(F.permute(x, *perm)), *inv)


def _resize_axis(x, axis, out_len, scale, roi, o):
    in_len = x.shape[axis]
    src = _source_coords(o["coord"], out_len, in_len, scale, roi)
    outside = None
    if o["coord"] == "tf_crop_and_resize":
        outside = (src < 0) | (src > in_len - 1)
    if o["mode"] == "nearest":
        idx = np.clip(_nearest_index(src, o["nearest"], scale), 0, in_len - 1).astype(np.int64)
        y = F.gather(x, const(idx, like=x), axis=axis)
    else:
        m = _interp_matrix(src, in_len, o["mode"], scale, o["a"], o["exclude"], o["antialias"])
        wt = const(m.T, like=x, dtype=x.dtype.np)
        y = _along(x, axis, lambda t: F.matmul(t, wt))
    if outside is not None and outside.any():
        shape = [1] * x.ndim
        shape[axis] = out_len
        keep = const(~outside.reshape(shape), like=x)
        y = F.where(keep, y, const(np.asarray(o["extrapolation"], dtype=x.dtype.np), like=x))
    return y


def _resize(n, x, scales=None, sizes=None, roi=None, axes=None, **o):
    r = x.ndim
    if o["mode"] not in ("nearest", "linear", "cubic"):
        raise n.error(f"mode must be nearest, linear or cubic, got {o['mode']!r}",
                      errors.ValueError)
    if o["coord"] not in _COORDS:
        raise n.error(f"coordinate_transformation_mode {o['coord']!r} is not one of {_COORDS}",
                      errors.ValueError)
    if o["nearest"] not in _NEAREST + ("legacy",):
        raise n.error(f"nearest_mode {o['nearest']!r} is not one of {_NEAREST}",
                      errors.ValueError)
    axes = [axis_of(n, a, r, "axes") for a in axes] if axes else list(range(r))
    if len(set(axes)) != len(axes):
        raise n.error(f"axes {axes} repeat an axis", errors.ValueError)
    if (scales is None) == (sizes is None):
        raise n.error("give exactly one of scales and sizes", errors.ValueError)
    given = scales if scales is not None else sizes
    if len(given) != len(axes):
        raise n.error(f"{'scales' if scales is not None else 'sizes'} {given} must have "
                      f"{len(axes)} entries (one per axis of input {x.shape})", errors.ShapeError)
    scale, out = [1.0] * r, list(x.shape)
    if scales is not None:
        for a, s in zip(axes, scales):
            if not (s > 0 and math.isfinite(s)):
                raise n.error(f"scales must be finite and > 0, got {scales}", errors.ValueError)
            scale[a], out[a] = s, int(math.floor(x.shape[a] * s))
    else:
        if any(s < 0 for s in sizes) or any(x.shape[a] == 0 for a in axes):
            raise n.error(f"cannot resize {x.shape} to sizes {sizes}", errors.ShapeError)
        policy = o["policy"]
        if policy == "stretch":
            for a, s in zip(axes, sizes):
                scale[a], out[a] = s / x.shape[a], s
        elif policy in ("not_larger", "not_smaller"):
            ratios = [s / x.shape[a] for a, s in zip(axes, sizes)]
            s = min(ratios) if policy == "not_larger" else max(ratios)
            for a in axes:
                scale[a], out[a] = s, int(math.floor(s * x.shape[a] + 0.5))
        else:
            raise n.error(f"keep_aspect_ratio_policy {policy!r} is not stretch, not_larger or "
                          f"not_smaller", errors.ValueError)
    check_shape(n, out)
    rois = [(0.0, 1.0)] * r
    if o["coord"] == "tf_crop_and_resize":
        if roi is None or len(roi) != 2 * len(axes):
            raise n.error(f"tf_crop_and_resize needs roi with {2 * len(axes)} values, got {roi}",
                          errors.ShapeError)
        for i, a in enumerate(axes):
            rois[a] = (roi[i], roi[len(axes) + i])
    todo = [a for a in axes if out[a] != x.shape[a] or scale[a] != 1.0 or rois[a] != (0.0, 1.0)]
    if not todo:
        return x
    downsampling = any(scale[a] < 1 for a in todo)
    if o["mode"] == "linear" and o["coord"] in _CORE_COORDS and x.dtype.name in _CORE_FLOATS \
            and not (o["antialias"] and downsampling) \
            and all(float(out[a]) == x.shape[a] * scale[a] for a in todo):
        return F.resize(x, size=out, mode="linear", coordinate_transformation_mode=o["coord"])
    integer = not x.dtype.is_floating and o["mode"] != "nearest"
    y = F.cast(x, "float64") if integer else x
    for a in todo:
        y = _resize_axis(y, a, out[a], scale[a], rois[a], o)
    if integer:  # interpolated integers round to the nearest value the dtype holds
        info = np.iinfo(x.dtype.np)
        y = F.cast(F.clip(F.round(y), float(info.min), float(info.max)), x.dtype.name)
    return y


def _optional(t, read):
    """An optional input read on the host; an empty tensor counts as absent."""
    if t is None or t.size == 0:
        return None
    return read(t)


@onnx_op("Resize", since=10)
def resize(n, x, *inputs):
    mode = n.attr("mode", "nearest")
    if n.opset < 11:  # Resize-10: (X, scales), asymmetric coordinates, Upsample's rounding
        scales = n.floats(inputs[0]) if inputs else None
        return _resize(n, x, scales=scales, mode=mode, coord="asymmetric", nearest="legacy",
                       a=-0.75, exclude=False, antialias=False, extrapolation=0.0,
                       policy="stretch")
    roi, scales, sizes = (list(inputs) + [None] * 3)[:3]
    return _resize(
        n, x, scales=_optional(scales, n.floats), sizes=_optional(sizes, n.ints),
        roi=_optional(roi, n.floats), axes=n.attr("axes"), mode=mode,
        coord=n.attr("coordinate_transformation_mode", "half_pixel"),
        nearest=n.attr("nearest_mode", "round_prefer_floor"), a=n.attr("cubic_coeff_a", -0.75),
        exclude=bool(n.attr("exclude_outside", 0)), antialias=bool(n.attr("antialias", 0)),
        extrapolation=n.attr("extrapolation_value", 0.0),
        policy=n.attr("keep_aspect_ratio_policy", "stretch"))


@onnx_op("Upsample", since=7)
def upsample(n, x, scales=None):
    s = n.attr("scales") if n.opset < 9 else n.floats(scales)
    if s is None:
        raise n.error("needs scales", errors.ValueError)
    if any(v < 1 for v in s):
        raise n.error(f"scales must be >= 1, got {list(s)}", errors.ValueError)
    mode = n.attr("mode", "nearest")
    mode = "linear" if mode in ("bilinear", "trilinear") else mode
    return _resize(n, x, scales=list(s), mode=mode, coord="asymmetric", nearest="legacy",
                   a=-0.75, exclude=False, antialias=False, extrapolation=0.0, policy="stretch")


# ---- losses ------------------------------------------------------------------------------

def _nll(n, log_prob, target, weight, reduction, ignore_index):
    """ONNX NegativeLogLikelihoodLoss on log-probabilities (N, C, d...)."""
    if log_prob.ndim < 2:
        raise n.error(f"input must be (N, C, d...), got shape {log_prob.shape}",
                      errors.ShapeError)
    c = log_prob.shape[1]
    want = (log_prob.shape[0],) + tuple(log_prob.shape[2:])
    if tuple(target.shape) != want:
        raise n.error(f"target of shape {target.shape} must be {want} for input "
                      f"{log_prob.shape}", errors.ShapeError)
    if target.dtype.name not in ("int32", "int64"):
        raise n.error(f"target must be int32 or int64, got {target.dtype.name}",
                      errors.DTypeError)
    if weight is not None and tuple(weight.shape) != (c,):
        raise n.error(f"weight of shape {weight.shape} must be ({c},)", errors.ShapeError)
    if reduction not in ("none", "sum", "mean"):
        raise n.error(f"reduction must be none, sum or mean, got {reduction!r}",
                      errors.ValueError)
    labels = n.host(target)
    bad = (labels < 0) | (labels >= c)
    if ignore_index is not None:
        bad &= labels != ignore_index
    if bad.any():
        raise n.error(f"target value {int(labels[bad][0])} is outside [0, {c})"
                      + ("" if ignore_index is None else f" and not ignore_index {ignore_index}"),
                      errors.IndexError)
    t = F.cast(target, "int64")
    keep = None
    if ignore_index is not None:
        keep = F.ne(t, ignore_index)
        t = F.where(keep, t, const(np.int64(0), like=t))
    picked = F.squeeze(F.gather_elements(log_prob, F.unsqueeze(t, 1), axis=1), 1)
    loss = F.neg(picked)
    w = None if weight is None else F.gather(weight, t, axis=0)
    if keep is not None:
        mask = F.cast(keep, log_prob.dtype.name)
        w = mask if w is None else F.mul(w, mask)
    if w is not None:
        loss = F.mul(loss, w)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return F.sum(loss)
    if w is None:
        return F.mean(loss)
    return F.div(F.sum(loss), F.sum(w))  # the weighted mean over the samples not ignored


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(n, x, target, weight=None):
    return _nll(n, x, target, weight, n.attr("reduction", "mean"), n.attr("ignore_index"))


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy(n, scores, target, weight=None):
    if scores.ndim < 2:
        raise n.error(f"scores must be (N, C, d...), got shape {scores.shape}",
                      errors.ShapeError)
    log_prob = F.log_softmax(scores, axis=1)
    loss = _nll(n, log_prob, target, weight, n.attr("reduction", "mean"),
                n.attr("ignore_index"))
    return loss, log_prob
