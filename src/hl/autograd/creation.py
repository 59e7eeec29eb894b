"""Tensor constructors that also take ``requires_grad=`` (``hl.randn(3, requires_grad=True)``),
as PyTorch users expect, with the values from the plain hl.ops constructors; and the triangle
masks tril/triu, whose gradient is the same triangle of dy."""
import functools

from .. import errors, ops
from ..ops import creation as _creation
from ..ops import random as _random
from .function import Function

_NAMES = [n for n in _creation.__all__ + _random.__all__
          if callable(getattr(ops, n, None)) and n not in ("tril", "triu", "manual_seed",
                                                            "Generator")]


def _accepting_requires_grad(f):
    @functools.wraps(f)
    def make(*args, requires_grad=False, **kwargs):
        t = f(*args, **kwargs)
        if requires_grad:
            if not t.dtype.is_floating:
                raise errors.DTypeError(f"{f.__name__}: only floating tensors can require "
                                        f"gradients, this one is {t.dtype.name}")
            t.requires_grad = True
        return t
    return make


for _name in _NAMES:
    globals()[_name] = _accepting_requires_grad(getattr(ops, _name))


class Triangle(Function):
    """tril (upper=False) or triu (upper=True) of the last two axes from diagonal k: a fixed
    mask, so dx is the same triangle of dy."""

    def __init__(self, k, upper):
        self.k, self.upper = int(k), bool(upper)

    @property
    def name(self):
        return "triu" if self.upper else "tril"

    def _mask(self, t):
        return ops.triu(t, self.k) if self.upper else ops.tril(t, self.k)

    def forward(self, x):
        return self._mask(x)

    def backward(self, dy):
        return self._mask(dy)


def tril(x, k=0):
    """The lower triangle of the last two axes (from diagonal k); the rest zero."""
    return Triangle(k, upper=False)(x)


def triu(x, k=0):
    """The upper triangle of the last two axes (from diagonal k); the rest zero."""
    return Triangle(k, upper=True)(x)


__all__ = list(_NAMES) + ["tril", "triu"]
