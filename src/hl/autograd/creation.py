"""The triangle masks tril/triu, whose gradient is the same triangle of dy, and linspace (a
composite of arange). The constructors themselves (zeros, randn, ...) have nothing to
differentiate: hl.ops.creation and hl.ops.random define them, requires_grad= included."""
from .. import dtypes as _dt
from .. import errors, ops
from .function import Function

__all__ = ["tril", "triu", "linspace"]


class Triangle(Function):
    """tril (upper=False) or triu (upper=True) of the last two axes from diagonal k: a fixed
    mask, so dx is the same triangle of dy."""

    def __init__(self, k, upper):
        self.k, self.upper = int(k), bool(upper)

    @property
    def name(self):
        return "triu" if self.upper else "tril"

    def forward(self, x):
        return ops.triangle(x, self.k, self.upper)

    def backward(self, dy):
        return ops.triangle(dy, self.k, self.upper)


def tril(x, k=0):
    """The lower triangle of the last two axes (from diagonal k); the rest zero."""
    return Triangle(k, upper=False)(x)


def triu(x, k=0):
    """The upper triangle of the last two axes (from diagonal k); the rest zero."""
    return Triangle(k, upper=True)(x)


@ops.creation.accepts_requires_grad
def linspace(start, stop, num=50, endpoint=True, dtype=None, device=None):
    """num values evenly spaced from start to stop (included unless endpoint=False)."""
    if num < 0:
        raise errors.ValueError(f"linspace: num must be >= 0, got {num}")
    div = (num - 1) if endpoint else num
    step = (stop - start) / div if div > 0 else 0.0
    t = ops.arange(0, num, dtype=_dt.float64, device=device) * step + start
    if endpoint and num > 1:
        t[num - 1] = stop
    return t.astype(dtype or _dt.float32)
