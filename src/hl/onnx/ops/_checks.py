"""Dtype checks the element-wise families share: ONNX types its element-wise operators strictly
(Add takes two tensors of one dtype; comparisons give bool) while hl promotes mixed dtypes as
numpy does, so handlers check the dtypes ONNX allows and an invalid model gets a DTypeError
naming the node instead of an answer of the wrong dtype.
"""

import functools

import numpy as np

from ... import errors
from ..._tensor import tensor as _tensor
from ._util import HALF, via_float32


# ---- checks and dtype plumbing ------------------------------------------------------------

def dtype_kind(x):
    d = x.dtype
    return "float" if d.is_floating else "int" if d.is_integer else "bool"


# What each kind of operand list accepts: "float", "int", "bool", or "num" (float or int).
_ALLOWED = {"float": {"float"}, "int": {"int"}, "bool": {"bool"}, "num": {"float", "int"},
            "any": {"float", "int", "bool"}}


def expect(n, kinds, *xs):
    """Checks that the tensors share one dtype of an allowed kind (None entries are skipped)."""
    xs = [x for x in xs if x is not None]
    if len({x.dtype.name for x in xs}) > 1:
        got = ", ".join(f"{x.dtype.name} {tuple(x.shape)}" for x in xs)
        raise n.error(f"inputs must share one dtype, got {got}", errors.DTypeError)
    if xs and dtype_kind(xs[0]) not in _ALLOWED[kinds]:
        want = {"float": "a floating-point", "int": "an integer", "bool": "a bool",
                "num": "a numeric"}[kinds]
        raise n.error(f"takes {want} dtype, got {xs[0].dtype.name} {tuple(xs[0].shape)}",
                      errors.DTypeError)


def on_cpu_half(x):
    return x is not None and hasattr(x, "dtype") and x.dtype.name in HALF \
        and x.device.kind == "cpu"


def checked_via_float32(fn):
    """_util.via_float32 (float16/bfloat16 on the CPU computed in float32), after checking
    the dtypes: the float32 copies would otherwise hide a float16 + float32 mix."""
    converted = via_float32(fn)

    @functools.wraps(fn)
    def handler(n, *xs):
        if any(on_cpu_half(x) for x in xs):
            expect(n, "any", *xs)
        return converted(n, *xs)
    return handler


def scalar_like(value, x):
    """A 0-d tensor holding ``value`` in x's dtype, on x's device (not _util.const, whose
    np.ascontiguousarray turns a 0-d array into shape (1,))."""
    return _tensor(np.array(value, dtype=x.dtype.np), device=x.device)
