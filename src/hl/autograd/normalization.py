"""Normalisations with gradients: batch norm and layer norm on the core's kernels, and group
norm / instance norm composed from layer norm.

batch_norm and layer_norm ask the core for the statistics that normalised x (mean and
1/sqrt(var + eps)) and hand them to the core's backward kernels, which differentiate through
the batch statistics in training and treat them as constants otherwise. The running
statistics of batch_norm are not inputs of the op: they are buffers the forward updates in
place (no gradient flows into them), as in PyTorch.

Group norm normalises each sample's channel groups: x (N, C, ...) viewed as (N, G, rest) is
layer norm over the last axis, and the per-channel affine comes after. Instance norm is group
norm with one channel per group. The core has no kernel of their own, so they reuse
layer_norm's forward and backward kernels.
"""
from .. import errors, ops
from ..ops.normalization import _layer_axis
from ._nn import as_input
from .function import Function
from .placeholder import follow

__all__ = ["batch_norm", "layer_norm", "group_norm", "instance_norm"]


def _check_param(p, shape, what, op, x):
    if p is not None and tuple(p.shape) != tuple(shape):
        raise errors.ShapeError(f"{op}: expected {what} of shape {tuple(shape)} for input "
                                f"{tuple(x.shape)}, got {tuple(p.shape)}")


def _param_outs(fn, dy):
    """Where a normalisation's backward writes (dx, dweight, dbias): the engine's
    destinations for the weight and bias (Function.into) when x and dy share their dtype."""
    if fn.grad_into is None or dy.dtype is not fn.x.dtype:
        return (None, None, None)
    return (None, fn.into(1, dy), fn.into(2, dy))


class BatchNorm(Function):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    mean = invstd = None

    def __init__(self, running_mean, running_var, training, momentum, eps):
        self.running_mean, self.running_var = running_mean, running_var
        self.training, self.momentum, self.eps = bool(training), momentum, eps

    def forward(self, x, weight=None, bias=None):
        y, self.mean, self.invstd = ops.batch_norm_forward(
            x, self.running_mean, self.running_var, weight, bias, self.training, self.momentum,
            self.eps, return_stats=True)
        # running_mean/var stay: hl.onnx.to_onnx([x], [y]) exports a training-mode record
        # as the inference BatchNormalization over them
        if self.needs:
            self.x, self.weight = x, weight
        return y

    def backward(self, dy):
        return ops.batch_norm_grad(dy, self.x, self.mean, self.invstd, self.weight,
                                   self.training, needs=self.needs, out=_param_outs(self, dy))


def batch_norm(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, return_stats=False):
    """Batch normalisation of x (N, C, ...) over every axis but the channel axis 1, as
    torch.nn.functional.batch_norm.

    Training normalises with the batch statistics and updates running_mean / running_var in
    place: running = (1 - momentum) * running + momentum * batch, with the unbiased batch
    variance (they may be None, then nothing is tracked). Otherwise the running statistics
    normalise. Gradients flow into x, weight and bias. return_stats=True also returns the
    mean and 1/sqrt(var + eps) that normalised x (no gradient flows through those)."""
    op = "batch_norm"
    x = as_input(x, op)
    weight, bias = as_input(weight, op, "weight", x), as_input(bias, op, "bias", x)
    fn = BatchNorm(running_mean, running_var, training, momentum, eps)
    y = fn(x, weight, bias)
    if not return_stats:
        return y
    return y, follow(fn.mean, y), follow(fn.invstd, y)


class LayerNorm(Function):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    mean = invstd = None

    def __init__(self, normalized_shape, axis, eps):
        self.normalized_shape, self.axis, self.eps = normalized_shape, axis, eps

    def _axis(self, x):
        return _layer_axis(x, self.normalized_shape, self.axis, "layer_norm")

    def forward(self, x, weight=None, bias=None):
        y, self.mean, self.invstd = ops.layer_norm_forward(x, None, weight, bias, self.eps,
                                                   axis=self._axis(x), return_stats=True)
        if self.needs:
            self.x, self.weight = x, weight
        return y

    def backward(self, dy):
        return ops.layer_norm_grad(dy, self.x, self.mean, self.invstd, self.weight,
                                   needs=self.needs, out=_param_outs(self, dy))


def layer_norm(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, axis=None,
               return_stats=False):
    """Layer normalisation over the trailing axes of x, as torch.nn.functional.layer_norm.

    Name them by normalized_shape (the trailing shape; an int n means (n,)) or by axis (the
    first normalised axis). weight, bias: the trailing shape, or None. return_stats=True also
    returns the per-row mean and 1/sqrt(var + eps) (x's leading shape; no gradient)."""
    op = "layer_norm"
    x = as_input(x, op)
    weight, bias = as_input(weight, op, "weight", x), as_input(bias, op, "bias", x)
    fn = LayerNorm(normalized_shape, axis, eps)
    y = fn(x, weight, bias)
    if not return_stats:
        return y
    return y, follow(fn.mean, y), follow(fn.invstd, y)


