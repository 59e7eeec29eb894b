"""The element-wise kernels: libcore's unary, binary and where entry points.

These are the plain calls of the kernels, with the dtype rules C leaves to the caller
(integer inputs of float functions compute in float32, rounding is the identity on integers,
numpy promotion between operands). The ops users call (``hl.exp``, ``hl.add``, ``hl.where``,
``hl.clip``...) are defined once, with their gradients, in hl.autograd.elementwise; their
plain (no tape) calls and their Functions' forward and backward end here. Backward kernels
that are binary ops of the core (``relu_grad``) are called by name through ``binary``.
"""
from .. import _core
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, into, operands

__all__ = ["unary", "binary", "select", "relu_grad"]

_FLOAT_RESULT = {"exp", "log", "sqrt", "rsqrt", "reciprocal", "sin", "cos", "tan", "asin",
                 "acos", "atan", "sinh", "cosh", "tanh", "asinh", "acosh", "atanh", "erf",
                 "expm1", "log1p", "sigmoid", "relu", "leaky_relu", "elu", "celu", "selu",
                 "gelu", "gelu_tanh", "softplus", "softsign", "hard_sigmoid", "hard_swish",
                 "mish"}
_KEEP_INT = {"floor", "ceil", "round", "trunc"}  # identity on integers, as in numpy


def unary(name, x, alpha=0.0, beta=0.0, out=None):
    """The core's unary kernel `name` (a row of libcore/src/ops.h) on x; alpha and beta are
    the parameters of the ops that take them (leaky_relu's slope, clip's bounds...)."""
    if not isinstance(x, Tensor):
        x = as_tensor(x)
    if name in _FLOAT_RESULT and not x._dtype.is_floating:
        x = x.astype(_dt.float32)  # integer input computes in float32, as in PyTorch
    elif name in _KEEP_INT and not x._dtype.is_floating:
        return x.clone()
    return _wrap(_core.unary(_core.OPS[name], x._h, alpha, beta, into(out)))


def binary(name, a, b, out=None):
    """The core's binary kernel `name` on a and b, promoted to one dtype (numpy rules,
    Python scalars weak) and broadcast."""
    a, b = operands(a, b)
    return _wrap(_core.binary(_core.OPS[name], a._h, b._h, into(out)))


def relu_grad(dy, y):
    """relu's backward kernel: dy where y > 0, else 0."""
    return binary("relu_grad", dy, y)


def select(cond, a, b, out=None):
    """The core's where kernel: a where cond, else b (cond bool or uint8; a and b one dtype,
    the three broadcast)."""
    if not isinstance(cond, Tensor):
        cond = as_tensor(cond, dtype=_dt.bool_)
    elif cond._dtype not in (_dt.bool_, _dt.uint8):
        cond = cond.astype(_dt.bool_)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = as_tensor(a, device=cond.device)
    a, b = operands(a, b)
    return _wrap(_core.call("where", cond._h, a._h, b._h, _core.out(into(out))))
