"""Small helpers the op families share."""
import functools

import numpy as np

from ... import errors
from ..._tensor import tensor as _tensor
from ...autograd import functional as F

# The largest tensor an imported graph may ask a shape-making op (Reshape, Expand, Tile, Pad,
# ConstantOfShape, Range, Resize, OneHot, random draws...) to create, in bytes, and in
# elements. Bytes count the widest dtype the node touches (its inputs' and its 'value'
# attribute's; 8 when none is known), so a 2 x 1e9 int64 Pad is 16 GB, not 2e9 elements. A
# crafted model asking for more gets an ONNXError instead of exhausting memory. Settable:
# hl.onnx.set_max_tensor_bytes(n) (docs/onnx.md).
MAX_BYTES = 2 << 30
MAX_ELEMENTS = 2**31


def _itemsize(n):
    """The widest element a node works in: its inputs' dtypes and its 'value' attribute's."""
    sizes = []
    scope = n.scope or {}
    for name in n.inputs:
        t = scope.get(name) if name else None
        if t is not None and hasattr(t, "dtype") and hasattr(t.dtype, "itemsize"):
            sizes.append(int(t.dtype.itemsize))
    value = n.attrs.get("value") if hasattr(n, "attrs") else None
    if isinstance(value, np.ndarray):
        sizes.append(value.dtype.itemsize)
    return max(sizes) if sizes else 8


def check_shape(n, shape, what="output"):
    """Checks a shape a node asks for: no negative dimensions, within MAX_ELEMENTS and, at the
    node's widest dtype, within MAX_BYTES."""
    shape = [int(s) for s in shape]
    if any(s < 0 for s in shape):
        raise n.error(f"{what} shape {tuple(shape)} has a negative dimension", errors.ShapeError)
    size = 1
    for s in shape:
        size *= s
    if size > MAX_ELEMENTS:
        raise n.error(f"{what} shape {tuple(shape)} would hold {size:,} elements, more than "
                      f"hl.onnx.ops._util.MAX_ELEMENTS ({MAX_ELEMENTS:,})", errors.ShapeError)
    nbytes = size * _itemsize(n)
    if nbytes > MAX_BYTES:
        raise n.error(f"{what} shape {tuple(shape)} would take {nbytes:,} bytes, more than "
                      f"the limit of {MAX_BYTES:,} (hl.onnx.set_max_tensor_bytes raises it)",
                      errors.ShapeError)
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


__all__ = ["F", "HALF", "MAX_BYTES", "MAX_ELEMENTS", "axis_of", "check_shape", "const",
           "np_dtype_of_onnx",
           "prod", "via_float32"]
