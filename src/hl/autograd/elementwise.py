"""Element-wise ops with gradients: the unary kernels, broadcasting binaries (gradients summed
back to each input's shape), where, clip and cast.

Most unary ops need only their derivative, written as one function of (x, y, dy) in the
table below; ops whose derivative is zero (sign, floor, ...) and ops with no derivative
(comparisons, logical ops) stay the plain hl.ops functions.
"""
import math

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, operands, scalar_like
from .function import Function, sum_to, tracing
from .mode import state as _grad
from .placeholder import Placeholder

# ---- unary ------------------------------------------------------------------------------


def _broadcast_shape(a, b, op):
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x != y and x != 1 and y != 1:
            raise errors.ShapeError(f"{op}: shapes {a} and {b} do not broadcast (size {x} "
                                    f"against {y})")
        out.append(y if x == 1 else x)
    return tuple(out)


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
        y = ops.elementwise._unary(self.op, x, self.alpha, self.beta)
        if self.needs:
            self.x = x if self.uses_x else None
            self.y = y.detach()  # not y itself: y -> creator -> y would be a cycle
        return y

    def backward(self, dy):
        return self.derivative(self.x, self.y, dy, self.alpha, self.beta)


def _positive(x):
    return ops.gt(x, 0.0)


_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_INV_SQRT_2PI = 1.0 / math.sqrt(2.0 * math.pi)


def _gelu(x, y, dy, a, b):
    cdf = (ops.erf(x * (1.0 / math.sqrt(2.0))) + 1.0) * 0.5
    pdf = ops.exp(ops.square(x) * -0.5) * _INV_SQRT_2PI
    return dy * (cdf + x * pdf)


def _gelu_tanh(x, y, dy, a, b):
    k = _SQRT_2_OVER_PI
    x2 = ops.square(x)
    t = ops.tanh((x + x * x2 * 0.044715) * k)
    return dy * ((t + 1.0) * 0.5 + x * (1.0 - ops.square(t)) * (k * 0.5) * (x2 * 0.134145 + 1.0))


def _hard_sigmoid(x, y, dy, a, b):
    z = x * a + b
    return ops.where(ops.logical_and(ops.gt(z, 0.0), ops.lt(z, 1.0)), dy * a, 0.0)


def _hard_swish(x, y, dy, a, b):
    hs = ops.hard_sigmoid(x, 1.0 / 6.0, 0.5)
    inside = ops.logical_and(ops.gt(x, -3.0), ops.lt(x, 3.0))
    return dy * (hs + ops.where(inside, x * (1.0 / 6.0), 0.0))


def _mish(x, y, dy, a, b):
    t = ops.tanh(ops.softplus(x))
    return dy * (t + x * (1.0 - ops.square(t)) * ops.sigmoid(x))


# name -> (derivative(x, y, dy, alpha, beta), needs x)
DERIVATIVES = {
    "neg": (lambda x, y, dy, a, b: ops.neg(dy), False),
    "abs": (lambda x, y, dy, a, b: dy * ops.sign(x), True),
    "square": (lambda x, y, dy, a, b: dy * x * 2.0, True),
    "exp": (lambda x, y, dy, a, b: dy * y, False),
    "expm1": (lambda x, y, dy, a, b: dy * (y + 1.0), False),
    "log": (lambda x, y, dy, a, b: dy / x, True),
    "log1p": (lambda x, y, dy, a, b: dy / (x + 1.0), True),
    "sqrt": (lambda x, y, dy, a, b: dy * 0.5 / y, False),
    "rsqrt": (lambda x, y, dy, a, b: dy * -0.5 * y * y * y, False),
    "reciprocal": (lambda x, y, dy, a, b: ops.neg(dy * y * y), False),
    "sin": (lambda x, y, dy, a, b: dy * ops.cos(x), True),
    "cos": (lambda x, y, dy, a, b: ops.neg(dy * ops.sin(x)), True),
    "tan": (lambda x, y, dy, a, b: dy * (ops.square(y) + 1.0), False),
    "asin": (lambda x, y, dy, a, b: dy * ops.rsqrt(1.0 - ops.square(x)), True),
    "acos": (lambda x, y, dy, a, b: ops.neg(dy * ops.rsqrt(1.0 - ops.square(x))), True),
    "atan": (lambda x, y, dy, a, b: dy / (ops.square(x) + 1.0), True),
    "sinh": (lambda x, y, dy, a, b: dy * ops.cosh(x), True),
    "cosh": (lambda x, y, dy, a, b: dy * ops.sinh(x), True),
    "tanh": (lambda x, y, dy, a, b: dy * (1.0 - ops.square(y)), False),
    "asinh": (lambda x, y, dy, a, b: dy * ops.rsqrt(ops.square(x) + 1.0), True),
    "acosh": (lambda x, y, dy, a, b: dy * ops.rsqrt(ops.square(x) - 1.0), True),
    "atanh": (lambda x, y, dy, a, b: dy / (1.0 - ops.square(x)), True),
    "erf": (lambda x, y, dy, a, b: dy * ops.exp(ops.neg(ops.square(x))) * (2 / math.sqrt(math.pi)),
            True),
    "sigmoid": (lambda x, y, dy, a, b: dy * y * (1.0 - y), False),
    "relu": (lambda x, y, dy, a, b: ops.relu_grad(dy, y), False),
    "leaky_relu": (lambda x, y, dy, a, b: ops.where(_positive(x), dy, dy * a), True),
    "elu": (lambda x, y, dy, a, b: ops.where(_positive(x), dy, dy * (y + a)), True),
    "celu": (lambda x, y, dy, a, b: ops.where(_positive(x), dy, dy * ops.exp(x / a)), True),
    "selu": (lambda x, y, dy, a, b: ops.where(_positive(x), dy * b, dy * (y + a * b)), True),
    "gelu": (_gelu, True),
    "gelu_tanh": (_gelu_tanh, True),
    "softplus": (lambda x, y, dy, a, b: dy * ops.sigmoid(x), True),
    "softsign": (lambda x, y, dy, a, b: dy / ops.square(ops.abs(x) + 1.0), True),
    "hard_sigmoid": (_hard_sigmoid, True),
    "hard_swish": (_hard_swish, True),
    "mish": (_mish, True),
}

