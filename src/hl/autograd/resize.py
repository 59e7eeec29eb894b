"""Resizing with gradients: ONNX Resize and PyTorch's interpolate.

Both are linear in x (nearest copies, linear interpolation weighs), so the gradient is the
adjoint of the same map: the core's resize_grad scatters dy back through the same weights.
interpolate is resize with PyTorch's coordinate rules, so one Function serves both.
"""
import math

from .. import errors, ops
from ..ops.resize import _codes, _interpolate_args, _per_axis
from ._nn import as_input
from .function import Function

__all__ = ["resize", "interpolate"]


class Resize(Function):
    """y = resize(x) to `size` (one entry per axis), the coordinates mapped by `scales` when
    given, else by the sizes."""

    def __init__(self, size, scales, mode, coordinate_transformation_mode, nearest_mode):
        self.size, self.scales = size, scales
        self.kw = dict(mode=mode, coordinate_transformation_mode=coordinate_transformation_mode,
                       nearest_mode=nearest_mode)
        _codes(mode, coordinate_transformation_mode, nearest_mode)  # checks them now

    def _size(self, x):
        if self.scales is not None:
            return [int(math.floor(n * s)) for n, s in zip(x.shape, self.scales)]
        return [int(s) for s in self.size]

    def forward(self, x):
        self.x_shape = x.shape
        if self.scales is not None:
            return ops.resize_forward(x, scales=self.scales, **self.kw)
        return ops.resize_forward(x, size=self.size, **self.kw)

    def backward(self, dy):
        return ops.resize_grad(dy, self.x_shape, self.scales, **self.kw)


def resize(x, size=None, scales=None, mode="nearest",
           coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_floor"):
    """ONNX Resize over every axis of x: give the output `size` or `scales` (output / input
    per axis); mode 'nearest' or 'linear'. Differentiable with respect to x."""
    x = as_input(x, "resize")
    if (size is None) == (scales is None):
        raise errors.ValueError("resize: give exactly one of size and scales")
    if scales is not None:
        scales = [float(s) for s in _per_axis(scales, x.ndim, "scales")]
        for s in scales:
            if not (s > 0 and math.isfinite(s)):
                raise errors.ValueError(f"resize: scales must be finite and > 0, got {scales}")
    else:
        size = [int(s) for s in _per_axis(size, x.ndim, "size")]
    return Resize(size, scales, mode, coordinate_transformation_mode, nearest_mode)(x)


def interpolate(x, size=None, scale_factor=None, mode="nearest", align_corners=None):
    """PyTorch's F.interpolate for (N, C, L), (N, C, H, W) and (N, C, D, H, W) input:
    'nearest', 'linear' / 'bilinear' / 'trilinear' with align_corners. Differentiable."""
    x = as_input(x, "interpolate")
    out, scales, kw = _interpolate_args(x.shape, size, scale_factor, mode, align_corners)
    kw.setdefault("nearest_mode", "round_prefer_floor")
    return Resize(None if scales is not None else out, scales, kw["mode"],
                  kw["coordinate_transformation_mode"], kw["nearest_mode"])(x)
