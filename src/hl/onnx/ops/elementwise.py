"""Element-wise operators: arithmetic, comparisons and logic (numpy broadcasting), math
functions and activations, casts and linear (de)quantization.

ONNX types these operators strictly (Add takes two tensors of one dtype; Pow's output has
its base's dtype; comparisons give bool), while hl promotes mixed dtypes as numpy does. The
handlers check the dtypes ONNX allows, so an invalid model gets a DTypeError naming the node
instead of an answer of the wrong dtype.
"""
import functools

import numpy as np
import onnx

from ... import errors
from ..._tensor import tensor as _tensor
from . import onnx_op
from ._util import HALF as _HALF, F, const, np_dtype_of_onnx, via_float32



# ---- checks and dtype plumbing ------------------------------------------------------------

def _kind(x):
    d = x.dtype
    return "float" if d.is_floating else "int" if d.is_integer else "bool"


# What each kind of operand list accepts: "float", "int", "bool", or "num" (float or int).
_ALLOWED = {"float": {"float"}, "int": {"int"}, "bool": {"bool"}, "num": {"float", "int"},
            "any": {"float", "int", "bool"}}


def _expect(n, kinds, *xs):
    """Checks that the tensors share one dtype of an allowed kind (None entries are skipped)."""
    xs = [x for x in xs if x is not None]
    if len({x.dtype.name for x in xs}) > 1:
        got = ", ".join(f"{x.dtype.name} {tuple(x.shape)}" for x in xs)
        raise n.error(f"inputs must share one dtype, got {got}", errors.DTypeError)
    if xs and _kind(xs[0]) not in _ALLOWED[kinds]:
        want = {"float": "a floating-point", "int": "an integer", "bool": "a bool",
                "num": "a numeric"}[kinds]
        raise n.error(f"takes {want} dtype, got {xs[0].dtype.name} {tuple(xs[0].shape)}",
                      errors.DTypeError)


def _on_cpu_half(x):
    return x is not None and hasattr(x, "dtype") and x.dtype.name in _HALF \
        and x.device.kind == "cpu"


def _via_float32(fn):
    """_util.via_float32 (float16/bfloat16 on the CPU computed in float32), after checking
    the dtypes: the float32 copies would otherwise hide a float16 + float32 mix."""
    converted = via_float32(fn)

    @functools.wraps(fn)
    def handler(n, *xs):
        if any(_on_cpu_half(x) for x in xs):
            _expect(n, "any", *xs)
        return converted(n, *xs)
    return handler


def _scalar_like(value, x):
    """A 0-d tensor holding ``value`` in x's dtype, on x's device (not _util.const, whose
    np.ascontiguousarray turns a 0-d array into shape (1,))."""
    return _tensor(np.array(value, dtype=x.dtype.np), device=x.device)


# ---- binary arithmetic ------------------------------------------------------------------

def _binary(op_type, fn, kinds="num"):
    @onnx_op(op_type)
    @_via_float32
    def handler(n, a, b):
        _expect(n, kinds, a, b)
        return fn(a, b)
    handler.__name__ = op_type.lower()
    return handler


_binary("Add", F.add)
_binary("Sub", F.sub)
_binary("Mul", F.mul)


@onnx_op("Div")
@_via_float32
def div(n, a, b):
    _expect(n, "num", a, b)
    if not a.dtype.is_integer:
        return F.div(a, b)
    # ONNX integer division truncates toward zero; hl's floor_divide rounds down. They
    # differ where the division is inexact and the signs differ. Integer arithmetic
    # throughout keeps int64 exact (a float64 detour would not be past 2**53).
    q = F.floor_divide(a, b)
    if a.dtype.name == "uint8":
        return q
    inexact = F.ne(F.sub(a, F.mul(q, b)), 0)
    signs_differ = F.ne(F.lt(a, 0), F.lt(b, 0))
    return F.add(q, F.cast(F.logical_and(inexact, signs_differ), a.dtype.name))


