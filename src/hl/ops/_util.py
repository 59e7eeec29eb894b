"""Helpers shared by the op families: wrapping core handles, turning arguments into tensors,
normalising axes."""
import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from .._tensor import Tensor, _wrap, as_tensor

__all__ = ["Tensor", "_wrap", "as_tensor", "scalar_like", "operands", "norm_axis", "norm_axes",
           "into", "core", "one_definition_each"]

core = _core


# 0-d tensors for Python scalars, reused: `x * 2.0` in a loop makes no new tensor after the
# first. They are never handed to users, so nothing writes into them. The key tells 0.0 from
# -0.0 (float.hex) and a NaN is never cached (NaN != NaN would make every lookup miss).
_SCALARS = {}
_SCALARS_MAX = 1024


def scalar_like(value, dtype, like):
    """A 0-d tensor holding value, of dtype, on like's device (shared: do not write into
    it). A Python int goes into an integer dtype exactly (not through a double) and must fit
    it, as in numpy (NEP 50)."""
    device = _core.device_of(like._h)
    if type(value) is float:
        if value != value:
            return _make_scalar(value, dtype, device)
        key = (value.hex(), dtype.code, device)
    else:
        key = (type(value), value, dtype.code, device)
    t = _SCALARS.get(key)
    if t is None:
        if len(_SCALARS) >= _SCALARS_MAX:
            _SCALARS.clear()
        t = _SCALARS[key] = _make_scalar(value, dtype, device)
    return t


def _make_scalar(value, dtype, device):
    # Written from the host, not filled by a core op: a constant is there at once, also while
    # a plan is being recorded (a recorded fill would only run on replay).
    if dtype.is_integer and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype.np)
        if not info.min <= value <= info.max:
            raise errors.ValueError(f"Python integer {value} is out of range for {dtype.name} "
                                    f"[{info.min}, {info.max}]; cast the tensor first")
    with np.errstate(over="ignore", invalid="ignore"):
        arr = np.array(value, dtype=np.float64 if dtype.is_floating else None).astype(dtype.np)
    return _wrap(_core.from_numpy(arr, dtype.code, *device), dtype)


def operands(a, b):
    """a and b as tensors of one dtype (numpy promotion; Python scalars are weak)."""
    if isinstance(a, Tensor):
        if isinstance(b, Tensor):
            if a._dtype is b._dtype:
                return a, b
            d = _dt.promote(a._dtype, b._dtype)
            return (a if a._dtype is d else a.astype(d)), (b if b._dtype is d else b.astype(d))
        if isinstance(b, (int, float, bool)):
            d = _dt.promote_scalar(a._dtype, b)
            return (a if a._dtype is d else a.astype(d)), scalar_like(b, d, a)
        return operands(a, as_tensor(b, device=a.device))
    if isinstance(b, Tensor):
        y, x = operands(b, a)
        return x, y
    return operands(as_tensor(a), b)


def norm_axis(axis, ndim, op="op"):
    axis = int(axis)
    if not -ndim <= axis < max(ndim, 1):
        raise errors.IndexError(f"{op}: axis {axis} is out of range for a tensor of {ndim} "
                                f"dimensions")
    return axis + ndim if axis < 0 else axis


def norm_axes(axis, ndim, op="op"):
    """A sorted tuple of distinct non-negative axes; None means all of them."""
    if axis is None:
        return tuple(range(ndim))
    if isinstance(axis, int):
        axis = (axis,)
    out = sorted({norm_axis(a, ndim, op) for a in axis})
    if len(out) != len(tuple(axis)):
        raise errors.ValueError(f"{op}: repeated axis in {tuple(axis)}")
    return tuple(out)


def into(out):
    """The core handle to write a result into, or None."""
    if out is None:
        return None
    if not isinstance(out, Tensor):
        raise errors.ValueError(f"out= must be an hl Tensor, got {type(out).__name__}")
    return out._h


def one_definition_each(namespace, modules, extra=None):
    """{name: object} of every name in the modules' ``__all__`` (and `extra`, {name: object}
    handed on from elsewhere), for a package namespace (hl.ops, hl.autograd.functional).
    A name offered twice raises ImportError: no import order picks a winner."""
    owners = {}
    for module in modules:
        for name in module.__all__:
            if name in owners:
                raise ImportError(f"{namespace}: {name!r} is defined by both "
                                  f"{owners[name].__name__} and {module.__name__}")
            owners[name] = module
    table = {name: getattr(module, name) for name, module in owners.items()}
    for name, obj in (extra or {}).items():
        if name in table:
            raise ImportError(f"{namespace}: {name!r} is defined by {owners[name].__name__} "
                              f"and handed on from elsewhere too")
        table[name] = obj
    return table
