"""Unary element-wise ops with gradients (the binary ones, where, clip and cast are in
autograd/binary.py).

Most unary ops need only their derivative, written as one function of (x, y, dy) in the
table below; ops whose derivative is zero (sign, floor, ...) use a zero one, and ops with no
derivative (comparisons, predicates, logical ops) are Functions marked not differentiable, so
placeholders still get their shapes. Every op here is defined once: its plain call (no tape,
hl.no_grad, ``out=``) runs the same kernels, hl.ops.elementwise's unary/binary/select.
"""
import math

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, operands, scalar_like
from .function import Function, sum_to
from .mode import state as _grad
from .placeholder import Placeholder

_unary, _binary, _select = ops.elementwise.unary, ops.elementwise.binary, ops.elementwise.select

# ---- unary ------------------------------------------------------------------------------


class Unary(Function):
    """y = f(x) for one of the core's unary kernels; `derivative(x, y, dy, alpha, beta)` gives
    dx."""

    def __init__(self, name, derivative, alpha=0.0, beta=0.0, uses_x=True):
        self.op, self.derivative, self.alpha, self.beta = name, derivative, alpha, beta
        self.uses_x = uses_x

    @property
    def name(self):
        return self.op

    def forward(self, x):
        y = _unary(self.op, x, self.alpha, self.beta)
        if self.needs:
            self.x = x if self.uses_x else None
            self.y = y.detach()  # not y itself: y -> creator -> y would be a cycle
        return y

    def backward(self, dy):
        return self.derivative(self.x, self.y, dy, self.alpha, self.beta)