@onnx_op("Mod")
@_via_float32
def mod(n, a, b):
    _expect(n, "num", a, b)
    fmod = n.attr("fmod", 0)
    if fmod not in (0, 1):
        raise n.error(f"fmod must be 0 or 1, got {fmod}", errors.ValueError)
    # fmod=1: C's fmod, the sign of the dividend; fmod=0: the sign of the divisor.
    return F.fmod(a, b) if fmod else F.mod(a, b)


_SMALL_POWERS = {1.0: lambda x: F.mul(x, 1.0), 2.0: lambda x: F.mul(x, x),
                 3.0: lambda x: F.mul(F.mul(x, x), x), 0.5: F.sqrt}


@onnx_op("Pow")
def pow_(n, a, b):
    _expect(n, "num", a)
    _expect(n, "num", b)
    out = a.dtype.name  # ONNX: the output has the base's dtype, whatever the exponent's
    if a.dtype.is_floating and b.size == 1 and not b.requires_grad and not _on_cpu_half(a):
        # x ** 2, x ** 3 (GELU's tanh form), x ** 0.5: products are several times faster
        # than the general power, and a constant exponent needs no gradient
        e = float(n.scalar(b))
        if e in _SMALL_POWERS and b.ndim <= a.ndim:
            return _SMALL_POWERS[e](a)
    if a.dtype.is_floating:
        ft = "float32" if _on_cpu_half(a) else out  # see _via_float32
        y = F.pow(F.cast(a, ft) if ft != out else a, F.cast(b, ft) if b.dtype.name != ft else b)
        return y if ft == out else F.cast(y, out)
    if b.dtype.is_floating:  # integer base, float exponent: compute in float64, truncate
        return F.cast(F.pow(F.cast(a, "float64"), F.cast(b, "float64")), out)
    # Integer base and exponent: int64 arithmetic, wrapped into the base's dtype.
    return F.cast(F.pow(F.cast(a, "int64"), F.cast(b, "int64")), out)


# ---- variadic: Sum, Mean, Max, Min --------------------------------------------------------

def _variadic(op_type, fn, kinds, mean=False):
    @onnx_op(op_type)
    @_via_float32
    def handler(n, *xs):
        if not xs or any(x is None for x in xs):
            raise n.error(f"takes one or more inputs, got {len(xs)}", errors.ValueError)
        _expect(n, kinds, *xs)
        y = functools.reduce(fn, xs)
        if mean:
            y = F.div(y, float(len(xs)))
        return y
    handler.__name__ = op_type.lower()
    return handler


_variadic("Sum", F.add, "float")
_variadic("Mean", F.add, "float", mean=True)
_variadic("Max", F.maximum, "num")  # NaN wins, as in ONNX's reference (numpy.maximum)
_variadic("Min", F.minimum, "num")


# ---- comparisons and logic ----------------------------------------------------------------

_binary("Equal", F.eq, "any")
_binary("Greater", F.gt)
_binary("Less", F.lt)
_binary("GreaterOrEqual", F.ge)
_binary("LessOrEqual", F.le)
_binary("And", F.logical_and, "bool")
_binary("Or", F.logical_or, "bool")
_binary("Xor", F.logical_xor, "bool")


@onnx_op("Not")
def not_(n, x):
    _expect(n, "bool", x)
    return F.logical_not(x)


@onnx_op("Where")
def where(n, cond, a, b):
    _expect(n, "bool", cond)
    _expect(n, "any", a, b)
    return F.where(cond, a, b)


@onnx_op("IsNaN")
@_via_float32
def isnan(n, x):
    _expect(n, "float", x)
    return F.isnan(x)


@onnx_op("IsInf")
@_via_float32
def isinf(n, x):
    _expect(n, "float", x)
    pos, neg = n.attr("detect_positive", 1), n.attr("detect_negative", 1)
    y = F.isinf(x)
    if pos and neg:
        return y
    if not pos and not neg:
        return F.logical_and(y, F.ne(x, x))  # all False, with x's shape
    return F.logical_and(y, F.gt(x, 0) if pos else F.lt(x, 0))


