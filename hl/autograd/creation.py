"""Tensor constructors that also take ``requires_grad=`` (``hl.randn(3, requires_grad=True)``),
as PyTorch users expect; the values come from the plain hl.ops constructors."""
import functools

from .. import ops
from ..ops import creation as _creation
from ..ops import random as _random

_NAMES = [n for n in _creation.__all__ + _random.__all__
          if callable(getattr(ops, n, None)) and n not in ("tril", "triu", "manual_seed",
                                                            "Generator")]


def _accepting_requires_grad(f):
    @functools.wraps(f)
    def make(*args, requires_grad=False, **kwargs):
        t = f(*args, **kwargs)
        if requires_grad:
            if not t.dtype.is_floating:
                from .. import errors
                raise errors.DTypeError(f"{f.__name__}: only floating tensors can require "
                                        f"gradients, this one is {t.dtype.name}")
            t.requires_grad = True
        return t
    return make


for _name in _NAMES:
    globals()[_name] = _accepting_requires_grad(getattr(ops, _name))

__all__ = list(_NAMES)