# Piecewise constant: the gradient is zero wherever it exists (PyTorch's convention).
ZERO_DERIVATIVE = ("sign", "floor", "ceil", "round", "trunc")


def _zero(x, y, dy, a, b):
    return ops.zeros_like(dy)


def unary(name, x, alpha=0.0, beta=0.0):
    derivative, uses_x = DERIVATIVES.get(name) or (_zero, False)
    if not isinstance(x, (Tensor, Placeholder)):
        x = as_tensor(x)
    return Unary(name, derivative, alpha, beta, uses_x)(x)


def _make_unary(name):
    def f(x, out=None):
        if out is not None:
            return ops.elementwise._unary(name, x, out=out)
        return unary(name, x)
    f.__name__ = name
    f.__doc__ = getattr(ops, name).__doc__
    return f


for _name in list(DERIVATIVES) + list(ZERO_DERIVATIVE):
    if _name not in ("hard_sigmoid", "leaky_relu", "elu", "celu", "selu"):
        globals()[_name] = _make_unary(_name)
negative = globals()["neg"]


def leaky_relu(x, alpha=0.01, out=None):
    if out is not None:
        return ops.leaky_relu(x, alpha, out=out)
    return unary("leaky_relu", x, alpha)


def elu(x, alpha=1.0, out=None):
    if out is not None:
        return ops.elu(x, alpha, out=out)
    return unary("elu", x, alpha)


def celu(x, alpha=1.0, out=None):
    if out is not None:
        return ops.celu(x, alpha, out=out)
    return unary("celu", x, alpha)


def selu(x, alpha=1.6732632423543772, gamma=1.0507009873554805, out=None):
    if out is not None:
        return ops.selu(x, alpha, gamma, out=out)
    return unary("selu", x, alpha, gamma)


def hard_sigmoid(x, alpha=0.2, beta=0.5, out=None):
    """max(0, min(1, alpha * x + beta)); ONNX's defaults."""
    if out is not None:
        return ops.hard_sigmoid(x, alpha, beta, out=out)
    return unary("hard_sigmoid", x, alpha, beta)


def gelu(x, approximate="none", out=None):
    """GELU, exact (erf) or approximate='tanh'."""
    if out is not None:
        return ops.gelu(x, approximate, out=out)
    if approximate not in ("none", "tanh"):
        raise errors.ValueError(f"gelu: approximate must be 'none' or 'tanh', got {approximate!r}")
    return unary("gelu" if approximate == "none" else "gelu_tanh", x)


# ---- binary -----------------------------------------------------------------------------

