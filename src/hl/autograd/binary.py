"""Binary element-wise ops with gradients (numpy broadcasting; each input's gradient summed
back to its shape), comparisons and logical ops (no gradient, shapes for placeholders),
where, clip and cast. Each is defined once; the plain call and ``out=`` run the kernels of
hl.ops.elementwise.
"""
import math

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor, operands, scalar_like
from . import autocast as _autocast
from .elementwise import floor, logical_not
from .function import Function, sum_to, tracing
from .mode import state as _grad
from .placeholder import Placeholder

_unary, _binary, _select = ops.elementwise.unary, ops.elementwise.binary, ops.elementwise.select


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
        return _binary(self.op, a, b)

    def grads(self, dy):
        """(da, db) before summing back to the inputs' shapes."""
        raise NotImplementedError

    def backward(self, dy):
        da, db = self.grads(dy)
        na, nb = self.needs
        # a broadcast parameter (a bias) gets its sum written where the engine wants it
        return (sum_to(da, self.a_shape, self.into(0, da)) if na and da is not None else None,
                sum_to(db, self.b_shape, self.into(1, db)) if nb and db is not None else None)


class Add(Binary):
    op = "add"
    keeps_inputs = False

    def grads(self, dy):
        return dy, dy


class Sub(Binary):
    op = "sub"
    keeps_inputs = False

    def grads(self, dy):
        return dy, (_unary("neg", dy) if self.needs[1] else None)


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
        db = _unary("neg", dy * self.a / _unary("square", self.b)) if nb else None
        return da, db


class Pow(Binary):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    op = "pow"

    def grads(self, dy):
        a, b = self.a, self.b
        na, nb = self.needs
        da = dy * b * _binary("pow", a, b - 1.0) if na else None
        db = None
        if nb:  # a**b * log(a); zero where a == 0 (the limit PyTorch also takes)
            y = _binary("pow", a, b)
            db = _select(_binary("eq", a, 0.0), 0.0, dy * y * _unary("log", _unary("abs", a)))
        return da, db


class Maximum(Binary):
    op = "maximum"

    def grads(self, dy):
        # Ties split the gradient in half, as PyTorch does.
        a, b = self.a, self.b
        share = _select(_binary("gt", a, b), 1.0, _select(_binary("eq", a, b), 0.5, 0.0)).astype(dy.dtype)
        return dy * share, dy * (1.0 - share)


class Minimum(Maximum):
    op = "minimum"

    def grads(self, dy):
        db, da = Maximum.grads(self, dy)
        return da, db


class Mod(Binary):
    op = "mod"

    def grads(self, dy):
        return dy, (_unary("neg", dy * _unary("floor", self.a / self.b)) if self.needs[1] else None)


class Fmod(Binary):
    op = "fmod"

    def grads(self, dy):
        return dy, (_unary("neg", dy * _unary("trunc", self.a / self.b)) if self.needs[1] else None)


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
        return _binary(name, a, b)  # nothing to record
    return BINARY[name]()(a, b)


def _make_binary(name, doc):
    def f(a, b, out=None):
        if out is not None:
            return _binary(name, a, b, out)
        return binary(name, a, b)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_BINARY_DOCS = {
    "add": "a + b", "sub": "a - b", "mul": "a * b", "maximum": "element-wise max (NaN wins)",
    "minimum": "element-wise min (NaN wins)", "mod": "remainder with the divisor's sign",
    "fmod": "remainder with the dividend's sign (C fmod)",
}
for _name, _doc in _BINARY_DOCS.items():
    globals()[_name] = _make_binary(_name, _doc)
subtract, multiply, remainder = globals()["sub"], globals()["mul"], globals()["mod"]


def true_divide(a, b, out=None):
    """a / b; integers divide as float32."""
    if out is not None:
        a, b = operands(a, b)
        if not a.dtype.is_floating:
            a, b = a.astype(_dt.float32), b.astype(_dt.float32)
        return _binary("div", a, b, out)
    a, b = _recorded_operands(a, b)
    if not a.dtype.is_floating:
        a, b = cast(a, _dt.float32), cast(b, _dt.float32)
    return binary("div", a, b)


div = divide = true_divide


def floor_divide(a, b, out=None):
    """a // b (numpy semantics; an integer division by zero gives 0). Piecewise constant: its
    gradient is zero, as in PyTorch."""
    a, b = _recorded_operands(a, b)
    if a.dtype.is_floating:
        return floor(true_divide(a, b), out=out)
    if out is not None or a.__class__ is Tensor and b.__class__ is Tensor:
        return _binary("div", a, b, out)  # integers: nothing to differentiate
    return Compare("div")(a, b)