# ---- bitwise (integers) -------------------------------------------------------------------
# hl's core has bitwise ops for bool only, so the integer ones work a byte at a time: floor
# division and floor modulo by powers of 256 read the bytes of the two's-complement form
# (negative numbers included), a 256 x 256 table gives the op's result for each pair of
# bytes, and the weighted sum of the result bytes, wrapping as integer arithmetic does,
# is the answer in the operands' dtype.

_BITS = {"uint8": 8, "int32": 32, "int64": 64}
_TABLES = {"BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
           "BitwiseXor": np.bitwise_xor}


def _bytewise(op_type, a, b):
    byte = np.arange(256, dtype=np.int64)
    table = _tensor(_TABLES[op_type].outer(byte, byte).reshape(-1).astype(a.dtype.np),
                    device=a.device)
    if a.dtype.name == "uint8":  # one byte: its values index the table directly
        return F.take(table, F.add(F.mul(F.cast(a, "int64"), 256), F.cast(b, "int64")))
    out = None
    for k in range(_BITS[a.dtype.name] // 8):
        weight = _scalar_like(256 ** k, a)
        byte_a, byte_b = (F.cast(F.mod(F.floor_divide(t, weight), 256), "int64")
                          for t in (a, b))
        r = F.take(table, F.add(F.mul(byte_a, 256), byte_b))  # the pair's row-major index
        out = r if out is None else F.add(out, F.mul(r, weight))
    return out


def _bitwise(op_type):
    @onnx_op(op_type)
    def handler(n, a, b):
        _expect(n, "int", a, b)
        return _bytewise(op_type, a, b)
    handler.__name__ = op_type.lower()
    return handler


for _op in _TABLES:
    _bitwise(_op)


@onnx_op("BitwiseNot")
def bitwise_not(n, x):
    _expect(n, "int", x)
    if x.dtype.name == "uint8":
        return F.sub(_scalar_like(255, x), x)
    return F.sub(F.neg(x), _scalar_like(1, x))  # two's complement: ~x == -x - 1


@onnx_op("BitShift")
def bit_shift(n, x, y):
    _expect(n, "int", x, y)
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise n.error(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}",
                      errors.ValueError)
    bits = _BITS[x.dtype.name]
    # Shifts below 0 or of the full width or more give only the sign fill (ONNX 28).
    outside = F.logical_or(F.lt(y, 0), F.ge(y, bits))
    s = F.cast(F.where(outside, _scalar_like(0, y), y), "int64")
    # 2**s from a table, wrapped into x's dtype (2**(bits-1) is the sign bit's pattern).
    powers = const(np.array([2 ** k for k in range(bits)], dtype=np.uint64)
                   .astype(x.dtype.np), like=x)
    if direction == "LEFT":
        shifted = F.mul(x, F.take(powers, s))  # wraps: bits past the top are dropped
        fill = _scalar_like(0, x)
    else:
        # An arithmetic right shift is floor division by 2**s, done in two halves so that
        # no divisor reaches the sign bit's weight.
        half = F.floor_divide(s, 2)
        shifted = F.floor_divide(F.floor_divide(x, F.take(powers, half)),
                                 F.take(powers, F.sub(s, half)))
        fill = _scalar_like(0, x) if x.dtype.name == "uint8" else \
            F.where(F.lt(x, 0), _scalar_like(-1, x), _scalar_like(0, x))
    return F.where(outside, fill, shifted)


# ---- unary math ---------------------------------------------------------------------------

def _unary(op_type, fn, kinds="float"):
    @onnx_op(op_type)
    @_via_float32
    def handler(n, x):
        _expect(n, kinds, x)
        return fn(x)
    handler.__name__ = op_type.lower()
    return handler


for _op, _fn in {"Ceil": F.ceil, "Floor": F.floor, "Round": F.round,  # half to even
                 "Reciprocal": F.reciprocal, "Sqrt": F.sqrt, "Exp": F.exp, "Log": F.log,
                 "Sin": F.sin, "Cos": F.cos, "Tan": F.tan, "Asin": F.asin, "Acos": F.acos,
                 "Atan": F.atan, "Sinh": F.sinh, "Cosh": F.cosh, "Tanh": F.tanh,
                 "Asinh": F.asinh, "Acosh": F.acosh, "Atanh": F.atanh, "Sigmoid": F.sigmoid,
                 "Softplus": F.softplus, "Softsign": F.softsign,
                 "Mish": F.mish, "HardSwish": F.hard_swish}.items():
    _unary(_op, _fn)
