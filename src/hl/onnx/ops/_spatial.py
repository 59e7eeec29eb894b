"""Geometry the convolution and pooling families share: spatial attributes (strides, dilations,
pads, auto_pad, ceil_mode) read and checked, and the numpy window helpers of the pools.
"""

import itertools

import numpy as np

from ... import errors
from ._util import F, HALF


CORE_FLOATS = ("float32", "float64")


def float32_for_core(x):
    """(x in a dtype the core kernels take, the dtype to cast the result back to or None):
    float16/bfloat16 compute in float32."""
    if x.dtype.name in HALF:
        return F.cast(x, "float32"), x.dtype.name
    return x, None


def cast_back(y, dtype):
    return y if dtype is None else F.cast(y, dtype)


def spatial_input(n, x, what="input"):
    if x.ndim < 3:
        raise n.error(f"{what} must be (N, C, spatial...), got shape {x.shape}", errors.ShapeError)
    return x.ndim - 2


# ---- geometry shared by convolutions and pools -----------------------------------------

def ints_attr(n, name, nd, default):
    v = [int(a) for a in n.attr(name, [default] * nd)]
    if len(v) != nd:
        raise n.error(f"{name} {v} must have {nd} entries, one per spatial axis",
                      errors.ShapeError)
    return v


def strides_dilations(n, nd):
    strides = ints_attr(n, "strides", nd, 1)
    dil = ints_attr(n, "dilations", nd, 1)
    if any(v < 1 for v in strides + dil):
        raise n.error(f"strides {strides} and dilations {dil} must be >= 1", errors.ValueError)
    return strides, dil


def pads_for(n, sizes, kernel, strides, dil):
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
    p = ints_attr(n, "pads", 2 * nd, 0)
    if any(v < 0 for v in p):
        raise n.error(f"pads {p} must not be negative", errors.ValueError)
    return list(zip(p[:nd], p[nd:]))


def pool_geometry(n, x, with_dilations=True):
    """kernel, strides, dilations, pads, output size and, per axis, how many positions past
    the end padding the last window reaches (ceil_mode)."""
    nd = spatial_input(n, x)
    kernel = n.attr("kernel_shape")
    if kernel is None or len(kernel) != nd:
        raise n.error(f"kernel_shape {kernel} must have one entry per spatial axis of input "
                      f"{x.shape}", errors.ShapeError)
    kernel = [int(k) for k in kernel]
    strides, dil = strides_dilations(n, nd)
    if not with_dilations:
        dil = [1] * nd
    sizes = list(x.shape[2:])
    pads = pads_for(n, sizes, kernel, strides, dil)
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


def window_keys(kernel, strides, dil, out, lead=2):
    """For each kernel offset, the index key that picks, for every output position, the input
    element under that offset (in an input padded so every window fits)."""
    for offs in itertools.product(*(range(k) for k in kernel)):
        yield offs, (slice(None),) * lead + tuple(
            slice(o * d, o * d + (m - 1) * s + 1, s) for o, d, s, m in zip(offs, dil, strides, out))


def window_counts(sizes, kernel, strides, dil, pads, extra, out, include_pad):
    """How many positions each window covers inside the input (or, include_pad, inside the
    explicitly padded input): average pooling's divisors, computed on the host."""
    mask = np.zeros([b + sz + e + x for sz, (b, e), x in zip(sizes, pads, extra)])
    mask[tuple(slice(0 if include_pad else b, b + sz + (e if include_pad else 0))
               for sz, (b, e) in zip(sizes, pads))] = 1
    total = np.zeros(out)
    for _, key in window_keys(kernel, strides, dil, out, lead=0):
        total += mask[key]
    return total


def pad_spatial(x, pads, extra=None, value=0.0):
    extra = extra or [0] * len(pads)
    if not any(b or e for b, e in pads) and not any(extra):
        return x
    return F.pad(x, [(0, 0), (0, 0)] + [(b, e + x_) for (b, e), x_ in zip(pads, extra)],
                 value=value)


def window_sum(x, kernel, strides, dil, pads, extra, out):
    """The sum over each (zero-padded) window, one strided slice per kernel offset."""
    xp = pad_spatial(x, pads, extra)
    total = None
    for _, key in window_keys(kernel, strides, dil, out):
        v = F.getitem(xp, key)
        total = v if total is None else F.add(total, v)
    return total
