"""Element-wise ops: every unary and binary kernel of the core, where, clip, and the
numpy-style conveniences built from them (true and floor division, logical/bitwise ops)."""
import math

from .. import _core, errors
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, into, operands

_FLOAT_RESULT = {"exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "asin",
                 "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
                 "expm1", "log1p", "sigmoid", "relu", "leaky_relu", "elu", "celu", "selu",
                 "gelu", "gelu_tanh", "softplus", "softsign", "hard_sigmoid", "hard_swish",
                 "mish"}
_KEEP_INT = {"floor", "ceil", "round", "trunc"}  # identity on integers, as in numpy


def _unary(name, x, alpha=0.0, beta=0.0, out=None):
    if not isinstance(x, Tensor):
        x = as_tensor(x)
    if name in _FLOAT_RESULT and not x._dtype.is_floating:
        x = x.astype(_dt.float32)  # integer input computes in float32, as in PyTorch
    elif name in _KEEP_INT and not x._dtype.is_floating:
        return x.clone()
    return _wrap(_core.unary(_core.OPS[name], x._h, alpha, beta, into(out)))


def _make_unary(name, doc):
    def f(x, out=None):
        return _unary(name, x, out=out)
    f.__name__ = name
    f.__doc__ = doc
    return f


_SIMPLE_UNARY = {
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
for _name, _doc in _SIMPLE_UNARY.items():
    globals()[_name] = _make_unary(_name, _doc)
negative = globals()["neg"]


def leaky_relu(x, alpha=0.01, out=None):
    return _unary("leaky_relu", x, alpha, out=out)


def elu(x, alpha=1.0, out=None):
    return _unary("elu", x, alpha, out=out)


def celu(x, alpha=1.0, out=None):
    return _unary("celu", x, alpha, out=out)


def selu(x, alpha=1.6732632423543772, gamma=1.0507009873554805, out=None):
    return _unary("selu", x, alpha, gamma, out=out)


def hard_sigmoid(x, alpha=0.2, beta=0.5, out=None):
    """max(0, min(1, alpha * x + beta)); ONNX's defaults."""
    return _unary("hard_sigmoid", x, alpha, beta, out=out)


def gelu(x, approximate="none", out=None):
    """GELU, exact (erf) or approximate='tanh'."""
    if approximate not in ("none", "tanh"):
        raise errors.ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return _unary("gelu" if approximate == "none" else "gelu_tanh", x, out=out)


# ---- binary -----------------------------------------------------------------------------

def _binary(name, a, b, out=None):
    a, b = operands(a, b)
    return _wrap(_core.binary(_core.OPS[name], a._h, b._h, into(out)))


def _make_binary(name, doc):
    def f(a, b, out=None):
        return _binary(name, a, b, out)
    f.__name__ = name
    f.__doc__ = doc
    return f


_SIMPLE_BINARY = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "maximum": "element-wise max (NaN wins)",
    "minimum": "element-wise min (NaN wins)", "mod": "remainder with the divisor's sign",
    "fmod": "remainder with the dividend's sign (C fmod)", "eq": "a == b", "ne": "a != b",
    "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
    "logical_and": "a and b (bool)", "logical_or": "a or b (bool)",
    "logical_xor": "a xor b (bool)",
    "relu_grad": "a where b > 0, else 0: relu's backward (a = dy, b = its output)",
}
for _name, _doc in _SIMPLE_BINARY.items():
    globals()[_name] = _make_binary(_name, _doc)
subtract, multiply, remainder = globals()["sub"], globals()["mul"], globals()["mod"]
equal, not_equal = globals()["eq"], globals()["ne"]
less, less_equal, greater, greater_equal = (globals()[n] for n in ("lt", "le", "gt", "ge"))


def true_divide(a, b, out=None):
    """a / b; integers divide as float32."""
    a, b = operands(a, b)
    if not a._dtype.is_floating:
        a, b = a.astype(_dt.float32), b.astype(_dt.float32)
    return _wrap(_core.binary(_core.OPS["div"], a._h, b._h, into(out)))


div = divide = true_divide


def floor_divide(a, b, out=None):
    """a // b (numpy semantics; an integer division by zero gives 0)."""
    a, b = operands(a, b)
    if a._dtype.is_floating:
        return floor(true_divide(a, b), out=out)  # noqa: F821 - defined above by the loop
    return _wrap(_core.binary(_core.OPS["div"], a._h, b._h, into(out)))


def pow(a, b, out=None):  # noqa: A001
    """a ** b. Integer bases with negative integer exponents truncate toward zero."""
    return _binary("pow", a, b, out)


power = pow


def _bitwise(logical, name):
    def f(a, b, out=None):
        a, b = operands(a, b)
        if a._dtype is not _dt.bool_:
            raise errors.UnsupportedError(
                f"{name}: bitwise ops on {a._dtype.name} tensors are not supported; "
                f"they work on bool tensors (logical and/or/xor)")
        return _binary(logical, a, b, out)
    f.__name__ = name
    return f


bitwise_and = _bitwise("logical_and", "bitwise_and")
bitwise_or = _bitwise("logical_or", "bitwise_or")
bitwise_xor = _bitwise("logical_xor", "bitwise_xor")


def invert(x):
    """~x for bool tensors (logical not)."""
    if x._dtype is not _dt.bool_:
        raise errors.UnsupportedError(f"~ on {x._dtype.name} tensors is not supported; it works "
                                      f"on bool tensors")
    return logical_not(x)  # noqa: F821


def where(cond, a, b, out=None):
    """Elements of a where cond is true, else of b; all three broadcast."""
    if not isinstance(cond, Tensor):
        cond = as_tensor(cond, dtype=_dt.bool_)
    elif cond._dtype not in (_dt.bool_, _dt.uint8):
        cond = cond.astype(_dt.bool_)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = as_tensor(a, device=cond.device)
    a, b = operands(a, b)
    return _wrap(_core.call("where", cond._h, a._h, b._h, _core.out(into(out))))


def clip(x, min=None, max=None, out=None):  # noqa: A002
    """x limited to [min, max] (either may be None); min > max gives max everywhere."""
    if isinstance(x, Tensor) and x._dtype.is_floating and x._dtype.name in ("float32", "float64") \
            and all(b is None or (isinstance(b, (int, float)) and not isinstance(b, bool))
                    for b in (min, max)):
        # one pass of the core's clip instead of maximum, then minimum
        lo = -math.inf if min is None else float(min)
        hi = math.inf if max is None else float(max)
        return _unary("clip", x, lo, hi, out=out)
    y = x
    if min is not None:
        y = maximum(y, min)  # noqa: F821
    if max is not None:
        y = minimum(y, max)  # noqa: F821
    if out is not None:
        out.copy_(y)
        return out
    return y if y is not x else x.clone()


clamp = clip

__all__ = (list(_SIMPLE_UNARY) + list(_SIMPLE_BINARY) +
           ["negative", "leaky_relu", "elu", "celu", "selu", "hard_sigmoid", "gelu",
            "subtract", "multiply", "remainder", "equal", "not_equal", "less", "less_equal",
            "greater", "greater_equal", "true_divide", "div", "divide", "floor_divide", "pow",
            "power", "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "where", "clip",
            "clamp"])
