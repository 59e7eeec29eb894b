"""Binary arithmetic, variadic Sum/Mean/Max/Min, comparisons, logic and bitwise ops: import
handlers and the export rules of hl's binary Functions.
"""

import functools

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ..._tensor import tensor as _tensor
from ...autograd.binary import (Add, Compare, Div, Fmod, Maximum, Minimum, Mod, Mul, Pow,
                                Sub, Where)
from ..registry import exports, onnx_op
from ._checks import checked_via_float32, expect, on_cpu_half, scalar_like
from ._util import const, F


# ---- binary arithmetic ------------------------------------------------------------------

def _binary(op_type, fn, kinds="num"):
    @onnx_op(op_type)
    @checked_via_float32
    def handler(n, a, b):
        expect(n, kinds, a, b)
        return fn(a, b)
    handler.__name__ = op_type.lower()
    return handler


_binary("Add", F.add)
_binary("Sub", F.sub)
_binary("Mul", F.mul)


@onnx_op("Div")
@checked_via_float32
def div(n, a, b):
    expect(n, "num", a, b)
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
@checked_via_float32
def mod(n, a, b):
    expect(n, "num", a, b)
    fmod = n.attr("fmod", 0)
    if fmod not in (0, 1):
        raise n.error(f"fmod must be 0 or 1, got {fmod}", errors.ValueError)
    # fmod=1: C's fmod, the sign of the dividend; fmod=0: the sign of the divisor.
    return F.fmod(a, b) if fmod else F.mod(a, b)


_SMALL_POWERS = {1.0: lambda x: F.mul(x, 1.0), 2.0: lambda x: F.mul(x, x),
                 3.0: lambda x: F.mul(F.mul(x, x), x), 0.5: F.sqrt}


@onnx_op("Pow")
def pow_(n, a, b):
    expect(n, "num", a)
    expect(n, "num", b)
    out = a.dtype.name  # ONNX: the output has the base's dtype, whatever the exponent's
    if a.dtype.is_floating and b.size == 1 and not b.requires_grad and not on_cpu_half(a):
        # x ** 2, x ** 3 (GELU's tanh form), x ** 0.5: products are several times faster
        # than the general power, and a constant exponent needs no gradient
        e = float(n.scalar(b))
        if e in _SMALL_POWERS and b.ndim <= a.ndim:
            return _SMALL_POWERS[e](a)
    if a.dtype.is_floating:
        ft = "float32" if on_cpu_half(a) else out  # see checked_via_float32
        y = F.pow(F.cast(a, ft) if ft != out else a, F.cast(b, ft) if b.dtype.name != ft else b)
        return y if ft == out else F.cast(y, out)
    if b.dtype.is_floating:  # integer base, float exponent: compute in float64, truncate
        return F.cast(F.pow(F.cast(a, "float64"), F.cast(b, "float64")), out)
    # Integer base and exponent: int64 arithmetic, wrapped into the base's dtype.
    return F.cast(F.pow(F.cast(a, "int64"), F.cast(b, "int64")), out)


# ---- variadic: Sum, Mean, Max, Min --------------------------------------------------------

def _variadic(op_type, fn, kinds, mean=False):
    @onnx_op(op_type)
    @checked_via_float32
    def handler(n, *xs):
        if not xs or any(x is None for x in xs):
            raise n.error(f"takes one or more inputs, got {len(xs)}", errors.ValueError)
        expect(n, kinds, *xs)
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
    expect(n, "bool", x)
    return F.logical_not(x)


@onnx_op("Where")
def where(n, cond, a, b):
    expect(n, "bool", cond)
    expect(n, "any", a, b)
    return F.where(cond, a, b)


@onnx_op("IsNaN")
@checked_via_float32
def isnan(n, x):
    expect(n, "float", x)
    return F.isnan(x)


@onnx_op("IsInf")
@checked_via_float32
def isinf(n, x):
    expect(n, "float", x)
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
        weight = scalar_like(256 ** k, a)
        byte_a, byte_b = (F.cast(F.mod(F.floor_divide(t, weight), 256), "int64")
                          for t in (a, b))
        r = F.take(table, F.add(F.mul(byte_a, 256), byte_b))  # the pair's row-major index
        out = r if out is None else F.add(out, F.mul(r, weight))
    return out


