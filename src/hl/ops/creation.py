"""Tensors made from nothing: empty, zeros, ones, full (and their _like forms), arange, eye,
and the triangle kernel behind tril/triu (hl.autograd.creation). The constructors are the
one definition users call (hl.zeros is hl.ops.zeros): they take ``requires_grad=`` as
PyTorch's do."""
import functools
import math

import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from .. import devices as _dev
from ._util import _wrap


def accepts_requires_grad(f):
    """f(..., requires_grad=False): the new tensor is a leaf that records when True."""
    @functools.wraps(f)
    def make(*args, requires_grad=False, **kwargs):
        t = f(*args, **kwargs)
        if requires_grad:
            if not t.dtype.is_floating:
                raise errors.DTypeError(f"{f.__name__}: only floating tensors can require "
                                        f"gradients, this one is {t.dtype.name}")
            t.requires_grad = True
        return t
    return make


def _shape_arg(shape):
    if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
        shape = tuple(shape[0])
    return tuple(int(s) for s in shape)


def empty(*shape, dtype=None, device=None):
    """A tensor whose values are whatever the memory held."""
    d = _dt.dtype(dtype) if dtype is not None else _dt.float32
    dev = _dev.device(device)
    return _wrap(_core.empty(_shape_arg(shape), d.code, dev.code, dev.index), d)


def full(shape, value, dtype=None, device=None):
    if isinstance(shape, int):
        shape = (shape,)
    if dtype is None:
        dtype = _dt.bool_ if isinstance(value, bool) else (
            _dt.int64 if isinstance(value, int) else _dt.float32)
    t = empty(*shape, dtype=dtype, device=device)
    d = t.dtype
    if d.is_integer and isinstance(value, int) and not isinstance(value, bool):
        # exactly, not through a double (int64 holds more than 53 bits); and it must fit
        info = np.iinfo(d.np)
        if not info.min <= value <= info.max:
            raise errors.ValueError(f"full: {value} is out of range for {d.name} "
                                    f"[{info.min}, {info.max}]")
        if t.size:
            t.copy_(_wrap(_core.from_numpy(np.array(value, dtype=d.np), d.code), d))
        return t
    _core.fill(t._h, value)
    return t


def zeros(*shape, dtype=None, device=None):
    return full(_shape_arg(shape), 0, dtype=dtype or _dt.float32, device=device)


def ones(*shape, dtype=None, device=None):
    return full(_shape_arg(shape), 1, dtype=dtype or _dt.float32, device=device)


def empty_like(x, dtype=None, device=None):
    return empty(*x.shape, dtype=dtype or x.dtype, device=device or x.device)


def zeros_like(x, dtype=None, device=None):
    return full(x.shape, 0, dtype=dtype or x.dtype, device=device or x.device)


def ones_like(x, dtype=None, device=None):
    return full(x.shape, 1, dtype=dtype or x.dtype, device=device or x.device)


def full_like(x, value, dtype=None, device=None):
    return full(x.shape, value, dtype=dtype or x.dtype, device=device or x.device)


def arange(start, stop=None, step=1, dtype=None, device=None):
    """Values from start (inclusive) to stop (exclusive) by step, like numpy.arange. Integer
    arguments give int64, any float gives float32 (unless dtype says otherwise)."""
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise errors.ValueError("arange: step must not be zero")
    if not all(math.isfinite(v) for v in (start, stop, step)):
        raise errors.ValueError(f"arange: start, stop and step must be finite, got {start}, "
                                f"{stop}, {step}")
    if dtype is None:
        ints = all(isinstance(v, int) for v in (start, stop, step))
        dtype = _dt.int64 if ints else _dt.float32
    d = _dt.dtype(dtype)
    n = max(0, math.ceil((stop - start) / step))
    dev = _dev.device(device)
    return _wrap(_core.call("arange", float(start), float(step), n, d.code, (dev.code, dev.index),
                            _core.OUT), d)


def eye(n, m=None, k=0, dtype=None, device=None):
    d = _dt.dtype(dtype) if dtype is not None else _dt.float32
    dev = _dev.device(device)
    return _wrap(_core.call("eye", int(n), int(n if m is None else m), int(k), d.code,
                            (dev.code, dev.index), _core.OUT), d)


def triangle(x, k, upper):
    """The core's triangle kernel: the lower (upper=False) or upper triangle of the last two
    axes from diagonal k, the rest zero."""
    return _wrap(_core.call("triangle", x._h, int(k), int(bool(upper)), _core.OUT), x.dtype)


for _name in ("empty", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like",
              "full_like", "arange", "eye"):
    globals()[_name] = accepts_requires_grad(globals()[_name])

__all__ = ["empty", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like",
           "full_like", "arange", "eye", "triangle"]
