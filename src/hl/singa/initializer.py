"""SINGA's initializer module: fill a tensor in place, with hl's initialisers.

``he_uniform(t)``, ``glorot_normal(t)`` ... draw with hl.layers.initializers (the same fans:
(in, out) for 2-D, (out, in, *kernel) for convolution weights) and copy into t; ``eye`` and
``orthogonal`` are numpy's, as in SINGA.
"""
import math

import numpy as np

from .. import errors
from ..layers import initializers as _init
from .. import autograd as _ag


def _fill(t, init):
    with _ag.no_grad():
        t.copy_(init(tuple(t.shape), t.dtype, t.device))
    return t


def lecun_uniform(t):
    return _fill(t, _init.lecun_uniform)


def lecun_normal(t):
    return _fill(t, _init.lecun_normal)


def glorot_uniform(t):
    return _fill(t, _init.glorot_uniform)


def glorot_normal(t):
    return _fill(t, _init.glorot_normal)


def he_uniform(t):
    return _fill(t, _init.he_uniform)


def he_normal(t):
    return _fill(t, _init.he_normal)


def _matrix(t, who):
    if len(t.shape) != 2:
        raise errors.ShapeError(f"initializer.{who}: only 2-D tensors, got shape "
                                f"{tuple(t.shape)}")


def eye(t):
    _matrix(t, "eye")
    t.copy_from(np.eye(t.shape[0], t.shape[1], dtype=np.float32))
    return t


def orthogonal(t, gain=1.0):
    _matrix(t, "orthogonal")
    a = np.random.normal(0.0, 1.0, tuple(t.shape))
    u, _, v = np.linalg.svd(a, full_matrices=False)
    q = (u if u.shape == tuple(t.shape) else v) * gain
    t.copy_from(q.astype(np.float32))
    return t


def gaussian(t, fan_in=0, fan_out=0):
    """N(0, 2 * avg / (fan_in + fan_out)), avg = 2 unless one fan is 0 (SINGA's older rule)."""
    if fan_in <= 0 and fan_out <= 0:
        raise errors.ValueError("initializer.gaussian: fan_in and fan_out cannot both be 0")
    avg = 1 if fan_in * fan_out == 0 else 2
    return t.gaussian(0.0, math.sqrt(2.0 * avg / (fan_in + fan_out)))


def xavier(t):
    scale = math.sqrt(6.0 / (t.shape[0] + t.shape[1]))
    return t.uniform(-scale, scale)


def glorot(t):
    return t.gaussian(0.0, math.sqrt(2.0 / (t.shape[0] + t.shape[1])))


def msra(t):
    return t.gaussian(0.0, math.sqrt(2.0 / t.shape[0]))


__all__ = ["eye", "orthogonal", "lecun_uniform", "lecun_normal", "glorot_uniform",
           "glorot_normal", "he_uniform", "he_normal", "gaussian", "xavier", "glorot", "msra"]