def _bitwise(op_type):
    @onnx_op(op_type)
    def handler(n, a, b):
        expect(n, "int", a, b)
        return _bytewise(op_type, a, b)
    handler.__name__ = op_type.lower()
    return handler


for _op in _TABLES:
    _bitwise(_op)


@onnx_op("BitwiseNot")
def bitwise_not(n, x):
    expect(n, "int", x)
    if x.dtype.name == "uint8":
        return F.sub(scalar_like(255, x), x)
    return F.sub(F.neg(x), scalar_like(1, x))  # two's complement: ~x == -x - 1


@onnx_op("BitShift")
def bit_shift(n, x, y):
    expect(n, "int", x, y)
    direction = n.attr("direction")
    if direction not in ("LEFT", "RIGHT"):
        raise n.error(f"direction must be 'LEFT' or 'RIGHT', got {direction!r}",
                      errors.ValueError)
    bits = _BITS[x.dtype.name]
    # Shifts below 0 or of the full width or more give only the sign fill (ONNX 28).
    outside = F.logical_or(F.lt(y, 0), F.ge(y, bits))
    s = F.cast(F.where(outside, scalar_like(0, y), y), "int64")
    # 2**s from a table, wrapped into x's dtype (2**(bits-1) is the sign bit's pattern).
    powers = const(np.array([2 ** k for k in range(bits)], dtype=np.uint64)
                   .astype(x.dtype.np), like=x)
    if direction == "LEFT":
        shifted = F.mul(x, F.take(powers, s))  # wraps: bits past the top are dropped
        fill = scalar_like(0, x)
    else:
        # An arithmetic right shift is floor division by 2**s, done in two halves so that
        # no divisor reaches the sign bit's weight.
        half = F.floor_divide(s, 2)
        shifted = F.floor_divide(F.floor_divide(x, F.take(powers, half)),
                                 F.take(powers, F.sub(s, half)))
        fill = scalar_like(0, x) if x.dtype.name == "uint8" else \
            F.where(F.lt(x, 0), scalar_like(-1, x), scalar_like(0, x))
    return F.where(outside, fill, shifted)


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


BINARY = {Add: "Add", Sub: "Sub", Mul: "Mul", Div: "Div", Pow: "Pow", Maximum: "Max",
          Minimum: "Min"}


@exports(*BINARY)
def export_binary(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op(BINARY[type(f._fn)], [a.name, b.name], out=y.name)


@exports(Mod)
def export_mod(g, f, xs, ys):
    """numpy's mod: the sign of the divisor. ONNX Mod does that for integers; for floats only
    C's fmod exists, so the result is moved by b where its sign differs from b's."""
    (a, b), (y,) = xs, ys
    if not a.dtype.is_floating:
        return g.op("Mod", [a.name, b.name], out=y.name, fmod=0)
    r = g.op("Mod", [a.name, b.name], fmod=1)
    zero = g.scalar(0.0, a.dtype)
    nonzero = g.op("Not", [g.op("Equal", [r, zero])])
    differ = g.op("Xor", [g.op("Less", [r, zero]), g.op("Less", [b.name, zero])])
    fix = g.op("And", [nonzero, differ])
    g.op("Where", [fix, g.op("Add", [r, b.name]), r], out=y.name)


@exports(Fmod)
def export_fmod(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op("Mod", [a.name, b.name], out=y.name, fmod=1)


COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
           "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or",
           "logical_xor": "Xor"}


@exports(Compare)
def export_compare(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    op = f.op
    names = [a.name, b.name]
    if op.startswith("logical_"):  # ONNX's logic takes bools; hl's, any nonzero value
        names = [v.name if v.dtype is _dt.bool_ else g.cast(v.name, _dt.bool_) for v in xs]
    if op == "ne":
        return g.op("Not", [g.op("Equal", names)], out=y.name)
    g.op(COMPARE[op], names, out=y.name)


@exports(Where)
def export_where(g, f, xs, ys):
    (c, a, b), (y,) = xs, ys
    cond = c.name if c.dtype is _dt.bool_ else g.cast(c.name, _dt.bool_)
    g.op("Where", [cond, a.name, b.name], out=y.name)
