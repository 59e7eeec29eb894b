"""Activation layers: thin Layer wrappers over the element-wise functions (and softmax), for
use in Sequential and wherever a layer object reads better than a function call."""
from .. import errors
from ..autograd import functional as F
from . import activations
from .layer import Layer


class Activation(Layer):
    """Keras's ``Activation("relu")``: any activation of the registry
    (hl.layers.activations), or a callable, as a layer."""

    def __init__(self, activation, name=None):
        super().__init__(name)
        self.activation = activations.checked(activation, "Activation")

    def forward(self, x):
        return activations.apply(self.activation, x)

    def extra_repr(self):
        return repr(activations.name_of(self.activation))


class _Activation(Layer):
    """An activation without parameters: forward applies `_fn`; the public attributes set
    in __init__ (alpha, axis...) show in repr."""

    def forward(self, x):
        return self._fn(x)

    def extra_repr(self):
        return ", ".join(f"{k}={v!r}" for k, v in self.__dict__.items()
                         if not k.startswith("_") and k != "name")


class ReLU(_Activation):
    """max(x, 0)."""

    def _fn(self, x):
        return F.relu(x)


class LeakyReLU(_Activation):
    """x where x > 0, else negative_slope * x."""

    def __init__(self, negative_slope=0.01, name=None):
        super().__init__(name)
        self.negative_slope = float(negative_slope)

    def _fn(self, x):
        return F.leaky_relu(x, self.negative_slope)


class ELU(_Activation):
    """x where x > 0, else alpha * (exp(x) - 1)."""

    def __init__(self, alpha=1.0, name=None):
        super().__init__(name)
        self.alpha = float(alpha)

    def _fn(self, x):
        return F.elu(x, self.alpha)


class SELU(_Activation):
    """Scaled ELU with the self-normalising constants (as torch.nn.SELU)."""

    def _fn(self, x):
        return F.selu(x)


class GELU(_Activation):
    """x * Phi(x); approximate='tanh' for the tanh approximation."""

    def __init__(self, approximate="none", name=None):
        super().__init__(name)
        if approximate not in ("none", "tanh"):
            raise errors.ValueError(f"GELU: approximate must be 'none' or 'tanh', got "
                                    f"{approximate!r}")
        self.approximate = approximate

    def _fn(self, x):
        return F.gelu(x, self.approximate)


class Sigmoid(_Activation):
    """1 / (1 + exp(-x))."""

    def _fn(self, x):
        return F.sigmoid(x)


class Tanh(_Activation):
    def _fn(self, x):
        return F.tanh(x)


class Softplus(_Activation):
    """log(1 + exp(x))."""

    def _fn(self, x):
        return F.softplus(x)


class SiLU(_Activation):
    """x * sigmoid(x) (also called Swish)."""

    def _fn(self, x):
        return x * F.sigmoid(x)


Swish = SiLU


class Mish(_Activation):
    """x * tanh(softplus(x))."""

    def _fn(self, x):
        return F.mish(x)


class HardSigmoid(_Activation):
    """clip(x / 6 + 1 / 2, 0, 1), as torch.nn.Hardsigmoid."""

    def _fn(self, x):
        return F.hard_sigmoid(x, 1.0 / 6.0, 0.5)


class HardSwish(_Activation):
    """x * hard_sigmoid(x), as torch.nn.Hardswish."""

    def _fn(self, x):
        return F.hard_swish(x)


class Softmax(_Activation):
    """exp(x) / sum(exp(x)) along `axis` (the last by default)."""

    def __init__(self, axis=-1, name=None):
        super().__init__(name)
        self.axis = int(axis)

    def _fn(self, x):
        _check_axis(self, x)
        return F.softmax(x, self.axis)


class LogSoftmax(Softmax):
    """log(softmax(x)) along `axis`, computed stably."""

    def _fn(self, x):
        _check_axis(self, x)
        return F.log_softmax(x, self.axis)


def _check_axis(layer, x):
    if not -x.ndim <= layer.axis < max(x.ndim, 1):
        raise errors.IndexError(f"{layer.describe()}: axis {layer.axis} is out of range for "
                                f"an input of shape {tuple(x.shape)}")


__all__ = ["Activation", "ReLU", "LeakyReLU", "ELU", "SELU", "GELU", "Sigmoid", "Tanh", "Softplus", "SiLU",
           "Swish", "Mish", "HardSigmoid", "HardSwish", "Softmax", "LogSoftmax"]
