"""Resize and Upsample: import handlers and the export rule of hl's Resize.
"""

import math

import numpy as np

from ... import errors
from ...autograd.resize import Resize
from ..registry import exports, onnx_op
from ._spatial import CORE_FLOATS
from ._util import axis_of, check_shape, const, F


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
    if o["mode"] == "linear" and o["coord"] in _CORE_COORDS and x.dtype.name in CORE_FLOATS \
            and not (o["antialias"] and downsampling) \
            and all(float(out[a]) == x.shape[a] * scale[a] for a in todo):
        return F.resize(x, size=out, mode="linear", coordinate_transformation_mode=o["coord"])
    if o["mode"] == "nearest" and o["coord"] in _CORE_COORDS[:2] + _CORE_COORDS[3:] \
            and o["nearest"] in _NEAREST and (scales is not None or o["policy"] == "stretch") \
            and all(float(scale[a]).is_integer() for a in todo):
        # Upsampling by whole factors (Upsample x2), the common case: the core's nearest
        # resize, a gather of any dtype. The core maps coordinates with exact ratios, which
        # can round the other way from onnxruntime's float arithmetic where a source
        # coordinate lands on a rounding boundary; with a whole factor and no align_corners
        # none does, so both agree. Other scales take the path below.
        kw = dict(mode="nearest", coordinate_transformation_mode=o["coord"],
                  nearest_mode=o["nearest"])
        return F.resize(x, scales=scale, **kw) if scales is not None else \
            F.resize(x, size=out, **kw)
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


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


@exports(Resize)
def export_resize(g, f, xs, ys):
    """ONNX Resize with hl's scales, or its sizes (only the resized axes from opset 18, so a
    dynamic batch axis stays dynamic; before that, the sizes of dynamic axes read from
    Shape)."""
    (x,), (y,) = xs, ys
    kw = dict(mode=f.kw["mode"], coordinate_transformation_mode=f.kw[
        "coordinate_transformation_mode"], nearest_mode=f.kw["nearest_mode"])
    if kw["mode"] != "nearest":
        kw.pop("nearest_mode")
    if f.scales is not None:
        scales = g.const(np.asarray(f.scales, dtype=np.float32))
        return g.op("Resize", [x.name, "", scales], out=y.name, **kw)
    g.varies("size")
    changed = [a for a in range(x.ndim) if x.sig[a] != y.sig[a]]
    if g.opset >= 18 and changed and all(not y.dynamic(a) for a in changed):
        sizes = g.ints([y.shape[a] for a in changed])
        return g.op("Resize", [x.name, "", "", sizes], out=y.name, axes=changed, **kw)
    sizes = g.shape_tensor(y.sig, [x])
    g.op("Resize", [x.name, "", "", sizes], out=y.name, **kw)
