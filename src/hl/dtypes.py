"""hl's dtypes and their numpy counterparts, and the rules for mixing them.

Dtypes are singletons (``hl.float32`` ...); ``hl.dtype(x)`` accepts a DType, a name, a numpy
dtype or a Python type. Promotion follows numpy between tensors; a Python scalar is "weak"
(it takes the tensor's dtype), except that a float scalar with an integer or bool tensor gives
float32, PyTorch's default float type (numpy would give float64). An int scalar must fit the
tensor's integer dtype (hl.errors.ValueError otherwise, as numpy's NEP 50 has it) and keeps
all its bits (it does not pass through a double).
"""
import numpy as np

from . import errors

try:  # bfloat16 for numpy comes with ml_dtypes, which onnx depends on
    import ml_dtypes

    _BF16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover
    _BF16 = None


class DType:
    __slots__ = ("name", "code", "np", "itemsize", "is_floating", "is_integer")

    def __init__(self, name, code, np_dtype, itemsize, is_floating, is_integer):
        self.name, self.code, self.np, self.itemsize = name, code, np_dtype, itemsize
        self.is_floating, self.is_integer = is_floating, is_integer

    def __repr__(self):
        return f"hl.{self.name}"

    def __reduce__(self):  # pickles as the singleton
        return (dtype, (self.name,))


# codes match hl_dtype in hl_core.h
float32 = DType("float32", 0, np.dtype(np.float32), 4, True, False)
float64 = DType("float64", 1, np.dtype(np.float64), 8, True, False)
int32 = DType("int32", 2, np.dtype(np.int32), 4, False, True)
int64 = DType("int64", 3, np.dtype(np.int64), 8, False, True)
uint8 = DType("uint8", 4, np.dtype(np.uint8), 1, False, True)
bool_ = DType("bool", 5, np.dtype(np.bool_), 1, False, False)
float16 = DType("float16", 6, np.dtype(np.float16), 2, True, False)
bfloat16 = DType("bfloat16", 7, _BF16, 2, True, False)

ALL = (float32, float64, int32, int64, uint8, bool_, float16, bfloat16)
BY_CODE = {d.code: d for d in ALL}
_BY_NAME = {d.name: d for d in ALL}
_BY_NAME.update({"float": float32, "double": float64, "half": float16, "int": int64,
                 "long": int64, "bool_": bool_, "f4": float32, "f8": float64})
_BY_NP = {d.np: d for d in ALL if d.np is not None}


def dtype(x):
    """The hl DType for x: a DType, a name ("float32"), a numpy dtype or a Python type."""
    if isinstance(x, DType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    if x is float:
        return float32
    if x is int:
        return int64
    if x is bool:
        return bool_
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NP:
        return _BY_NP[npd]
    raise errors.DTypeError(
        f"unknown dtype {x!r}; hl has {', '.join(d.name for d in ALL)}")


def from_numpy(npd):
    """The hl DType for a numpy dtype, or a DTypeError naming it."""
    d = _BY_NP.get(np.dtype(npd))
    if d is None:
        raise errors.DTypeError(
            f"numpy dtype {np.dtype(npd)} has no hl equivalent; "
            f"hl has {', '.join(d.name for d in ALL)}")
    return d


def promote(a, b):
    """The dtype two tensors of dtypes a and b combine to (numpy's rules)."""
    if a is b:
        return a
    if bfloat16 in (a, b):
        other = b if a is bfloat16 else a
        return bfloat16 if not other.is_floating else (float32 if other is float16 else other)
    return from_numpy(np.promote_types(a.np, b.np))


def promote_scalar(t, value):
    """The dtype of a tensor of dtype t combined with the Python scalar value."""
    if isinstance(value, bool):
        return t
    if isinstance(value, int):
        return int64 if t is bool_ else t
    if isinstance(value, float):
        return t if t.is_floating else float32
    raise errors.DTypeError(f"cannot combine a tensor of {t.name} with {type(value).__name__}")
