"""The element-wise OpCases: every unary and binary kernel of libcore/src/ops.h (the predicate
rows, whose results are bool, keep their own tests in tests/ops/test_elementwise.py).

References are numpy in float64; input ranges stay inside each function's domain; kinks are
where a derivative jumps (the gradient check keeps 0.05 away from them).
"""
import math

import numpy as np

import hl

from .case import Onnx, OpCase


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def _softplus(x):
    return np.logaddexp(0.0, x)


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return np.where(x >= 0, 1 / (1 + np.exp(-x)), np.exp(x) / (1 + np.exp(x)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


SELU_A, SELU_G = 1.6732632423543772, 1.0507009873554805


def unary(name, reference, low, high, kind, onnx=None, call=None, **kw):
    return OpCase(name, call or getattr(hl, name), reference, low, high, kind=kind,
                  onnx=Onnx(onnx) if isinstance(onnx, str) else onnx, **kw)


def libm(name, reference, low, high, onnx=None, **kw):
    """A libm function: numpy's answers on 0, -0, +-inf and nan are the law."""
    return unary(name, reference, low, high, "libm", onnx, numpy_defined=True, **kw)


ROUNDING = dict(numpy_defined=True, grad_range=(0.1, 0.4))  # derivative 0 between the jumps

UNARY = [
    libm("exp", np.exp, -20, 20, "Exp"),
    libm("log", np.log, 1e-3, 1e3, "Log"),
    unary("sqrt", np.sqrt, 0, 100, "exact", "Sqrt", numpy_defined=True, grad_range=(0.5, 4)),
    unary("rsqrt", lambda x: 1 / np.sqrt(x), 1e-3, 100, "libm"),
    unary("reciprocal", lambda x: 1 / x, 0.1, 10, "exact", "Reciprocal", numpy_defined=True),
    libm("sin", np.sin, -6, 6, "Sin"),
    libm("cos", np.cos, -6, 6, "Cos"),
    libm("tan", np.tan, -1.4, 1.4, "Tan"),
    libm("asin", np.arcsin, -0.999, 0.999, "Asin", grad_range=(-0.95, 0.95)),
    libm("acos", np.arccos, -0.999, 0.999, "Acos", grad_range=(-0.95, 0.95)),
    libm("atan", np.arctan, -20, 20, "Atan"),
    libm("sinh", np.sinh, -8, 8, "Sinh"),
    libm("cosh", np.cosh, -8, 8, "Cosh"),
    libm("tanh", np.tanh, -8, 8, "Tanh"),
    libm("asinh", np.arcsinh, -20, 20, "Asinh"),
    libm("acosh", np.arccosh, 1.001, 20, "Acosh", grad_range=(1.05, 4)),
    libm("atanh", np.arctanh, -0.999, 0.999, "Atanh", grad_range=(-0.95, 0.95)),
    libm("erf", _erf, -4, 4, "Erf"),
    libm("expm1", np.expm1, -5, 5),
    libm("log1p", np.log1p, -0.999, 20, grad_range=(-0.9, 4)),
    unary("sigmoid", _sigmoid, -30, 30, "composite", "Sigmoid"),
    unary("relu", lambda x: np.where(x > 0, x, np.where(np.isnan(x), x, 0.0)), -5, 5, "exact",
          "Relu", kinks=(0,)),
    unary("leaky_relu", lambda x: np.where(x >= 0, x, 0.2 * x), -5, 5, "exact",
          Onnx("LeakyRelu", {"alpha": 0.2}), call=lambda t: hl.leaky_relu(t, 0.2), kinks=(0,)),
    unary("elu", lambda x: np.where(x > 0, x, 0.7 * np.expm1(x)), -5, 5, "composite",
          Onnx("Elu", {"alpha": 0.7}), call=lambda t: hl.elu(t, 0.7), kinks=(0,)),
    unary("celu", lambda x: np.where(x > 0, x, 1.5 * np.expm1(x / 1.5)), -5, 5, "composite",
          Onnx("Celu", {"alpha": 1.5}), call=lambda t: hl.celu(t, 1.5), kinks=(0,)),
    unary("selu", lambda x: SELU_G * np.where(x > 0, x, SELU_A * np.expm1(x)), -5, 5,
          "composite", "Selu", kinks=(0,)),
    unary("gelu", lambda x: 0.5 * x * (1 + _erf(x / math.sqrt(2))), -6, 6, "composite",
          Onnx("Gelu", opset=20)),
    unary("gelu_tanh", _gelu_tanh, -6, 6, "composite",
          Onnx("Gelu", {"approximate": "tanh"}, opset=20),
          call=lambda t: hl.gelu(t, approximate="tanh")),
    unary("softplus", _softplus, -30, 30, "composite", "Softplus"),
    unary("softsign", lambda x: x / (1 + np.abs(x)), -10, 10, "composite", "Softsign"),
    unary("hard_sigmoid", lambda x: np.clip(0.3 * x + 0.4, 0, 1), -5, 5, "composite",
          Onnx("HardSigmoid", {"alpha": 0.3, "beta": 0.4}),
          call=lambda t: hl.hard_sigmoid(t, 0.3, 0.4), kinks=(-4 / 3, 2)),
    unary("hard_swish", lambda x: x * np.clip(x / 6 + 0.5, 0, 1), -5, 5, "composite",
          "HardSwish", kinks=(-3, 3)),
    unary("clip", lambda x: np.clip(x, -1.5, 2.0), -5, 5, "exact",
          Onnx("Clip", consts=(np.float32(-1.5), np.float32(2.0))),
          call=lambda t: hl.clip(t, -1.5, 2.0), kinks=(-1.5, 2.0)),
    unary("mish", lambda x: x * np.tanh(_softplus(x)), -10, 10, "composite", "Mish"),
    unary("floor", np.floor, -10, 10, "exact", "Floor", **ROUNDING),
    unary("ceil", np.ceil, -10, 10, "exact", "Ceil", **ROUNDING),
    unary("round", np.rint, -10, 10, "exact", "Round", **ROUNDING),
    unary("trunc", np.trunc, -10, 10, "exact", **ROUNDING),
    unary("neg", np.negative, -10, 10, "exact", "Neg", numpy_defined=True),
    unary("abs", np.abs, -10, 10, "exact", "Abs", numpy_defined=True, kinks=(0,)),
    unary("sign", np.sign, -3, 3, "exact", "Sign", numpy_defined=True, grad_range=(0.1, 3)),
    unary("square", np.square, -10, 10, "exact", numpy_defined=True),
]


def _positive_base(rng, dtype, shapes):
    a, b = (rng.uniform(-3, 3, size=s) for s in shapes)
    return np.abs(a) + 0.5, b


def _divisor_away_from_zero(rng, dtype, shapes):
    a, b = (rng.uniform(-3, 3, size=s) for s in shapes)
    return a, np.where(np.abs(b) < 0.3, 1.3, b)


def _quotient_away_from_integers(rng, dtype, shapes):
    # mod's and fmod's derivatives jump where a / b is an integer; keep 0.05 from there
    a, b = _divisor_away_from_zero(rng, dtype, shapes)
    q = a / b
    return np.where(np.abs(q - np.round(q)) < 0.05, a + 0.2 * b, a), b


def _no_ties(rng, dtype, shapes):
    # maximum/minimum split a tie's gradient; finite differences across a tie see a kink
    a, b = (rng.uniform(-3, 3, size=s) for s in shapes)
    return a, np.where(np.abs(a - b) < 0.05, b + 0.3, b)


BROADCAST = (((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3)))
_PAIRS = dict(arity=2, shapes=BROADCAST + (((0, 3), (3,)),), grad_shapes=BROADCAST,
              special=False)


def binary(name, reference, kind, onnx, call=None, **kw):
    return OpCase(name, call or getattr(hl, name), reference, -3, 3, kind=kind,
                  onnx=Onnx(onnx) if isinstance(onnx, str) else onnx, **{**_PAIRS, **kw})


BINARY = [
    binary("add", np.add, "exact", "Add"),
    binary("sub", np.subtract, "exact", "Sub"),
    binary("mul", np.multiply, "exact", "Mul"),
    binary("div", np.divide, "exact", "Div", call=hl.true_divide, draw=_divisor_away_from_zero),
    binary("pow", np.power, "libm", "Pow", draw=_positive_base),
    binary("maximum", np.maximum, "exact", "Max", draw=_no_ties),
    binary("minimum", np.minimum, "exact", "Min", draw=_no_ties),
    # (ONNX's Mod with fmod=0 is for integers only: no float node to compare)
    binary("mod", np.mod, "exact", None, draw=_quotient_away_from_integers),
    binary("fmod", np.fmod, "exact", Onnx("Mod", {"fmod": 1}),
           draw=_quotient_away_from_integers),
]

CASES = UNARY + BINARY
