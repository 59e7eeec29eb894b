"""Casts, Identity and linear (de)quantization (uint8; int32 input to DequantizeLinear).
"""

import onnx

from ... import errors
from ...autograd.binary import Cast
from ..registry import exports, onnx_op
from ._util import F, HALF, np_dtype_of_onnx


# ---- casts and identity -------------------------------------------------------------------

def _cast_to(n, x, dtype):
    if x.dtype.name == dtype:
        return x
    # hl's cast is what ONNX asks for hl's dtypes: integers wrap, floats to bool test != 0,
    # float to integer truncates. saturate and round_mode concern float8 types only.
    return F.cast(x, dtype)


@onnx_op("Cast")
def cast(n, x):
    to = n.attr("to")
    if to is None:
        raise n.error("the 'to' attribute is missing", errors.ONNXError)
    if isinstance(to, str):  # opset 1 named the type ("FLOAT")
        try:
            to = onnx.TensorProto.DataType.Value(to.upper())
        except ValueError:
            raise n.error(f"unknown element type {to!r}", errors.ONNXError) from None
    return _cast_to(n, x, np_dtype_of_onnx(n, to))


@onnx_op("CastLike")
def cast_like(n, x, like):
    return _cast_to(n, x, like.dtype.name)


@onnx_op("Identity")
def identity(n, x):
    return x


# ---- linear quantization (uint8; int32 input to DequantizeLinear) -------------------------

def _quant_param(n, p, x, axis, block, what):
    """Scale or zero point shaped to broadcast against x: a scalar (per tensor), a 1-D
    tensor along ``axis`` (per axis), or with block_size, x's shape with ceil(D/block)
    along ``axis``, each value repeated over its block."""
    if p.size == 1:
        return F.reshape(p, ())
    xs, ps = tuple(x.shape), tuple(p.shape)
    if not -x.ndim <= axis < x.ndim:
        raise n.error(f"axis {axis} is out of range for an input of shape {xs}",
                      errors.IndexError)
    axis %= x.ndim
    if not block:
        if ps != (xs[axis],):
            raise n.error(f"{what} of shape {ps} fits neither per-tensor nor per-axis "
                          f"quantization of an input of shape {xs} along axis {axis}",
                          errors.ShapeError)
        return F.reshape(p, *[xs[axis] if i == axis else 1 for i in range(x.ndim)])
    if block < 0:
        raise n.error(f"block_size must be positive, got {block}", errors.ValueError)
    want = xs[:axis] + (-(-xs[axis] // block),) + xs[axis + 1:]
    if ps != want:
        raise n.error(f"{what} of shape {ps} does not fit blocks of {block} along axis "
                      f"{axis} of an input of shape {xs} (expected {want})", errors.ShapeError)
    grown = F.expand(F.unsqueeze(p, axis + 1), *(ps[:axis + 1] + (block,) + ps[axis + 1:]))
    grown = F.reshape(grown, *(ps[:axis] + (ps[axis] * block,) + ps[axis + 1:]))
    return F.getitem(grown, (slice(None),) * axis + (slice(0, xs[axis]),))


def _float_for(*dtypes):
    return "float64" if "float64" in dtypes else "float32"


@onnx_op("QuantizeLinear")
def quantize_linear(n, x, scale, zero_point=None):
    axis, block = n.attr("axis", 1), n.attr("block_size", 0)
    out = zero_point.dtype.name if zero_point is not None else \
        np_dtype_of_onnx(n, n.attr("output_dtype", 0) or onnx.TensorProto.UINT8)
    if out != "uint8":
        raise n.error(f"quantizing to {out} is not supported; hl holds uint8 only among "
                      f"ONNX's quantized types", errors.UnsupportedError)
    # The division runs in the precision attribute's dtype, else as numpy would run it
    # (ONNX's reference): float32, or float64 for a float64 or integer operand.
    precision = n.attr("precision", 0)
    ft = np_dtype_of_onnx(n, precision) if precision else \
        "float64" if x.dtype.is_integer else _float_for(x.dtype.name, scale.dtype.name)
    # A half-precision division is done in float32 on half-rounded operands and rounded to
    # half again: exactly the half quotient, on any device.
    work = "float32" if ft in HALF else ft
    xw, sw = (F.cast(F.cast(t, ft), work) for t in (x, scale))
    q = F.div(xw, _quant_param(n, sw, x, axis, block, "y_scale"))
    if work != ft:
        q = F.cast(F.cast(q, ft), work)
    q = F.round(q)  # halves to even
    ft = work
    if zero_point is not None:
        q = F.add(q, _quant_param(n, F.cast(zero_point, ft), x, axis, block, "y_zero_point"))
    return F.cast(F.clamp(q, 0.0, 255.0), "uint8")


@onnx_op("DequantizeLinear")
def dequantize_linear(n, x, scale, zero_point=None):
    if x.dtype.name not in ("uint8", "int32"):
        raise n.error(f"dequantizing {x.dtype.name} is not supported (uint8 and int32 are)",
                      errors.UnsupportedError)
    if zero_point is not None and zero_point.dtype.name != x.dtype.name:
        raise n.error(f"x_zero_point ({zero_point.dtype.name}) must have x's dtype "
                      f"({x.dtype.name})", errors.DTypeError)
    if not scale.dtype.is_floating:
        raise n.error(f"x_scale must be floating-point, got {scale.dtype.name}",
                      errors.DTypeError)
    axis, block = n.attr("axis", 1), n.attr("block_size", 0)
    out = np_dtype_of_onnx(n, n.attr("output_dtype")) if n.attr("output_dtype") else \
        scale.dtype.name
    ft = _float_for(out, scale.dtype.name)  # ONNX's reference multiplies in float32
    y = F.cast(x, ft)
    if zero_point is not None:
        y = F.sub(y, _quant_param(n, F.cast(zero_point, ft), x, axis, block, "x_zero_point"))
    y = F.mul(y, _quant_param(n, F.cast(scale, ft), x, axis, block, "x_scale"))
    return y if out == ft else F.cast(y, out)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


@exports(Cast)
def export_cast(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.cast(x.name, f.dtype, out=y.name)
