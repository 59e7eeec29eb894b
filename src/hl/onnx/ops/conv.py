"""Convolutions (Conv, ConvInteger, ConvTranspose): import handlers and export rules.
"""

from ... import errors
from ...autograd.conv import Conv, ConvTranspose
from ..registry import exports, onnx_op
from ._spatial import (cast_back, CORE_FLOATS, float32_for_core, ints_attr, pad_spatial, pads_for,
                       spatial_input, strides_dilations)
from ._util import check_shape, F, HALF


# ---- convolution -----------------------------------------------------------------------

def _check_conv(n, x, w, group, transpose=False):
    nd = spatial_input(n, x)
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
    if x.dtype.name not in CORE_FLOATS + HALF:
        raise n.error(f"needs floating-point input, got {x.dtype.name}", errors.DTypeError)
    strides, dil = strides_dilations(n, nd)
    pads = pads_for(n, x.shape[2:], w.shape[2:], strides, dil)
    x, back = float32_for_core(x)
    if back:
        w = F.cast(w, "float32")
        b = None if b is None else F.cast(b, "float32")
    if nd <= 2:
        conv = F.conv1d if nd == 1 else F.conv2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)  # ONNX order
        return cast_back(conv(x, w, b, stride=tuple(strides), padding=padding,
                          dilation=tuple(dil), groups=group), back)
    xp = pad_spatial(x, pads)
    if any(size < (k - 1) * d + 1 for size, k, d in zip(xp.shape[2:], w.shape[2:], dil)):
        raise n.error(f"kernel {list(w.shape[2:])} (dilations {dil}) does not fit input "
                      f"{x.shape} padded by {pads}", errors.ShapeError)
    return cast_back(_add_channel_bias(_conv_folded(xp, w, strides, dil, group), b), back)


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
    strides, dil = strides_dilations(n, nd)
    out_pad = ints_attr(n, "output_padding", nd, 0)
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
        pads = pads_for(n, sizes, kernel, strides, dil)
    if x.dtype.name not in CORE_FLOATS + HALF:
        raise n.error(f"needs floating-point input, got {x.dtype.name}", errors.DTypeError)
    final = [f - pb - pe + op for f, (pb, pe), op in zip(full, pads, out_pad)]
    check_shape(n, [x.shape[0], m] + final)
    x, back = float32_for_core(x)
    if back:
        w = F.cast(w, "float32")
        b = None if b is None else F.cast(b, "float32")
    if nd in (1, 2) and not any(out_pad) and all(p >= 0 for pair in pads for p in pair):
        conv_t = F.conv_transpose1d if nd == 1 else F.conv_transpose2d
        padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)
        return cast_back(conv_t(x, w, b, stride=tuple(strides), padding=padding, groups=group,
                            dilation=tuple(dil)), back)
    y = _conv_transpose_full(x, w, strides, dil, group)
    # pads crop the full result; output_padding adds positions past its end (bias only)
    y = F.pad(y, [(0, 0), (0, 0)] + [(-pb, op - pe) for (pb, pe), op in zip(pads, out_pad)])
    return cast_back(_add_channel_bias(y, b), back)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- convolution and pooling -------------------------------------------------------------

def _spatial_dynamic(x):
    return any(x.dynamic(d) for d in range(2, x.ndim))


@exports(Conv)
def export_conv(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    kw = dict(kernel_shape=list(w.shape[2:]), strides=list(f.stride),
              dilations=list(f.dilation), group=int(f.groups))
    if isinstance(f.padding, str) and _spatial_dynamic(x):
        # 'same' pads depend on the input size: ONNX's auto_pad recomputes them per run
        if f.padding.lower() == "same":
            kw["auto_pad"] = "SAME_UPPER"  # hl's 'same' puts an odd extra pad at the end
        else:
            kw["pads"] = [0] * (2 * f.n)
    else:
        kw["pads"] = [int(p) for p in f._pads(x, w)]
    g.op("Conv", [x.name, w.name] + ([b.name] if b is not None else []), out=ys[0].name, **kw)


@exports(ConvTranspose)
def export_conv_transpose(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    g.op("ConvTranspose", [x.name, w.name] + ([b.name] if b is not None else []),
         out=ys[0].name, kernel_shape=list(w.shape[2:]), strides=list(f.stride),
         pads=[int(p) for p in f.pads], dilations=list(f.dilation), group=int(f.groups),
         output_padding=list(f.output_padding))