_unary("Abs", F.abs, "num")
_unary("Sign", F.sign, "num")
_unary("Neg", F.neg, "num")


@onnx_op("Relu")
@_via_float32
def relu(n, x):
    _expect(n, "num", x)  # integers since opset 14
    if x.dtype.is_integer:  # F.relu would answer in float32
        return F.maximum(x, _scalar_like(0, x))
    return F.relu(x)


@onnx_op("Erf")
@_via_float32
def erf(n, x):
    _expect(n, "num", x)
    if x.dtype.is_integer:  # ONNX allows integers: erf in float64, truncated back
        return F.cast(F.erf(F.cast(x, "float64")), x.dtype.name)
    return F.erf(x)


# ---- activations with attributes ----------------------------------------------------------

@onnx_op("LeakyRelu")
@_via_float32
def leaky_relu(n, x):
    _expect(n, "float", x)
    return F.leaky_relu(x, n.attr("alpha", 0.01))


@onnx_op("PRelu")
@_via_float32
def prelu(n, x, slope):
    _expect(n, "num", x, slope)
    xs, ss = tuple(x.shape), tuple(slope.shape)
    if n.opset < 7 and len(ss) == 1 and x.ndim > 1 and ss[0] == xs[1] and ss[0] != 1:
        # Before opset 7 a 1-D slope held one value per channel (axis 1).
        slope = F.reshape(slope, ss[0], *([1] * (x.ndim - 2)))
        ss = tuple(slope.shape)
    # Unidirectional broadcasting: the slope stretches to x's shape, never x to the slope's.
    try:
        fits = np.broadcast_shapes(xs, ss) == xs
    except ValueError:
        fits = False
    if not fits:
        raise n.error(f"slope of shape {ss} does not broadcast to the input's shape {xs} "
                      f"(for one slope per channel of an NCHW input, give it shape "
                      f"({xs[1] if len(xs) > 1 else 'C'}, 1, 1))", errors.ShapeError)
    return F.where(F.lt(x, 0), F.mul(x, slope), x)


@onnx_op("Elu")
@_via_float32
def elu(n, x):
    _expect(n, "float", x)
    return F.elu(x, n.attr("alpha", 1.0))


@onnx_op("Selu")
@_via_float32
def selu(n, x):
    _expect(n, "float", x)
    # ONNX's defaults are these float32 values, not the float64 constants.
    return F.selu(x, n.attr("alpha", 1.67326319217681884765625),
                  n.attr("gamma", 1.05070102214813232421875))


@onnx_op("Celu")
@_via_float32
def celu(n, x):
    _expect(n, "float", x)
    alpha = n.attr("alpha", 1.0)
    if alpha == 0:
        raise n.error("alpha must not be 0", errors.ValueError)
    return F.celu(x, alpha)


@onnx_op("ThresholdedRelu")
@_via_float32
def thresholded_relu(n, x):
    _expect(n, "float", x)
    return F.where(F.gt(x, n.attr("alpha", 1.0)), x, _scalar_like(0, x))


@onnx_op("HardSigmoid")
@_via_float32
def hard_sigmoid(n, x):
    _expect(n, "float", x)
    return F.hard_sigmoid(x, n.attr("alpha", 0.2), n.attr("beta", 0.5))


@onnx_op("Gelu")
@_via_float32
def gelu(n, x):
    _expect(n, "float", x)
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise n.error(f"approximate must be 'none' or 'tanh', got {approximate!r}",
                      errors.ValueError)
    return F.gelu(x, approximate)


@onnx_op("Swish")
@_via_float32
def swish(n, x):
    _expect(n, "float", x)
    alpha = n.attr("alpha", 1.0)
    return F.mul(x, F.sigmoid(x if alpha == 1.0 else F.mul(x, alpha)))