class GroupNorm(Function):
    """x (N, C, ...) normalised per sample over groups of C / G channels, then
    y = x_hat * weight[c] + bias[c]."""
    autocast = "float32"  # hl.amp (autograd/autocast.py)

    def __init__(self, num_groups, eps, op):
        self.groups, self.eps, self.op = int(num_groups), eps, op

    @property
    def name(self):
        return self.op

    def check(self, x, weight, bias):
        """What the composite means by its arguments (the kernels it calls would only
        complain about reshapes)."""
        op, g = self.op, self.groups
        if x.ndim < 2:
            raise errors.ShapeError(f"{op}: expected input (N, C, ...) of at least 2 dimensions, "
                                    f"got shape {tuple(x.shape)}")
        if g < 1 or x.shape[1] % g:
            raise errors.ShapeError(f"{op}: {x.shape[1]} channels of input {tuple(x.shape)} do "
                                    f"not split into {g} groups")
        _check_param(weight, (x.shape[1],), "weight", op, x)
        _check_param(bias, (x.shape[1],), "bias", op, x)

    def forward(self, x, weight=None, bias=None):
        self.check(x, weight, bias)
        n = x.shape[0]
        rows = ops.reshape_forward(x, n, self.groups, -1)
        xhat, mean, invstd = ops.layer_norm_forward(rows, axis=2, eps=self.eps, return_stats=True)
        xhat = ops.reshape_forward(xhat, *x.shape)
        y = xhat
        if weight is not None:
            y = y * ops.reshape_forward(weight, *self._channel_shape(x))
        if bias is not None:
            y = y + ops.reshape_forward(bias, *self._channel_shape(x))
        if self.needs:
            self.rows, self.mean, self.invstd, self.weight = rows, mean, invstd, weight
            self.xhat = xhat.detach() if self.needs[1] else None  # it may be y itself
            self.x_shape = x.shape
        return y

    @staticmethod
    def _channel_shape(x):
        return (1, x.shape[1]) + (1,) * (x.ndim - 2)

    def backward(self, dy):
        nx, nw, nb = self.needs
        axes = (0,) + tuple(range(2, dy.ndim))
        dx = dw = db = None
        if nx:
            shape = self.x_shape
            dxhat = dy if self.weight is None else \
                dy * ops.reshape_forward(self.weight, 1, shape[1], *([1] * (len(shape) - 2)))
            dxhat = ops.reshape_forward(dxhat, *self.rows.shape)
            dx = ops.layer_norm_grad(dxhat, self.rows, self.mean, self.invstd,
                                     needs=(True, False, False))[0]
            dx = ops.reshape_forward(dx, *shape)
        if nw:
            dw = ops.reduction("sum", dy * self.xhat, axes)
        if nb:
            db = ops.reduction("sum", dy, axes)
        return dx, dw, db


def _group_norm(x, num_groups, weight, bias, eps, op):
    x = as_input(x, op)
    weight, bias = as_input(weight, op, "weight", x), as_input(bias, op, "bias", x)
    return GroupNorm(num_groups, eps, op)(x, weight, bias)


def group_norm(x, num_groups, weight=None, bias=None, eps=1e-5):
    """Group normalisation of x (N, C, ...), as torch.nn.functional.group_norm: the channels
    split into num_groups groups, each sample's group normalised over its channels and
    positions (biased variance), then scaled by weight (C,) and shifted by bias (C,)."""
    return _group_norm(x, num_groups, weight, bias, eps, "group_norm")


def instance_norm(x, running_mean=None, running_var=None, weight=None, bias=None,
                  use_input_stats=True, momentum=0.1, eps=1e-5):
    """Instance normalisation of x (N, C, ...): each sample's channel normalised over its
    positions, as torch.nn.functional.instance_norm with use_input_stats (running
    statistics are not supported: give None)."""
    if running_mean is not None or running_var is not None or not use_input_stats:
        raise errors.ValueError("instance_norm: running statistics are not supported; pass "
                                "running_mean=None, running_var=None, use_input_stats=True")
    x = as_input(x, "instance_norm")
    if x.ndim < 2:
        raise errors.ShapeError(f"instance_norm: expected input (N, C, ...) of at least 2 "
                                f"dimensions, got shape {tuple(x.shape)}")
    return _group_norm(x, x.shape[1], weight, bias, eps, "instance_norm")
