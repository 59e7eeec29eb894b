"""The resize kernels: ONNX Resize (nearest and n-linear, the ONNX coordinate
transformations) and its gradient (the adjoint of the resize), with the argument rules of
PyTorch's interpolate. resize and interpolate themselves, with their gradients, are in
hl.autograd.resize."""
import math
import numbers

from .. import _core, errors
from ._util import _wrap, as_tensor

__all__ = ["resize_forward", "resize_grad"]

_MODES = {"nearest": 0, "linear": 1}
_COORDS = {"half_pixel": 0, "asymmetric": 1, "align_corners": 2, "pytorch_half_pixel": 3}
_NEAREST = {"round_prefer_floor": 0, "round_prefer_ceil": 1, "floor": 2, "ceil": 3}


def _code(table, value, what):
    try:
        return table[value]
    except (KeyError, TypeError):
        raise errors.ValueError(f"resize: {what} must be one of {sorted(table)}, "
                                f"got {value!r}") from None


def _per_axis(value, n, what):
    if isinstance(value, numbers.Number):
        return [value] * n
    value = list(value)
    if len(value) != n:
        raise errors.ShapeError(f"resize: {what} has {len(value)} entries for a tensor of {n} "
                                f"dimensions")
    return value


def _codes(mode, coordinate_transformation_mode, nearest_mode):
    return (_code(_MODES, mode, "mode"),
            _code(_COORDS, coordinate_transformation_mode, "coordinate_transformation_mode"),
            _code(_NEAREST, nearest_mode, "nearest_mode"))


def resize_forward(x, size=None, scales=None, mode="nearest",
                   coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor"):
    """ONNX Resize over every axis of x: to `size` (one int per axis), or by `scales` (output /
    input per axis, finite and > 0: hl.autograd.resize checks them; the size is then
    floor(input * scale) and the scales drive the coordinate mapping). mode 'nearest' moves
    elements of any dtype; 'linear' interpolates along every axis whose size changes."""
    codes = _codes(mode, coordinate_transformation_mode, nearest_mode)
    if scales is not None:
        size = [int(math.floor(n * s)) for n, s in zip(x.shape, scales)]
    return _wrap(_core.call("resize", x._h, list(size), scales, *codes, _core.OUT), x._dtype)


def resize_grad(dy, x_shape, scales=None, mode="nearest",
                coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor"):
    """The gradient of resize with respect to its input of shape x_shape: dy (the output's
    gradient) scattered back through the same weights, deterministically."""
    dy = as_tensor(dy)
    codes = _codes(mode, coordinate_transformation_mode, nearest_mode)
    x_shape = [int(s) for s in _per_axis(x_shape, dy.ndim, "x_shape")]
    if scales is not None:
        scales = [float(s) for s in _per_axis(scales, dy.ndim, "scales")]
    return _wrap(_core.call("resize_grad", dy._h, x_shape, scales, *codes, _core.OUT),
                 dy._dtype)


_SPATIAL = {"linear": 1, "bilinear": 2, "trilinear": 3}


def _interpolate_args(shape, size, scale_factor, mode, align_corners):
    """(output shape, scales or None, resize keyword arguments) for PyTorch's interpolate."""
    ndim = len(shape)
    if ndim < 3:
        raise errors.ShapeError(f"interpolate: expected (N, C, spatial...) input, got shape "
                                f"{tuple(shape)}")
    s = ndim - 2
    if mode in _SPATIAL and _SPATIAL[mode] != s:
        raise errors.ShapeError(f"interpolate: mode {mode!r} needs {_SPATIAL[mode] + 2}-D input, "
                                f"got shape {tuple(shape)}")
    if mode != "nearest" and mode not in _SPATIAL:
        raise errors.ValueError(f"interpolate: mode must be 'nearest', 'linear', 'bilinear' or "
                                f"'trilinear', got {mode!r}")
    if mode == "nearest" and align_corners is not None:
        raise errors.ValueError("interpolate: align_corners only applies to the linear modes")
    if (size is None) == (scale_factor is None):
        raise errors.ValueError("interpolate: give exactly one of size and scale_factor")
    if size is not None:
        out = list(shape[:2]) + [int(v) for v in _per_axis(size, s, "size")]
        scales = None
    else:
        f = [float(v) for v in _per_axis(scale_factor, s, "scale_factor")]
        for v in f:
            if not (v > 0 and math.isfinite(v)):
                raise errors.ValueError(f"interpolate: scale_factor must be > 0, got {f}")
        out = list(shape[:2]) + [int(math.floor(n * v)) for n, v in zip(shape[2:], f)]
        scales = [1.0, 1.0] + f
    if mode == "nearest":  # PyTorch's legacy nearest: floor(out_index * in / out)
        kw = dict(mode="nearest", coordinate_transformation_mode="asymmetric",
                  nearest_mode="floor")
    else:
        kw = dict(mode="linear", coordinate_transformation_mode=(
            "align_corners" if align_corners else "half_pixel"))
    return out, scales, kw
