"""Normalisation layers: BatchNorm1d, BatchNorm2d, LayerNorm.

Parameters are named as in SINGA: ``scale`` (PyTorch's weight, Keras's gamma) and ``bias``
(beta). Batch norm keeps ``running_mean`` and ``running_var`` as buffers: part of
get_states(), not of get_params().

momentum follows PyTorch: it is the weight of the new batch, running = (1 - momentum) *
running + momentum * batch, with the unbiased batch variance; default 0.1. (SINGA and Keras
give the weight of the running value instead: their momentum=0.9 is momentum=0.1 here.)
"""
from .. import errors
from ..autograd import functional as F
from . import _checks, initializers
from .layer import Layer


class _BatchNorm(Layer):
    ranks = (4,)
    layout = "(N, C, H, W)"

    def __init__(self, num_features=None, momentum=0.1, eps=1e-5, affine=True,
                 scale_init="ones", bias_init="zeros", name=None):
        super().__init__(name)
        kind = type(self).__name__
        self.num_features = _checks.count(num_features, "num_features", kind, optional=True)
        # momentum is the weight of the new batch, as in PyTorch
        self.momentum = _checks.number(momentum, "momentum", kind, 0.0, 1.0)
        self.eps = _checks.number(eps, "eps", kind, 0.0)
        self.affine = bool(affine)
        self.scale_init, self.bias_init = scale_init, bias_init

    def _check(self, x):
        if x.ndim not in self.ranks:
            hint = ""
            if type(self).__name__ == "BatchNorm2d" and x.ndim in (2, 3):
                hint = "; for (N, C) or (N, C, L) inputs use BatchNorm1d"
            elif type(self).__name__ == "BatchNorm1d" and x.ndim == 4:
                hint = "; for (N, C, H, W) inputs use BatchNorm2d"
            raise errors.ShapeError(f"{self.describe()}: expected input {self.layout}, received "
                                    f"shape {tuple(x.shape)}{hint}")
        if self.num_features is not None and x.shape[1] != self.num_features:
            msg = (f"{self.describe()}: expected input with {self.num_features} channels in "
                   f"axis 1 {self.layout}, received shape {tuple(x.shape)}")
            if x.ndim > 2 and x.shape[-1] == self.num_features:
                perm = "x.permute(0, 3, 1, 2)" if x.ndim == 4 else "x.permute(0, 2, 1)"
                msg += f"; did you mean channels-last? Transpose with {perm}."
            raise errors.ShapeError(msg)

    def initialize(self, x):
        self._check(x)
        c = x.shape[1]
        self.num_features = c
        if self.affine:
            self.add_param("scale", (c,), self.scale_init, x.dtype, x.device)
            self.add_param("bias", (c,), self.bias_init, x.dtype, x.device)
        self.add_state("running_mean", initializers.zeros((c,), x.dtype, x.device))
        self.add_state("running_var", initializers.ones((c,), x.dtype, x.device))

    def forward(self, x):
        self._check(x)
        training = self.training and self.trainable  # Keras: a frozen batch norm infers
        if training and x.size // max(x.shape[1], 1) <= 1:
            raise errors.ValueError(
                f"{self.describe()}: training needs more than one value per channel to "
                f"estimate a variance, received shape {tuple(x.shape)}; use a larger batch or "
                f"call eval() to normalise with the running statistics")
        scale = self.scale if self.affine else None
        bias = self.bias if self.affine else None
        return F.batch_norm(x, self.running_mean, self.running_var, scale, bias,
                            training=training, momentum=self.momentum, eps=self.eps)

    def extra_repr(self):
        return f"{self.num_features}, momentum={self.momentum}, eps={self.eps}" + \
            ("" if self.affine else ", affine=False")


class BatchNorm1d(_BatchNorm):
    """Batch normalisation of (N, C) or (N, C, L) inputs over every axis but C. In train()
    mode it normalises with the batch's statistics and updates the running ones; in eval()
    mode it uses the running statistics."""
    ranks = (2, 3)
    layout = "(N, C) or (N, C, L)"


class BatchNorm2d(_BatchNorm):
    """Batch normalisation of (N, C, H, W) inputs over (N, H, W), per channel; see
    BatchNorm1d for the modes."""
    ranks = (4,)
    layout = "(N, C, H, W)"


class LayerNorm(Layer):
    """Layer normalisation over the trailing axes: ``LayerNorm()`` normalises over the last
    axis (its size learnt on the first call), ``LayerNorm(normalized_shape)`` over trailing
    axes of that shape (as torch.nn.LayerNorm). With elementwise_affine, a per-element scale
    (ones) and bias (zeros) of that shape."""

    def __init__(self, normalized_shape=None, eps=1e-5, elementwise_affine=True,
                 scale_init="ones", bias_init="zeros", name=None):
        super().__init__(name)
        if normalized_shape is not None:
            if not isinstance(normalized_shape, (tuple, list)):
                normalized_shape = (normalized_shape,)
            normalized_shape = tuple(_checks.count(s, "normalized_shape", "LayerNorm")
                                     for s in normalized_shape)
            if not normalized_shape:
                raise errors.ValueError("LayerNorm: normalized_shape must not be empty")
        self.normalized_shape = normalized_shape
        self.eps = _checks.number(eps, "eps", "LayerNorm", 0.0)
        self.elementwise_affine = bool(elementwise_affine)
        self.scale_init, self.bias_init = scale_init, bias_init

    def _check(self, x):
        shp = self.normalized_shape
        if x.ndim < len(shp) or tuple(x.shape[x.ndim - len(shp):]) != shp:
            raise errors.ShapeError(f"{self.describe()}: expected input whose trailing shape is "
                                    f"{shp}, received shape {tuple(x.shape)}")

    def initialize(self, x):
        if x.ndim < 1:
            raise errors.ShapeError(f"{self.describe()}: expected input (..., features), "
                                    f"received a 0-d tensor")
        if self.normalized_shape is None:
            self.normalized_shape = (x.shape[-1],)
        self._check(x)
        if self.elementwise_affine:
            self.add_param("scale", self.normalized_shape, self.scale_init, x.dtype, x.device)
            self.add_param("bias", self.normalized_shape, self.bias_init, x.dtype, x.device)

    def forward(self, x):
        self._check(x)
        scale = self.scale if self.elementwise_affine else None
        bias = self.bias if self.elementwise_affine else None
        return F.layer_norm(x, self.normalized_shape, scale, bias, self.eps)

    def extra_repr(self):
        return f"{self.normalized_shape}, eps={self.eps}" + \
            ("" if self.elementwise_affine else ", elementwise_affine=False")


__all__ = ["BatchNorm1d", "BatchNorm2d", "LayerNorm"]
