"""Parameter initialisers, by name or as callables.

An initialiser is called as ``init(shape, dtype, device)`` and returns a new Tensor. Names
follow Keras (``glorot_uniform``, ``he_normal``, ...) with PyTorch's spellings as aliases
(``xavier_uniform``, ``kaiming_normal``). Fans follow both: for a weight of shape
(out, in, *kernel) fan_in = in * prod(kernel) and fan_out = out * prod(kernel); a 2-D
weight is (in, out) here (hl's Linear stores W as (in_features, out_features), as Keras and
SINGA do), so its fan_in is shape[0].
Draws use hl's default random generator: ``hl.manual_seed(n)`` makes them reproducible.
"""
import math

from .. import errors, ops


def fans(shape):
    """(fan_in, fan_out) of a weight shape."""
    shape = tuple(shape)
    if len(shape) == 0:
        return 1, 1
    if len(shape) == 1:
        return shape[0], shape[0]
    if len(shape) == 2:
        return shape[0], shape[1]
    receptive = math.prod(shape[2:])
    return shape[1] * receptive, shape[0] * receptive


def zeros(shape, dtype, device):
    return ops.zeros(*shape, dtype=dtype, device=device)


def ones(shape, dtype, device):
    return ops.ones(*shape, dtype=dtype, device=device)


class Initializer:
    """An initialiser with parameters. A class rather than a closure so that layers holding
    one can be pickled by hl.save."""

    def __call__(self, shape, dtype, device):
        raise NotImplementedError

    def __repr__(self):
        return self.__name__


class Constant(Initializer):
    def __init__(self, value):
        self.value = value
        self.__name__ = f"constant({value})"

    def __call__(self, shape, dtype, device):
        return ops.full(tuple(shape), self.value, dtype=dtype, device=device)


class Uniform(Initializer):
    def __init__(self, low=-0.05, high=0.05):
        self.low, self.high = low, high
        self.__name__ = f"uniform({low}, {high})"

    def __call__(self, shape, dtype, device):
        return ops.uniform(*shape, low=self.low, high=self.high, dtype=dtype, device=device)


class Normal(Initializer):
    def __init__(self, mean=0.0, std=0.05):
        self.mean, self.std = mean, std
        self.__name__ = f"normal({mean}, {std})"

    def __call__(self, shape, dtype, device):
        return ops.normal(*shape, mean=self.mean, std=self.std, dtype=dtype, device=device)


def _fan_in(shape):
    return fans(shape)[0]


def _fan_avg(shape):
    a, b = fans(shape)
    return (a + b) / 2.0


class VarianceScaling(Initializer):
    """Variance scale / fan(shape), from a uniform or a normal distribution."""

    def __init__(self, name, scale, fan, distribution):
        self.__name__, self.scale, self.fan, self.distribution = name, scale, fan, distribution

    def __call__(self, shape, dtype, device):
        variance = self.scale / max(self.fan(shape), 1)
        if self.distribution == "uniform":
            limit = math.sqrt(3.0 * variance)
            return ops.uniform(*shape, low=-limit, high=limit, dtype=dtype, device=device)
        return ops.normal(*shape, std=math.sqrt(variance), dtype=dtype, device=device)


constant, uniform, normal = Constant, Uniform, Normal  # the function-style names

glorot_uniform = VarianceScaling("glorot_uniform", 1.0, _fan_avg, "uniform")  # U(+-sqrt(6/(in+out)))
glorot_normal = VarianceScaling("glorot_normal", 1.0, _fan_avg, "normal")     # N(0, 2/(in+out))
he_uniform = VarianceScaling("he_uniform", 2.0, _fan_in, "uniform")           # U(+-sqrt(6/in))
he_normal = VarianceScaling("he_normal", 2.0, _fan_in, "normal")              # N(0, 2/in)
lecun_uniform = VarianceScaling("lecun_uniform", 1.0, _fan_in, "uniform")     # U(+-sqrt(3/in))
lecun_normal = VarianceScaling("lecun_normal", 1.0, _fan_in, "normal")        # N(0, 1/in)
# U(-1/sqrt(in), +1/sqrt(in)): what nn.Linear and nn.Conv use
torch_default = VarianceScaling("torch_default", 1.0 / 3.0, _fan_in, "uniform")

BY_NAME = {
    "zeros": zeros, "ones": ones, "glorot_uniform": glorot_uniform,
    "glorot_normal": glorot_normal, "xavier_uniform": glorot_uniform,
    "xavier_normal": glorot_normal, "he_uniform": he_uniform, "he_normal": he_normal,
    "kaiming_uniform": he_uniform, "kaiming_normal": he_normal, "lecun_uniform": lecun_uniform,
    "lecun_normal": lecun_normal, "uniform": Uniform(), "normal": Normal(),
    "torch_default": torch_default,
}


def get(init):
    """An initialiser from a name, a callable, or a number (a constant)."""
    if callable(init):
        return init
    if isinstance(init, (int, float)) and not isinstance(init, bool):
        return Constant(init)
    f = BY_NAME.get(init) if isinstance(init, str) else None
    if f is None:
        raise errors.ValueError(f"unknown initialiser {init!r}; use one of "
                                f"{sorted(BY_NAME)}, a number or a callable "
                                f"(shape, dtype, device) -> Tensor")
    return f
