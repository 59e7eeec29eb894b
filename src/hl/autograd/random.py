"""Dropout: the one random op with a gradient.

Training multiplies x by a fresh Bernoulli(1 - p) mask from the core's counter-based
generator, scaled by 1 / (1 - p) so the expected value is unchanged (inverted dropout, as in
PyTorch); backward multiplies dy by the same scaled mask. Every call draws a new mask (the
generator's counter moves on), so two steps never share one.
"""
from .. import errors, ops
from ._nn import as_input
from .function import Function

__all__ = ["dropout"]


class Dropout(Function):
    # hl.amp: on neither list (PyTorch's rule), so inside a region it runs in its input's
    # dtype; a half mask is float32's Bernoulli draw (same Philox words, 0 or 1 exactly)
    def __init__(self, p, generator):
        self.p, self.generator = p, generator

    def forward(self, x):
        if self.p == 1.0:  # everything dropped: 1 / (1 - p) would be inf * 0 = NaN
            self.scaled_mask = ops.zeros(*x.shape, dtype=x.dtype, device=x.device)
        else:
            mask = ops.bernoulli(*x.shape, p=1.0 - self.p, dtype=x.dtype, device=x.device,
                                 generator=self.generator)
            self.scaled_mask = mask * (1.0 / (1.0 - self.p))
        y = x * self.scaled_mask
        if not self.needs:
            del self.scaled_mask
        return y

    def backward(self, dy):
        return dy * self.scaled_mask


def dropout(x, p=0.5, training=True, generator=None):
    """x with each element zeroed with probability p and the rest scaled by 1 / (1 - p)
    while training; x itself otherwise (and when p is 0). generator: an
    hl.random.Generator (the default one when None)."""
    if not 0.0 <= p <= 1.0:
        raise errors.ValueError(f"dropout: p must be in [0, 1], got {p}")
    x = as_input(x, "dropout")
    if not training or p == 0.0:
        return x
    if not x.dtype.is_floating:
        raise errors.DTypeError(f"dropout: expected a float tensor, got {x.dtype.name}")
    return Dropout(float(p), generator)(x)
