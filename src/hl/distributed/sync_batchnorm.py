"""SyncBatchNorm: batch normalisation over the whole global batch of a data-parallel run.

Plain batch norm on N ranks normalises each rank's slice with that slice's statistics, so
the run differs from one process on the union batch. SyncBatchNorm sums the per-channel
statistics over the ranks instead (PyTorch's torch.nn.SyncBatchNorm): in training, the mean
and the variance are those of every rank's samples together, and so are the running
statistics, on every rank.

The statistics are computed in two passes, as one process's batch norm does (the mean, then
the mean squared deviation from it), each pass one allreduce of a C-vector; the allreduce is
an autograd op whose gradient is the allreduce of the ranks' gradients (every rank's loss
depends on every rank's samples through the statistics), so backward makes the same two
collectives in reverse. They use the group's data communicator, not the gradient buckets'
one, so they do not interleave with the bucket reductions of the communication thread.

Alone, in eval() mode or when frozen, it is plain BatchNorm. Every rank must run the layer
in every training step (a rank with no samples in a step would leave the others waiting
until the timeout).
"""
import numpy as np

from .. import errors
from .._tensor import tensor
from ..autograd import no_grad
from ..autograd.function import Function
from ..layers.normalization import BatchNorm1d, BatchNorm2d, _BatchNorm
from .collectives import allreduce_
from .sync import write_
from .world import current


class AllreduceSum(Function):
    """The sum of a tensor over the ranks; its gradient, the sum of the ranks' gradients."""

    def __init__(self, world, what):
        self.world, self.what = world, what

    def _sum(self, t, what):
        arr = np.array(t.numpy(), np.float64)  # a copy, summed in float64
        allreduce_(arr, what, self.world)
        return tensor(arr.astype(t.dtype.np), device=t.device)

    def forward(self, x):
        return self._sum(x, self.what)

    def backward(self, dy):
        return self._sum(dy, self.what + " (backward)")

    def infer(self, x):
        return [(x.shape, x.dtype)]


class SyncBatchNorm(_BatchNorm):
    """``SyncBatchNorm(num_features=None, momentum=0.1, eps=1e-5, affine=True)``: batch
    norm of (N, C), (N, C, L) or (N, C, H, W) inputs whose training statistics cover every
    rank's samples. Parameters, states and momentum as BatchNorm2d."""
    ranks = (2, 3, 4)
    layout = "(N, C), (N, C, L) or (N, C, H, W)"

    def forward(self, x):
        world = current()
        training = self.training and self.trainable
        if not training or world is None or world.size == 1:
            return super().forward(x)
        self._check(x)
        c = x.shape[1]
        axes = (0,) + tuple(range(2, x.ndim))
        shape = (1, c) + (1,) * (x.ndim - 2)
        what = f"{self.describe()}'s batch statistics"
        count = np.array([x.size // c], np.float64)
        allreduce_(count, what, world)
        n = float(count[0])
        if n <= 1:
            raise errors.ValueError(
                f"{self.describe()}: training needs more than one value per channel over "
                f"all ranks to estimate a variance, got {int(n)}")
        mean = AllreduceSum(world, what)(x.sum(axis=axes)) * (1.0 / n)
        centred = x - mean.reshape(shape)
        var = AllreduceSum(world, what)((centred * centred).sum(axis=axes)) * (1.0 / n)
        y = centred * (var + self.eps).rsqrt().reshape(shape)
        if self.affine:
            y = y * self.scale.reshape(shape) + self.bias.reshape(shape)
        with no_grad():  # running statistics as one process: the unbiased variance
            m = self.momentum
            # (write_: numpy() of a cuda tensor is a host copy; written back to the device)
            write_(self.running_mean, (1 - m) * self.running_mean.numpy() + m * mean.numpy())
            write_(self.running_var, (1 - m) * self.running_var.numpy()
                   + m * var.numpy() * (n / (n - 1)))
        return y

    @classmethod
    def convert_sync_batchnorm(cls, module):
        """``module`` with every BatchNorm1d / BatchNorm2d replaced by a SyncBatchNorm of
        the same settings (and the same parameters and running statistics when built);
        PyTorch's torch.nn.SyncBatchNorm.convert_sync_batchnorm. A batch norm given as the
        module itself is returned converted."""
        if isinstance(module, (BatchNorm1d, BatchNorm2d)):
            return _converted(cls, module)
        for _, layer in list(module.named_layers()):
            for name, value in list(layer.__dict__.items()):
                if name.startswith("_"):
                    continue
                if isinstance(value, (BatchNorm1d, BatchNorm2d)):
                    setattr(layer, name, _converted(cls, value))
                elif isinstance(value, list) and any(
                        isinstance(v, (BatchNorm1d, BatchNorm2d)) for v in value):
                    setattr(layer, name, [_converted(cls, v) if isinstance(
                        v, (BatchNorm1d, BatchNorm2d)) else v for v in value])
        return module


def _converted(cls, bn):
    new = cls(bn.num_features, momentum=bn.momentum, eps=bn.eps, affine=bn.affine,
              scale_init=bn.scale_init, bias_init=bn.bias_init, name=bn.name)
    if bn.built:  # the same tensors: parameters, running statistics, frozen or not
        d = new.__dict__
        for key in ("_param_names", "_state_names", "_fixed", "_trainable",
                    "_output_shapes"):
            d[key] = type(bn.__dict__[key])(bn.__dict__[key])
        for local in bn._param_names + bn._state_names:
            d[local] = bn.__dict__[local]
        d["_built"] = True
    else:
        new.__dict__["_trainable"] = bn.__dict__["_trainable"]
    return new