class Binary(Function):
    """y = a (op) b with numpy broadcasting. Subclasses that need the inputs' values in
    backward set keeps_inputs; the others (add, sub) keep only the shapes, so the inputs can
    be freed during the forward pass."""
    op = None
    keeps_inputs = True

    def forward(self, a, b):
        if self.needs:
            self.a_shape, self.b_shape = a.shape, b.shape
            if self.keeps_inputs:
                self.a, self.b = a, b
        return ops.elementwise._binary(self.op, a, b)

    def grads(self, dy):
        """(da, db) before summing back to the inputs' shapes."""
        raise NotImplementedError

    def backward(self, dy):
        da, db = self.grads(dy)
        na, nb = self.needs
        return (sum_to(da, self.a_shape) if na and da is not None else None,
                sum_to(db, self.b_shape) if nb and db is not None else None)


class Add(Binary):
    op = "add"
    keeps_inputs = False

    def grads(self, dy):
        return dy, dy


class Sub(Binary):
    op = "sub"
    keeps_inputs = False

    def grads(self, dy):
        return dy, (ops.neg(dy) if self.needs[1] else None)


class Mul(Binary):
    op = "mul"

    def grads(self, dy):
        na, nb = self.needs
        return (dy * self.b if na else None), (dy * self.a if nb else None)


class Div(Binary):
    op = "div"

    def grads(self, dy):
        na, nb = self.needs
        da = dy / self.b if na else None
        db = ops.neg(dy * self.a / ops.square(self.b)) if nb else None
        return da, db


class Pow(Binary):
    op = "pow"

    def grads(self, dy):
        a, b = self.a, self.b
        na, nb = self.needs
        da = dy * b * ops.pow(a, b - 1.0) if na else None
        db = None
        if nb:  # a**b * log(a); zero where a == 0 (the limit PyTorch also takes)
            y = ops.pow(a, b)
            db = ops.where(ops.eq(a, 0.0), 0.0, dy * y * ops.log(ops.abs(a)))
        return da, db


class Maximum(Binary):
    op = "maximum"

    def grads(self, dy):
        # Ties split the gradient in half, as PyTorch does.
        a, b = self.a, self.b
        share = ops.where(ops.gt(a, b), 1.0, ops.where(ops.eq(a, b), 0.5, 0.0)).astype(dy.dtype)
        return dy * share, dy * (1.0 - share)


class Minimum(Maximum):
    op = "minimum"

    def grads(self, dy):
        db, da = Maximum.grads(self, dy)
        return da, db


class Mod(Binary):
    op = "mod"

    def grads(self, dy):
        return dy, (ops.neg(dy * ops.floor(self.a / self.b)) if self.needs[1] else None)


class Fmod(Binary):
    op = "fmod"

    def grads(self, dy):
        return dy, (ops.neg(dy * ops.trunc(self.a / self.b)) if self.needs[1] else None)


BINARY = {"add": Add, "sub": Sub, "mul": Mul, "div": Div, "pow": Pow, "maximum": Maximum,
          "minimum": Minimum, "mod": Mod, "fmod": Fmod}


def _recorded_operands(a, b):
    """a and b as tensors (or placeholders) of one dtype, promoting through the recorded cast
    so a gradient flows back into the original dtype."""
    ta, tb = isinstance(a, (Tensor, Placeholder)), isinstance(b, (Tensor, Placeholder))
    if ta and tb:
        if a.dtype is b.dtype:
            return a, b
        d = _dt.promote(a.dtype, b.dtype)
        return (a if a.dtype is d else cast(a, d)), (b if b.dtype is d else cast(b, d))
    if ta and isinstance(b, (int, float, bool)):
        d = _dt.promote_scalar(a.dtype, b)
        return (a if a.dtype is d else cast(a, d)), scalar_like(b, d, a)
    if tb and isinstance(a, (int, float, bool)):
        b, a = _recorded_operands(b, a)
        return a, b
    return operands(a, b)


def binary(name, a, b):
    a, b = _recorded_operands(a, b)
    if not (a.requires_grad or b.requires_grad) and a.__class__ is Tensor and \
            b.__class__ is Tensor:
        return ops.elementwise._binary(name, a, b)  # nothing to record
    return BINARY[name]()(a, b)


def _make_binary(name):
    def f(a, b, out=None):
        if out is not None:
            return ops.elementwise._binary(name, a, b, out)
        return binary(name, a, b)
    f.__name__ = name
    f.__doc__ = getattr(ops, name).__doc__
    return f


for _name in ("add", "sub", "mul", "maximum", "minimum", "mod", "fmod"):
    globals()[_name] = _make_binary(_name)
subtract, multiply, remainder = globals()["sub"], globals()["mul"], globals()["mod"]


