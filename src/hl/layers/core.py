"""Layers without parameters that reshape or regularise: Identity, Flatten, Reshape,
Dropout."""
from .. import errors
from ..autograd import functional as F
from . import _checks
from .layer import Layer


class Identity(Layer):
    """Returns its input unchanged (a stand-in where a layer is optional)."""

    def forward(self, x):
        return x


class Flatten(Layer):
    """Merges axes start_dim..end_dim into one: (N, C, H, W) -> (N, C * H * W) by default,
    keeping the batch axis (torch.nn.Flatten)."""

    def __init__(self, start_dim=1, end_dim=-1, name=None):
        super().__init__(name)
        self.start_dim = _checks.count(start_dim, "start_dim", "Flatten", minimum=-2**31)
        self.end_dim = _checks.count(end_dim, "end_dim", "Flatten", minimum=-2**31)

    def forward(self, x):
        for a in (self.start_dim, self.end_dim):
            if not -x.ndim <= a < max(x.ndim, 1):
                raise errors.IndexError(
                    f"{self.describe()}: axis {a} is out of range for an input of shape "
                    f"{tuple(x.shape)}")
        return F.flatten(x, self.start_dim, self.end_dim)

    def extra_repr(self):
        return f"start_dim={self.start_dim}, end_dim={self.end_dim}"


class Reshape(Layer):
    """Reshapes every axis but the first (the batch), as Keras's Reshape: ``Reshape(4, 7,
    7)`` turns (N, 196) into (N, 4, 7, 7); one entry may be -1 (inferred)."""

    def __init__(self, *shape, name=None):
        super().__init__(name)
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        self.shape = tuple(_checks.count(s, "each size", "Reshape", minimum=-1) for s in shape)
        if sum(s == -1 for s in self.shape) > 1 or any(s < -1 for s in self.shape):
            raise errors.ValueError(f"Reshape: the target shape {self.shape} may hold one -1 "
                                    f"and otherwise non-negative sizes")

    def forward(self, x):
        if x.ndim < 1:
            raise errors.ShapeError(f"{self.describe()}: expected input (N, ...), received a "
                                    f"0-d tensor")
        n = x.shape[0]
        per_sample = x.size // n if n else 0
        known = 1  # the product of the sizes given
        for s in self.shape:
            known *= 1 if s == -1 else s
        if -1 in self.shape:
            fits = per_sample % known == 0 if known else per_sample == 0
        else:
            fits = per_sample == known
        if n and not fits:
            raise errors.ShapeError(f"{self.describe()}: cannot reshape input {tuple(x.shape)} "
                                    f"({per_sample} values per sample) into (N,) + "
                                    f"{self.shape}")
        return F.reshape(x, n, *self.shape)

    def extra_repr(self):
        return ", ".join(str(s) for s in self.shape)


class Dropout(Layer):
    """Zeroes each element with probability p and scales the rest by 1 / (1 - p), while the
    layer is training (``layer.training``: its train()/eval() mode, else
    hl.autograd.training); otherwise returns its input unchanged. ``generator`` (an
    hl.random.Generator) makes the masks reproducible independently of hl's default one."""

    def __init__(self, p=0.5, generator=None, name=None):
        super().__init__(name)
        self.p = _checks.number(p, "p (a probability)", "Dropout", 0.0, 1.0)
        self.generator = generator

    def forward(self, x):
        if not self.training or self.p == 0.0:
            return x
        if not x.dtype.is_floating:
            raise errors.DTypeError(f"{self.describe()}: expected a float input, received "
                                    f"{x.dtype.name}")
        return F.dropout(x, self.p, training=True, generator=self.generator)

    def extra_repr(self):
        return f"p={self.p}"


__all__ = ["Identity", "Flatten", "Reshape", "Dropout"]
