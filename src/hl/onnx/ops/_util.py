"""Small helpers the op families share."""
import functools

import numpy as np

from ... import errors
from ..._tensor import tensor as _tensor
from ...autograd import functional as F

# The largest tensor an imported graph may ask a shape-making op (Reshape, Expand, Tile,
# ConstantOfShape, Range, Resize...) to create, in elements: 2**31 float32 values are 8 GiB.
# A crafted model asking for more gets an ONNXError instead of exhausting memory.
MAX_ELEMENTS = 2**31


def check_shape(n, shape, what="output"):
    """Checks a shape a node asks for: no negative dimensions, not absurdly large."""
    shape = [int(s) for s in shape]
    if any(s < 0 for s in shape):
        raise n.error(f"{what} shape {tuple(shape)} has a negative dimension", errors.ShapeError)
    size = 1
    for s in shape:
        size *= s
    if size > MAX_ELEMENTS:
        raise n.error(f"{what} shape {tuple(shape)} would hold {size:,} elements, more than "
                      f"hl.onnx.ops._util.MAX_ELEMENTS ({MAX_ELEMENTS:,})", errors.ShapeError)
    return tuple(shape)


def const(array, like=None, device=None, dtype=None):
    """A numpy value as an hl tensor on the device of ``like`` (a tensor) or ``device``."""
    a = np.asarray(array)
    if dtype is not None:
        a = a.astype(dtype)
    if device is None and like is not None:
        device = like.device
    return _tensor(np.ascontiguousarray(a).reshape(a.shape), device=device)  # keeps 0-d


def axis_of(n, axis, ndim, what="axis"):
    """A possibly negative axis, checked against ``ndim``."""
    if not -ndim <= axis < max(ndim, 1):
        raise n.error(f"{what} {axis} is out of range for a tensor of {ndim} dimensions",
                      errors.IndexError)
    return axis % ndim if ndim else 0


HALF = ("float16", "bfloat16")


def via_float32(fn):
    """Runs a handler on float32 copies of float16/bfloat16 inputs that sit on the CPU (hl
    computes in half precision only on GPUs) and casts float32 outputs back to that dtype.
    The casts record gradients, so training is unaffected."""
    @functools.wraps(fn)
    def handler(n, *xs):
        half = next((x.dtype.name for x in xs if x is not None and hasattr(x, "dtype")
                     and x.dtype.name in HALF and x.device.kind == "cpu"), None)
        if half is None:
            return fn(n, *xs)
        ys = fn(n, *[F.cast(x, "float32") if x is not None and hasattr(x, "dtype")
                     and x.dtype.name == half else x for x in xs])

        def back(t):
            return F.cast(t, half) if t is not None and t.dtype.name == "float32" else t
        return tuple(back(t) for t in ys) if isinstance(ys, tuple) else back(ys)
    return handler


def prod(values):
    out = 1
    for v in values:
        out *= int(v)
    return out


def np_dtype_of_onnx(n, elem_type):
    """The numpy dtype for an ONNX TensorProto element type hl can hold."""
    from ..graph import ELEM_TYPES, elem_type_name
    name = ELEM_TYPES.get(int(elem_type))
    if name is None:
        raise n.error(f"element type {elem_type_name(int(elem_type))} is not supported by hl",
                      errors.UnsupportedError)
    return name


__all__ = ["F", "HALF", "MAX_ELEMENTS", "axis_of", "check_shape", "const", "np_dtype_of_onnx",
           "prod", "via_float32"]
