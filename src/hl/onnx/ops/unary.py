"""Unary math and activations (ONNX's element-wise operators of one input, Clip included):
import handlers and the export rule of hl's Unary and Clip Functions.

An operator whose ONNX name and hl name match is one entry of SAME (below), which gives both
its import handler and its export rule.
"""

import math

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ...autograd.binary import Clip
from ...autograd.elementwise import Unary
from ..registry import exports, onnx_op
from ._checks import checked_via_float32, expect, scalar_like
from ._util import F


# ---- the unary ops that map themselves -----------------------------------------------------

# ONNX operator -> hl op, for the unary ops that are one function in both: each entry is the
# op's import handler (F.<op> after checking the dtypes ONNX allows) and its export rule (the
# ONNX operator of the same name; export_unary below). A new op of this kind is one entry.
SAME = {
    "Abs": "abs", "Acos": "acos", "Acosh": "acosh", "Asin": "asin", "Asinh": "asinh",
    "Atan": "atan", "Atanh": "atanh", "Ceil": "ceil", "Cos": "cos", "Cosh": "cosh",
    "Erf": "erf", "Exp": "exp", "Floor": "floor", "Log": "log", "Neg": "neg",
    "Reciprocal": "reciprocal", "Relu": "relu", "Round": "round",  # Round: half to even
    "Sigmoid": "sigmoid", "Sign": "sign", "Sin": "sin", "Sinh": "sinh", "Softplus": "softplus",
    "Softsign": "softsign", "Sqrt": "sqrt", "Tan": "tan", "Tanh": "tanh",
}
TAKE_INTEGERS = ("Abs", "Neg", "Sign")  # ONNX allows integer inputs (and so does hl)
OWN_IMPORT = ("Relu", "Erf")  # integer inputs need more than F.<op>: handlers below


def _unary(op_type, fn, kinds="float"):
    @onnx_op(op_type)
    @checked_via_float32
    def handler(n, x):
        expect(n, kinds, x)
        return fn(x)
    handler.__name__ = op_type.lower()
    return handler


for _onnx_name, _hl_name in SAME.items():
    if _onnx_name not in OWN_IMPORT:
        _unary(_onnx_name, getattr(F, _hl_name), "num" if _onnx_name in TAKE_INTEGERS else "float")
# newer than opset 13, so exported through their definitions (export_unary)
_unary("Mish", F.mish)
_unary("HardSwish", F.hard_swish)


@onnx_op("Relu")
@checked_via_float32
def relu(n, x):
    expect(n, "num", x)  # integers since opset 14
    if x.dtype.is_integer:  # F.relu would answer in float32
        return F.maximum(x, scalar_like(0, x))
    return F.relu(x)


@onnx_op("Erf")
@checked_via_float32
def erf(n, x):
    expect(n, "num", x)
    if x.dtype.is_integer:  # ONNX allows integers: erf in float64, truncated back
        return F.cast(F.erf(F.cast(x, "float64")), x.dtype.name)
    return F.erf(x)


# ---- activations with attributes ----------------------------------------------------------

# ONNX activation -> (hl op, ONNX's attributes and their defaults, in the order the hl op takes
# them as its alpha and beta). Each entry is the op's import handler, F.<op>(x, *attributes),
# and its export rule (export_unary).
WITH_ATTRIBUTES = {
    "LeakyRelu": ("leaky_relu", (("alpha", 0.01),)),
    "Elu": ("elu", (("alpha", 1.0),)),
    "Celu": ("celu", (("alpha", 1.0),)),
    # ONNX's defaults are these float32 values, not the float64 constants
    "Selu": ("selu", (("alpha", 1.67326319217681884765625), ("gamma", 1.05070102214813232421875))),
    "HardSigmoid": ("hard_sigmoid", (("alpha", 0.2), ("beta", 0.5))),
}


def _with_attributes(op_type, fn, attrs):
    @onnx_op(op_type)
    @checked_via_float32
    def handler(n, x):
        expect(n, "float", x)
        return fn(x, *[n.attr(name, default) for name, default in attrs])
    handler.__name__ = op_type.lower()
    return handler


for _onnx_name, (_hl_name, _attrs) in WITH_ATTRIBUTES.items():
    if _onnx_name != "Celu":  # its own handler below refuses alpha 0
        _with_attributes(_onnx_name, getattr(F, _hl_name), _attrs)



@onnx_op("PRelu")
@checked_via_float32
def prelu(n, x, slope):
    expect(n, "num", x, slope)
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


@onnx_op("Celu")
@checked_via_float32
def celu(n, x):
    expect(n, "float", x)
    alpha = n.attr("alpha", 1.0)
    if alpha == 0:
        raise n.error("alpha must not be 0", errors.ValueError)
    return F.celu(x, alpha)


@onnx_op("ThresholdedRelu")
@checked_via_float32
def thresholded_relu(n, x):
    expect(n, "float", x)
    return F.where(F.gt(x, n.attr("alpha", 1.0)), x, scalar_like(0, x))


@onnx_op("Gelu")
@checked_via_float32
def gelu(n, x):
    expect(n, "float", x)
    approximate = n.attr("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise n.error(f"approximate must be 'none' or 'tanh', got {approximate!r}",
                      errors.ValueError)
    return F.gelu(x, approximate)