def _positive(x):
    return _binary("gt", x, 0.0)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(x, y, dy, a, b):
    cdf = (_unary("erf", x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5
    pdf = _unary("exp", _unary("square", x) * -0.5) * _INV_SQRT_2PI
    return dy * (cdf + x * pdf)


def _gelu_tanh(x, y, dy, a, b):
    k = _SQRT_2_OVER_PI
    x2 = _unary("square", x)
    t = _unary("tanh", (x + x * x2 * 0.044715) * k)
    return dy * ((t + 1.0) * 0.5 + x * (1.0 - _unary("square", t)) * (k * 0.5) * (x2 * 0.134145 + 1.0))


def _hard_sigmoid(x, y, dy, a, b):
    z = x * a + b
    return _select(_binary("logical_and", _binary("gt", z, 0.0), _binary("lt", z, 1.0)), dy * a, 0.0)


def _hard_swish(x, y, dy, a, b):
    hs = _unary("hard_sigmoid", x, 1.0 / 6.0, 0.5)
    inside = _binary("logical_and", _binary("gt", x, -3.0), _binary("lt", x, 3.0))
    return dy * (hs + _select(inside, x * (1.0 / 6.0), 0.0))


def _mish(x, y, dy, a, b):
    t = _unary("tanh", _unary("softplus", x))
    return dy * (t + x * (1.0 - _unary("square", t)) * _unary("sigmoid", x))


# name -> (derivative(x, y, dy, alpha, beta), needs x)
DERIVATIVES = {
    "neg": (lambda x, y, dy, a, b: _unary("neg", dy), False),
    "abs": (lambda x, y, dy, a, b: dy * _unary("sign", x), True),
    "square": (lambda x, y, dy, a, b: dy * x * 2.0, True),
    "exp": (lambda x, y, dy, a, b: dy * y, False),
    "expm1": (lambda x, y, dy, a, b: dy * (y + 1.0), False),
    "log": (lambda x, y, dy, a, b: dy / x, True),
    "log1p": (lambda x, y, dy, a, b: dy / (x + 1.0), True),
    "sqrt": (lambda x, y, dy, a, b: dy * 0.5 / y, False),
    "rsqrt": (lambda x, y, dy, a, b: dy * -0.5 * y * y * y, False),
    "reciprocal": (lambda x, y, dy, a, b: _unary("neg", dy * y * y), False),
    "sin": (lambda x, y, dy, a, b: dy * _unary("cos", x), True),
    "cos": (lambda x, y, dy, a, b: _unary("neg", dy * _unary("sin", x)), True),
    "tan": (lambda x, y, dy, a, b: dy * (_unary("square", y) + 1.0), False),
    "asin": (lambda x, y, dy, a, b: dy * _unary("rsqrt", 1.0 - _unary("square", x)), True),
    "acos": (lambda x, y, dy, a, b: _unary("neg", dy * _unary("rsqrt", 1.0 - _unary("square", x))), True),
    "atan": (lambda x, y, dy, a, b: dy / (_unary("square", x) + 1.0), True),
    "sinh": (lambda x, y, dy, a, b: dy * _unary("cosh", x), True),
    "cosh": (lambda x, y, dy, a, b: dy * _unary("sinh", x), True),
    "tanh": (lambda x, y, dy, a, b: dy * (1.0 - _unary("square", y)), False),
    "asinh": (lambda x, y, dy, a, b: dy * _unary("rsqrt", _unary("square", x) + 1.0), True),
    "acosh": (lambda x, y, dy, a, b: dy * _unary("rsqrt", _unary("square", x) - 1.0), True),
    "atanh": (lambda x, y, dy, a, b: dy / (1.0 - _unary("square", x)), True),
    "erf": (lambda x, y, dy, a, b: dy * _unary("exp", _unary("neg", _unary("square", x))) * (2 / math.sqrt(math.pi)),
            True),
    "sigmoid": (lambda x, y, dy, a, b: dy * y * (1.0 - y), False),
    "relu": (lambda x, y, dy, a, b: ops.relu_grad(dy, y), False),
    "leaky_relu": (lambda x, y, dy, a, b: _select(_positive(x), dy, dy * a), True),
    "elu": (lambda x, y, dy, a, b: _select(_positive(x), dy, dy * (y + a)), True),
    "celu": (lambda x, y, dy, a, b: _select(_positive(x), dy, dy * _unary("exp", x / a)), True),
    "selu": (lambda x, y, dy, a, b: _select(_positive(x), dy * b, dy * (y + a * b)), True),
    "thresholded_relu": (lambda x, y, dy, a, b: _select(_binary("gt", x, a), dy, 0.0), True),
    "gelu": (_gelu, True),
    "gelu_tanh": (_gelu_tanh, True),
    "softplus": (lambda x, y, dy, a, b: dy * _unary("sigmoid", x), True),
    "softsign": (lambda x, y, dy, a, b: dy / _unary("square", _unary("abs", x) + 1.0), True),
    "hard_sigmoid": (_hard_sigmoid, True),
    "hard_swish": (_hard_swish, True),
    "mish": (_mish, True),
}

# Piecewise constant: the gradient is zero wherever it exists (PyTorch's convention).
ZERO_DERIVATIVE = ("sign", "floor", "ceil", "round", "trunc")


# No derivative at all: the result is bool (a Function still, for placeholders' shapes).
PREDICATES = frozenset(("isnan", "isinf", "isfinite", "logical_not"))


def _zero(x, y, dy, a, b):
    return ops.zeros_like(dy)


# Unary ops that compute in float32 inside hl.amp.autocast: PyTorch's float32 list (their
# results or gradients overflow or lose too much in half)
AUTOCAST_FLOAT32 = frozenset(("exp", "expm1", "log", "log2", "log10", "log1p", "reciprocal",
                              "rsqrt", "sinh", "cosh", "tan", "acos", "asin", "softplus"))


def unary(name, x, alpha=0.0, beta=0.0, out=None):
    """The op `name` on x, recorded when a gradient flows; with out= the kernel writes into
    out and nothing records (as in PyTorch, out= is not differentiable)."""
    if out is not None:
        return _unary(name, x, alpha, beta, out)
    derivative, uses_x = DERIVATIVES.get(name) or (_zero, False)
    if not isinstance(x, (Tensor, Placeholder)):
        x = as_tensor(x)
    f = Unary(name, derivative, alpha, beta, uses_x)
    if name in AUTOCAST_FLOAT32:
        f.autocast = "float32"
    if name in PREDICATES:
        f.differentiable = False
    return f(x)


def _make_unary(name, doc):
    def f(x, out=None):
        return unary(name, x, out=out)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_DOCS = {
    "neg": "-x", "abs": "|x|", "exp": "e**x", "log": "natural logarithm", "sqrt": "square root",
    "rsqrt": "1 / sqrt(x)", "reciprocal": "1 / x", "sin": "sine", "cos": "cosine",
    "tan": "tangent", "asin": "arcsine", "acos": "arccosine", "atan": "arctangent",
    "sinh": "hyperbolic sine", "cosh": "hyperbolic cosine", "tanh": "hyperbolic tangent",
    "asinh": "inverse hyperbolic sine", "acosh": "inverse hyperbolic cosine",
    "atanh": "inverse hyperbolic tangent", "erf": "error function", "expm1": "e**x - 1",
    "log1p": "log(1 + x)", "sigmoid": "1 / (1 + e**-x)", "relu": "max(x, 0)",
    "gelu_tanh": "GELU, tanh approximation", "softplus": "log(1 + e**x)",
    "softsign": "x / (1 + |x|)", "hard_swish": "x * hard_sigmoid(x, 1/6, 1/2)",
    "mish": "x * tanh(softplus(x))", "sign": "-1, 0 or 1", "square": "x * x",
    "floor": "round down", "ceil": "round up", "round": "round half to even",
    "trunc": "round toward zero", "logical_not": "not x (bool)", "isnan": "x is NaN (bool)",
    "isinf": "x is +-inf (bool)", "isfinite": "x is finite (bool)",
}
for _name, _doc in _DOCS.items():
    globals()[_name] = _make_unary(_name, _doc)
negative = globals()["neg"]


def leaky_relu(x, alpha=0.01, out=None):
    """x where x >= 0, else alpha * x."""
    return unary("leaky_relu", x, alpha, out=out)


def elu(x, alpha=1.0, out=None):
    """x where x > 0, else alpha * (e**x - 1)."""
    return unary("elu", x, alpha, out=out)


def celu(x, alpha=1.0, out=None):
    """x where x > 0, else alpha * (e**(x / alpha) - 1)."""
    return unary("celu", x, alpha, out=out)


def selu(x, alpha=1.6732632423543772, gamma=1.0507009873554805, out=None):
    """gamma * elu(x, alpha), with the self-normalising constants by default."""
    return unary("selu", x, alpha, gamma, out=out)


def hard_sigmoid(x, alpha=0.2, beta=0.5, out=None):
    """max(0, min(1, alpha * x + beta)); ONNX's defaults."""
    return unary("hard_sigmoid", x, alpha, beta, out=out)


def gelu(x, approximate="none", out=None):
    """GELU, exact (erf) or approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise errors.ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary("gelu" if approximate == "none" else "gelu_tanh", x, out=out)


def thresholded_relu(x, alpha=1.0, out=None):
    """x where x > alpha, else 0 (ONNX's ThresholdedRelu; NaN stays NaN, as in relu)."""
    return unary("thresholded_relu", x, alpha, out=out)


__all__ = (list(_DOCS) + ["leaky_relu", "elu", "celu", "selu", "hard_sigmoid",
                           "gelu", "negative", "thresholded_relu"])