def pow(a, b, out=None):  # noqa: A001
    """a ** b. Integer bases with negative integer exponents truncate toward zero."""
    if out is not None:
        return _binary("pow", a, b, out=out)
    return binary("pow", a, b)


power = pow


class Compare(Function):
    """Comparisons, logical ops (and integer division): no gradient, but shapes for
    placeholders."""
    differentiable = False

    def __init__(self, op):
        self.op = op

    def forward(self, a, b):
        return _binary(self.op, a, b)


COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor")


def _make_compare(name, doc):
    def f(a, b, out=None):
        if out is None and (a.__class__ is Placeholder or b.__class__ is Placeholder
                            or tracing(a, b)):
            a, b = _recorded_operands(a, b)
            return Compare(name)(a, b)
        return _binary(name, a, b, out)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = doc
    return f


_COMPARE_DOCS = {
    "eq": "a == b", "ne": "a != b", "lt": "a < b", "le": "a <= b", "gt": "a > b", "ge": "a >= b",
    "logical_and": "a and b (bool)", "logical_or": "a or b (bool)",
    "logical_xor": "a xor b (bool)",
}
COMPARISONS = tuple(_COMPARE_DOCS)
for _name, _doc in _COMPARE_DOCS.items():
    globals()[_name] = _make_compare(_name, _doc)
equal, not_equal = globals()["eq"], globals()["ne"]
less, less_equal, greater, greater_equal = (globals()[n] for n in ("lt", "le", "gt", "ge"))


def _bitwise(logical, name):
    def f(a, b, out=None):
        a, b = _recorded_operands(a, b)
        if a.dtype is not _dt.bool_:
            raise errors.UnsupportedError(
                f"{name}: bitwise ops on {a.dtype.name} tensors are not supported; "
                f"they work on bool tensors (logical and/or/xor)")
        return globals()[logical](a, b, out=out)
    f.__name__ = f.__qualname__ = name
    f.__doc__ = f"a {name[8:]} b on bool tensors"
    return f


bitwise_and = _bitwise("logical_and", "bitwise_and")
bitwise_or = _bitwise("logical_or", "bitwise_or")
bitwise_xor = _bitwise("logical_xor", "bitwise_xor")


def invert(x):
    """~x for bool tensors (logical not)."""
    if x.dtype is not _dt.bool_:
        raise errors.UnsupportedError(f"~ on {x.dtype.name} tensors is not supported; it works "
                                      f"on bool tensors")
    return logical_not(x)


# ---- where, clip, cast ------------------------------------------------------------------

class Where(Function):
    def forward(self, cond, a, b):
        self.cond = cond
        if self.needs:
            self.shapes = a.shape, b.shape
        return _select(cond, a, b)

    def backward(self, dy):
        _, na, nb = self.needs
        sa, sb = self.shapes
        return (None,
                sum_to(_select(self.cond, dy, 0.0), sa) if na else None,
                sum_to(_select(self.cond, 0.0, dy), sb) if nb else None)


def where(cond, a, b, out=None):
    """Elements of a where cond is true, else of b; all three broadcast."""
    if out is not None:
        return _select(cond, a, b, out=out)
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
        return _clip(x, self.lo, self.hi)

    def backward(self, dy):
        inside = None
        if self.lo is not None:
            inside = _binary("ge", self.x, self.lo)
        if self.hi is not None:
            le = _binary("le", self.x, self.hi)
            inside = le if inside is None else _binary("logical_and", inside, le)
        return _select(inside, dy, 0.0) if inside is not None else dy


def _clip(x, lo, hi, out=None):
    if x.dtype in (_dt.float32, _dt.float64) and all(
            b is None or (isinstance(b, (int, float)) and not isinstance(b, bool))
            for b in (lo, hi)):
        # one pass of the core's clip instead of maximum, then minimum
        return _unary("clip", x, -math.inf if lo is None else float(lo),
                      math.inf if hi is None else float(hi), out)
    y = x
    if lo is not None:
        y = _binary("maximum", y, lo)
    if hi is not None:
        y = _binary("minimum", y, hi)
    if out is not None:
        out.copy_(y)
        return out
    return y if y is not x else x.clone()


def clip(x, min=None, max=None, out=None):  # noqa: A002
    """x limited to [min, max] (either may be None); min > max gives max everywhere."""
    if out is not None:
        return _clip(x, min, max, out)
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
_autocast.cast = cast  # autocast's casts are recorded Casts (autograd/autocast.py)

__all__ = (list(_BINARY_DOCS) + list(COMPARISONS) +
           ["floor_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "invert",
            "subtract", "multiply", "remainder", "true_divide", "div", "divide", "pow", "power",
            "where", "clip", "clamp", "cast", "astype", "equal", "not_equal", "less",
            "less_equal", "greater", "greater_equal"])
