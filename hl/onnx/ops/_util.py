"""Small helpers the op families share."""
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


def np_dtype_of_onnx(n, elem_type):
    """The numpy dtype for an ONNX TensorProto element type hl can hold."""
    from ..graph import ELEM_TYPES, elem_type_name
    name = ELEM_TYPES.get(int(elem_type))
    if name is None:
        raise n.error(f"element type {elem_type_name(int(elem_type))} is not supported by hl",
                      errors.UnsupportedError)
    return name


__all__ = ["F", "MAX_ELEMENTS", "axis_of", "check_shape", "const", "np_dtype_of_onnx"]
