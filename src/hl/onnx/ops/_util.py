"""Small helpers the op families share."""
import functools

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ...devices import get_default_device
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
    from ..types import ELEM_TYPES, elem_type_name
    name = ELEM_TYPES.get(int(elem_type))
    if name is None:
        raise n.error(f"element type {elem_type_name(int(elem_type))} is not supported by hl",
                      errors.UnsupportedError)
    return name


def device_of(n, tensors=()):
    """The device a node computes on: its first tensor input's, else the model's."""
    for t in tensors:
        if t is not None and hasattr(t, "device"):
            return t.device
    return n.device or get_default_device()


def axes_of(n, axes, ndim, what="axes"):
    """A list of possibly negative axes, normalised, checked for range and repeats."""
    out = [axis_of(n, int(a), ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise n.error(f"{what} {list(axes)} name an axis twice", errors.ValueError)
    return out


def attr_or_input(n, name, t, since):
    """An int list that is an attribute before opset ``since`` and an input from it on."""
    if n.opset >= since:
        return n.ints(t, name)
    return n.attr(name)


def hl_dtype_name(n, a, what):
    """The dtype name of a numpy value, refused where hl cannot hold it."""
    from ..types import ELEM_TYPES
    name = str(np.asarray(a).dtype)
    if name not in ELEM_TYPES.values():  # the dtypes hl holds
        raise n.error(f"{what} has element type {name}, which hl cannot hold",
                      errors.UnsupportedError)
    return name


# ---- for export rules ------------------------------------------------------------------------

def float_input(g, x):
    """x's name, cast to float32 first when it is not floating (hl's float ops do that)."""
    return x.name if x.dtype.is_floating else g.cast(x.name, _dt.float32)


__all__ = ["F", "HALF", "MAX_BYTES", "MAX_ELEMENTS", "attr_or_input", "axes_of", "axis_of",
           "check_shape", "const", "device_of", "float_input", "hl_dtype_name",
           "np_dtype_of_onnx", "prod", "via_float32"]