@onnx_op("Shrink")
@_via_float32
def shrink(n, x):
    _expect(n, "num", x)
    lambd, bias = n.attr("lambd", 0.5), n.attr("bias", 0.0)
    low, high = F.lt(x, -lambd), F.gt(x, lambd)
    if x.dtype.is_integer:  # the float bias is applied in float64, then truncated back
        f = F.cast(x, "float64")
        y = F.where(low, F.add(f, bias), F.where(high, F.sub(f, bias), _scalar_like(0, f)))
        return F.cast(y, x.dtype.name)
    return F.where(low, F.add(x, bias), F.where(high, F.sub(x, bias), _scalar_like(0, x)))


@onnx_op("Clip")
@_via_float32
def clip(n, x, lo=None, hi=None):
    _expect(n, "num", x, lo, hi)
    if n.opset < 11:  # bounds were attributes
        lo, hi = n.attr("min"), n.attr("max")
    else:
        lo, hi = (_bound(n, b, what) for b, what in ((lo, "min"), (hi, "max")))
    if lo is None and hi is None:
        return x
    # F.clamp: where min > max every value becomes max, as ONNX says. Tensor bounds get no
    # gradient: they are hyperparameters (ReLU6's 0 and 6), not weights to train.
    return F.clamp(x, lo, hi)


def _bound(n, b, what):
    if b is None:
        return None
    if b.size != 1:
        raise n.error(f"{what} must be a scalar, got shape {tuple(b.shape)}", errors.ShapeError)
    # A number, read on the host: the bounds get no gradient, and clamping by numbers is one
    # pass over x where tensor bounds take two broadcast ones (ReLU6: 22 -> ~8 ms per
    # MobileNetV2 batch of 8)
    return n.scalar(b)


# ---- Det -----------------------------------------------------------------------------------

@onnx_op("Det")
@_via_float32
def det(n, a):
    _expect(n, "float", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise n.error(f"takes square matrices (..., M, M), got shape {tuple(a.shape)}",
                      errors.ShapeError)
    # hl's core has no LU factorization: Gaussian elimination with partial pivoting, one
    # column at a time over the whole batch, from tensor ops so that gradients flow.
    m = a.shape[-1]
    rows = F.arange(m, device=a.device)
    det = F.broadcast_to(_scalar_like(1, a), *a.shape[:-2])
    every = slice(None)
    for k in range(m):
        # The pivot: the largest |value| in column k on or below the diagonal.
        col = F.getitem(a, (Ellipsis, every, k))
        p = F.argmax(F.where(F.ge(rows, k), F.abs(col), _scalar_like(-1, a)), axis=-1)
        # Swap rows k and p as a rank-one update (a no-op where p == k): the difference
        # of their one-hot vectors times the difference of the rows.
        e_p = F.one_hot(p, m, dtype=a.dtype)
        e_k = _tensor(np.eye(m, dtype=a.dtype.np)[k], device=a.device)
        row_p = F.squeeze(F.matmul(F.unsqueeze(e_p, -2), a), -2)
        row_k = F.getitem(a, (Ellipsis, k, every))
        a = F.add(a, F.mul(F.unsqueeze(F.sub(e_k, e_p), -1),
                           F.unsqueeze(F.sub(row_p, row_k), -2)))
        det = F.mul(det, F.where(F.eq(p, k), _scalar_like(1, a), _scalar_like(-1, a)))
        pivot = F.getitem(a, (Ellipsis, k, k))
        det = F.mul(det, pivot)
        # Eliminate below the pivot. A zero pivot has only zeros below it (it is the
        # largest): the determinant is already 0, and dividing by 1 keeps NaNs out.
        safe = F.where(F.eq(pivot, 0), _scalar_like(1, a), pivot)
        col = F.getitem(a, (Ellipsis, every, k))
        factors = F.where(F.gt(rows, k), F.div(col, F.unsqueeze(safe, -1)), _scalar_like(0, a))
        row_k = F.getitem(a, (Ellipsis, k, every))
        a = F.sub(a, F.mul(F.unsqueeze(factors, -1), F.unsqueeze(row_k, -2)))
    return det


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
    work = "float32" if ft in _HALF else ft
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