@onnx_op("Swish")
@checked_via_float32
def swish(n, x):
    expect(n, "float", x)
    alpha = n.attr("alpha", 1.0)
    return F.mul(x, F.sigmoid(x if alpha == 1.0 else F.mul(x, alpha)))


@onnx_op("Shrink")
@checked_via_float32
def shrink(n, x):
    expect(n, "num", x)
    lambd, bias = n.attr("lambd", 0.5), n.attr("bias", 0.0)
    low, high = F.lt(x, -lambd), F.gt(x, lambd)
    if x.dtype.is_integer:  # the float bias is applied in float64, then truncated back
        f = F.cast(x, "float64")
        y = F.where(low, F.add(f, bias), F.where(high, F.sub(f, bias), scalar_like(0, f)))
        return F.cast(y, x.dtype.name)
    return F.where(low, F.add(x, bias), F.where(high, F.sub(x, bias), scalar_like(0, x)))


@onnx_op("Clip")
@checked_via_float32
def clip(n, x, lo=None, hi=None):
    expect(n, "num", x, lo, hi)
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


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- element-wise ------------------------------------------------------------------------

SAME_NAME = {hl_name: onnx_name for onnx_name, hl_name in SAME.items()}
ATTRIBUTES_OF = {hl_name: (onnx_name, attrs)
                 for onnx_name, (hl_name, attrs) in WITH_ATTRIBUTES.items()}
KEEP_INTEGERS = ("neg", "abs", "square", "sign")       # integer in, integer out
ROUNDING = ("floor", "ceil", "round", "trunc")          # integers pass through unchanged


@exports(Unary)
def export_unary(g, f, xs, ys):
    (x,), (y,) = xs, ys
    op = f.op
    src, dtype = x.name, x.dtype
    if not x.dtype.is_floating:
        if op in ROUNDING:
            y.dtype = x.dtype
            return g.op("Identity", [x.name], out=y.name)
        if op in KEEP_INTEGERS:
            y.dtype = x.dtype  # hl keeps the integer dtype (its shape inference says float32)
        else:
            src, dtype = g.cast(x.name, _dt.float32), _dt.float32
    one = (lambda: g.scalar(1.0, dtype))
    a, b = float(f.alpha), float(f.beta)
    if op in SAME_NAME:
        return g.op(SAME_NAME[op], [src], out=y.name)
    if op == "square":
        return g.op("Mul", [src, src], out=y.name)
    if op == "expm1":
        return g.op("Sub", [g.op("Exp", [src]), one()], out=y.name)
    if op == "log1p":
        return g.op("Log", [g.op("Add", [src, one()])], out=y.name)
    if op == "rsqrt":
        return g.op("Reciprocal", [g.op("Sqrt", [src])], out=y.name)
    if op == "trunc":  # no ONNX Trunc: ceil below zero, floor above
        neg = g.op("Less", [src, g.scalar(0.0, dtype)])
        return g.op("Where", [neg, g.op("Ceil", [src]), g.op("Floor", [src])], out=y.name)
    if op in ATTRIBUTES_OF:
        onnx_name, attrs = ATTRIBUTES_OF[op]
        return g.op(onnx_name, [src], out=y.name,
                    **{name: v for (name, _), v in zip(attrs, (a, b))})
    if op == "hard_swish":
        if g.opset >= 14:
            return g.op("HardSwish", [src], out=y.name)
        hs = g.op("HardSigmoid", [src], alpha=1.0 / 6.0, beta=0.5)
        return g.op("Mul", [src, hs], out=y.name)
    if op == "mish":
        if g.opset >= 18:
            return g.op("Mish", [src], out=y.name)
        return g.op("Mul", [src, g.op("Tanh", [g.op("Softplus", [src])])], out=y.name)
    if op in ("gelu", "gelu_tanh"):
        tanh = op == "gelu_tanh"
        if g.opset >= 20:
            return g.op("Gelu", [src], out=y.name, approximate="tanh" if tanh else "none")
        half_x = g.op("Mul", [src, g.scalar(0.5, dtype)])
        if tanh:  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            cube = g.op("Mul", [g.op("Mul", [src, src]), src])
            inner = g.op("Add", [src, g.op("Mul", [cube, g.scalar(0.044715, dtype)])])
            t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi), dtype)])])
        else:  # 0.5 x (1 + erf(x / sqrt(2)))
            t = g.op("Erf", [g.op("Mul", [src, g.scalar(1 / math.sqrt(2), dtype)])])
        return g.op("Mul", [half_x, g.op("Add", [t, one()])], out=y.name)
    raise g.error(f"unary op {op!r} has no ONNX form in hl's exporter")


@exports(Clip)
def export_clip(g, f, xs, ys):
    (x,), (y,) = xs, ys
    if f.lo is None and f.hi is None:
        return g.op("Identity", [x.name], out=y.name)
    bound = (lambda v: None if v is None else g.scalar(v, x.dtype))
    g.op("Clip", [x.name, bound(f.lo), bound(f.hi)], out=y.name)