def true_divide(a, b, out=None):
    """a / b; integers divide as float32."""
    if out is not None:
        return ops.true_divide(a, b, out=out)
    a, b = _recorded_operands(a, b)
    if not a.dtype.is_floating:
        a, b = cast(a, _dt.float32), cast(b, _dt.float32)
    return binary("div", a, b)


div = divide = true_divide


def pow(a, b, out=None):  # noqa: A001
    """a ** b."""
    if out is not None:
        return ops.pow(a, b, out=out)
    return binary("pow", a, b)


power = pow


class Compare(Function):
    """Comparisons and logical ops: no gradient, but shapes for placeholders (bool result)."""
    differentiable = False

    def __init__(self, op):
        self.op = op

    def forward(self, a, b):
        return ops.elementwise._binary(self.op, a, b)


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")


def _make_compare(name):
    plain = getattr(ops, name)

    def f(a, b, out=None):
        if out is None and (a.__class__ is Placeholder or b.__class__ is Placeholder
                            or tracing(a, b)):
            a, b = _recorded_operands(a, b)
            return Compare(name)(a, b)
        return plain(a, b, out=out)
    f.__name__ = name
    f.__doc__ = plain.__doc__
    return f


for _name in COMPARISONS:
    globals()[_name] = _make_compare(_name)
equal, not_equal = globals()["eq"], globals()["ne"]
less, less_equal, greater, greater_equal = (globals()[n] for n in ("lt", "le", "gt", "ge"))


# ---- where, clip, cast ------------------------------------------------------------------

class Where(Function):
    def forward(self, cond, a, b):
        self.cond = cond
        if self.needs:
            self.shapes = a.shape, b.shape
        return ops.where(cond, a, b)

    def backward(self, dy):
        _, na, nb = self.needs
        sa, sb = self.shapes
        return (None,
                sum_to(ops.where(self.cond, dy, 0.0), sa) if na else None,
                sum_to(ops.where(self.cond, 0.0, dy), sb) if nb else None)


def where(cond, a, b, out=None):
    """Elements of a where cond is true, else of b; all three broadcast."""
    if out is not None:
        return ops.where(cond, a, b, out=out)
    if isinstance(cond, Tensor) and cond.dtype not in (_dt.bool_, _dt.uint8):
        cond = cond.astype(_dt.bool_)
    elif not isinstance(cond, (Tensor, Placeholder)):
        cond = as_tensor(cond, dtype=_dt.bool_)
    if not isinstance(a, (Tensor, Placeholder)) and not isinstance(b, (Tensor, Placeholder)):
        a = as_tensor(a, device=cond.device)
    a, b = _recorded_operands(a, b)
    return Where()(cond, a, b)


class Clip(Function):
    """min(max(x, lo), hi); the gradient passes where lo <= x <= hi (boundaries included, as
    in PyTorch)."""

    def __init__(self, lo, hi):
        self.lo, self.hi = lo, hi

    def forward(self, x):
        if self.needs:
            self.x = x
        return ops.clip(x, self.lo, self.hi)

    def backward(self, dy):
        inside = None
        if self.lo is not None:
            inside = ops.ge(self.x, self.lo)
        if self.hi is not None:
            le = ops.le(self.x, self.hi)
            inside = le if inside is None else ops.logical_and(inside, le)
        return ops.where(inside, dy, 0.0) if inside is not None else dy


def clip(x, min=None, max=None, out=None):  # noqa: A002
    """x limited to [min, max] (either may be None)."""
    if out is not None:
        return ops.clip(x, min, max, out=out)
    return Clip(min, max)(x)


clamp = clip


class Cast(Function):
    def __init__(self, dtype):
        self.dtype = _dt.dtype(dtype)

    def forward(self, x):
        self.src_dtype = x.dtype
        return x.astype(self.dtype)

    def backward(self, dy):
        if not (self.src_dtype.is_floating and self.dtype.is_floating):
            return None  # through integers there is no gradient
        return dy.astype(self.src_dtype)


def cast(x, dtype):
    """x converted to dtype, recorded so a gradient flows back (between float dtypes)."""
    d = _dt.dtype(dtype)
    if x.__class__ is Tensor and (not x.requires_grad or not _grad.enabled):
        return x.astype(d)
    return Cast(d)(x)


astype = cast

__all__ = (list(DERIVATIVES) + list(ZERO_DERIVATIVE) +
           ["negative", "subtract", "multiply", "remainder", "true_divide", "div", "divide",
            "pow", "power", "where", "clip", "clamp", "cast", "astype", "add", "sub", "mul",
            "maximum", "minimum", "mod", "fmod", "equal", "not_equal", "less", "less_equal",
            "greater", "greater_equal"] + list(COMPARISONS))
