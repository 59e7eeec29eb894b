"""Tensors made from shapes: Shape, Size, Constant, ConstantOfShape, Range, EyeLike, Trilu
(import handlers) and the export rule of hl's Triangle (tril/triu).
"""

import math

import numpy as np

from ... import errors
from ...autograd.creation import Triangle
from ..registry import exports, onnx_op
from ._util import check_shape, const, F, hl_dtype_name, MAX_ELEMENTS, np_dtype_of_onnx, prod


# ---- tensors made from shapes -----------------------------------------------------------

@onnx_op("Shape")
def shape_(n, x):
    dims = list(x.shape)
    r = len(dims)

    def clamp(v):
        return min(max(v + r if v < 0 else v, 0), r)
    start, end = clamp(n.attr("start", 0)), clamp(n.attr("end", r))
    return const(np.array(dims[start:end], dtype=np.int64), like=x)


@onnx_op("Size")
def size(n, x):
    return const(np.array(prod(x.shape), dtype=np.int64), like=x)


@onnx_op("ConstantOfShape")
def constant_of_shape(n, shape):
    dims = check_shape(n, n.ints(shape, "shape"))
    value = n.attr("value")
    if value is None:
        value = np.zeros(1, np.float32)
    if np.asarray(value).size != 1:
        raise n.error(f"value must hold one element, got shape {np.shape(value)}",
                      errors.ValueError)
    dtype = hl_dtype_name(n, value, "value")
    return F.full(dims, np.asarray(value).reshape(-1)[0].item(), dtype=dtype,
                  device=shape.device)


@onnx_op("Constant")
def constant(n):
    found = [k for k in ("value", "sparse_value", "value_float", "value_floats", "value_int",
                         "value_ints", "value_string", "value_strings") if n.has(k)]
    if len(found) != 1:
        raise n.error(f"needs exactly one value attribute, got {found}", errors.ONNXError)
    key = found[0]
    v = n.attr(key)
    if key.startswith("value_string"):
        raise n.error("string constants are not supported by hl", errors.UnsupportedError)
    if key.startswith("value_float"):
        v = np.array(v, dtype=np.float32)
    elif key.startswith("value_int"):
        v = np.array(v, dtype=np.int64)
    hl_dtype_name(n, v, "value")
    return const(v, device=n.device)  # no input to take a device from


@onnx_op("Range")
def range_(n, start, limit, delta):
    dtype = start.dtype
    s, e, d = (n.scalar(t) for t in (start, limit, delta))
    if d == 0:
        raise n.error("delta must not be 0", errors.ValueError)
    if dtype.is_integer:
        count = max(-((s - e) // d), 0)  # ceil((e - s) / d) in exact integer arithmetic
    else:
        if not all(math.isfinite(v) for v in (s, e, d)):
            raise n.error(f"start {s}, limit {e} and delta {d} must be finite",
                          errors.ValueError)
        q = (e - s) / d
        count = max(math.ceil(q), 0) if math.isfinite(q) else MAX_ELEMENTS + 1
    check_shape(n, [count])
    # start + i * delta, computed in float64 (or int64) and rounded once to the dtype.
    wide = np.int64 if dtype.is_integer else np.float64
    values = np.arange(count, dtype=wide) * wide(d) + wide(s)
    return F.cast(const(values, like=start), dtype)


@onnx_op("EyeLike")
def eye_like(n, x):
    if x.ndim != 2:
        raise n.error(f"input must be 2-D, got shape {tuple(x.shape)}", errors.ShapeError)
    dtype = x.dtype if n.attr("dtype") is None else np_dtype_of_onnx(n, n.attr("dtype"))
    return F.eye(x.shape[0], x.shape[1], k=n.attr("k", 0), dtype=dtype, device=x.device)


@onnx_op("Trilu")
def trilu(n, x, k=None):
    if x.ndim < 2:
        raise n.error(f"input must have at least 2 dimensions, got shape {tuple(x.shape)}",
                      errors.ShapeError)
    k = int(n.scalar(k, 0))
    # Beyond the matrix every diagonal is the same; keep k within C's int64 comfortably.
    lim = x.shape[-1] + x.shape[-2] + 1
    k = min(max(k, -lim), lim)
    return F.triu(x, k) if n.attr("upper", 1) else F.tril(x, k)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


@exports(Triangle)
def export_triangle(g, f, xs, ys):
    (x,), (y,) = xs, ys
    if g.opset >= 14:
        return g.op("Trilu", [x.name, g.const(np.asarray(f.k, dtype=np.int64))], out=y.name,
                    upper=int(f.upper))
    if x.dynamic(x.ndim - 1) or x.dynamic(x.ndim - 2):
        raise g.error("tril/triu of dynamic rows or columns needs Trilu (opset 14 or later)")
    r, c = x.shape[-2:]
    keep = (np.triu if f.upper else np.tril)(np.ones((r, c), dtype=bool), f.k)
    g.op("Where", [g.const(keep), x.name, g.scalar(0, x.dtype)], out=y.name)
