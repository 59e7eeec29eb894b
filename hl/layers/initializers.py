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


def constant(value):
    def init(shape, dtype, device):
        return ops.full(tuple(shape), value, dtype=dtype, device=device)
    init.__name__ = f"constant({value})"
    return init


def uniform(low=-0.05, high=0.05):
    def init(shape, dtype, device):
        return ops.uniform(*shape, low=low, high=high, dtype=dtype, device=device)
    init.__name__ = f"uniform({low}, {high})"
    return init


def normal(mean=0.0, std=0.05):
    def init(shape, dtype, device):
        return ops.normal(*shape, mean=mean, std=std, dtype=dtype, device=device)
    init.__name__ = f"normal({mean}, {std})"
    return init


def _scaled_uniform(scale, fan):
    def init(shape, dtype, device):
        limit = math.sqrt(3.0 * scale / max(fan(shape), 1))
        return ops.uniform(*shape, low=-limit, high=limit, dtype=dtype, device=device)
    return init


def _scaled_normal(scale, fan):
    def init(shape, dtype, device):
        std = math.sqrt(scale / max(fan(shape), 1))
        return ops.normal(*shape, std=std, dtype=dtype, device=device)
    return init


def _fan_in(shape):
    return fans(shape)[0]


def _fan_avg(shape):
    a, b = fans(shape)
    return (a + b) / 2.0


glorot_uniform = _scaled_uniform(1.0, _fan_avg)   # U(-sqrt(6 / (in + out)), +...)
glorot_normal = _scaled_normal(1.0, _fan_avg)     # N(0, 2 / (in + out))
he_uniform = _scaled_uniform(2.0, _fan_in)        # U(-sqrt(6 / in), +...)
he_normal = _scaled_normal(2.0, _fan_in)          # N(0, 2 / in)
lecun_uniform = _scaled_uniform(1.0, _fan_in)     # U(-sqrt(3 / in), +...)
lecun_normal = _scaled_normal(1.0, _fan_in)       # N(0, 1 / in)
torch_default = _scaled_uniform(1.0 / 3.0, _fan_in)  # U(-1/sqrt(in), +...): nn.Linear, nn.Conv

BY_NAME = {
    "zeros": zeros, "ones": ones, "glorot_uniform": glorot_uniform,
    "glorot_normal": glorot_normal, "xavier_uniform": glorot_uniform,
    "xavier_normal": glorot_normal, "he_uniform": he_uniform, "he_normal": he_normal,
    "kaiming_uniform": he_uniform, "kaiming_normal": he_normal, "lecun_uniform": lecun_uniform,
    "lecun_normal": lecun_normal, "uniform": uniform(), "normal": normal(),
    "torch_default": torch_default,
}
for _name, _f in BY_NAME.items():
    if not hasattr(_f, "__name__") or _f.__name__ in ("init", "<lambda>"):
        _f.__name__ = _name


def get(init):
    """An initialiser from a name, a callable, or a number (a constant)."""
    if callable(init):
        return init
    if isinstance(init, (int, float)) and not isinstance(init, bool):
        return constant(init)
    f = BY_NAME.get(init) if isinstance(init, str) else None
    if f is None:
        raise errors.ValueError(f"unknown initialiser {init!r}; use one of "
                                f"{sorted(BY_NAME)}, a number or a callable "
                                f"(shape, dtype, device) -> Tensor")
    return f
