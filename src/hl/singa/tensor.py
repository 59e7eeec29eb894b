"""SINGA's tensor module over hl.Tensor.

``Tensor`` is an hl.Tensor with SINGA's constructor and methods, so every hl op, layer and
optimiser takes it as it is, and SINGA's spellings work on it: ``Tensor(shape, dev, dtype)``,
``Tensor(device=dev, data=ndarray)``, ``t.copy_from_numpy(a)``, ``t.gaussian(0, 1)``,
``t.data`` (the raw "CTensor", see singa_wrap), ``t.ndim()`` / ``t.size()`` (SINGA's methods,
which are still numbers for hl's code), in-place ``+=`` ... The module-level functions are
SINGA's (``from_numpy``, ``to_numpy``, ``add``, ``mult``, ``sum``, ``softmax`` ...), each
one hl op; results come back as this Tensor.

Differences from SINGA are listed in docs/singa.md; the main ones: a new tensor without data
is zero-filled (SINGA leaves it unset), ``requires_grad`` defaults to True as in SINGA but
ops record whenever hl's grad mode is on (SINGA records only while autograd.training).
"""
import numpy as np

from .. import errors, ops
from .. import autograd as _ag
from .._tensor import Tensor as _HLTensor, _wrap
from ..autograd import functional as F
from . import singa_wrap as _sw
from ._pytensor import (CTensor, PlaceHolder, Tensor, _dtype,  # noqa: F401
                        _operand, _py, float16, float32, int32, to_numpy)


# ---- module functions ------------------------------------------------------------------------

def from_raw_tensor(t):
    """A Tensor over a raw tensor's memory."""
    v = _wrap(t._h, t._dtype)
    v.__class__ = Tensor
    v.requires_grad = True
    return v


def from_raw_tensors(tt):
    return [from_raw_tensor(t) for t in tt]


def zeros_like(t):
    return _py(ops.zeros(*t.shape, dtype=t.dtype, device=t.device))


def ones_like(t):
    return _py(ops.ones(*t.shape, dtype=t.dtype, device=t.device))


def product(shape):
    n = 1
    for s in shape:
        n *= int(s)
    return n


def sizeof(dtype):
    return _dtype(dtype).itemsize


def contiguous(t):
    return _py(t.contiguous())


def reshape(t, shape):
    return _py(F.reshape(t, *shape))


def transpose(t, axes=None):
    if axes is None:
        return _py(F.transpose(t))
    return _py(F.permute(t, *axes))


def copy_data_to_from(dst, src, size, dst_offset=0, src_offset=0):
    """Copies `size` elements of src (from src_offset) into dst (from dst_offset)."""
    s = np.asarray(src.cpu()).reshape(-1)[int(src_offset):int(src_offset) + int(size)]
    if s.size != size or dst_offset + size > dst.size:
        raise errors.ShapeError(f"copy_data_to_from: {size} elements from offset "
                                f"{src_offset} of {tuple(src.shape)} into offset {dst_offset} of "
                                f"{tuple(dst.shape)} do not fit")
    d = np.array(dst.cpu()).reshape(-1)
    d[int(dst_offset):int(dst_offset) + int(size)] = s
    with _ag.no_grad():
        _HLTensor.copy_(dst, _HLTensor(d.reshape(dst.shape)))


def from_numpy(np_array, dev=None):
    """A Tensor holding a copy of the array (float64 -> float32, int64 -> int32, as SINGA)."""
    if not isinstance(np_array, np.ndarray):
        raise errors.ValueError(f"from_numpy: expected a numpy array, got "
                                f"{type(np_array).__name__}")
    return Tensor(device=dev, data=np_array)


def to_host(t):
    return _py(t.detach().cpu().clone())


def _unary(f):
    def fn(t):
        return _py(f(t))
    fn.__name__ = f.__name__
    return fn


abs = _unary(F.abs)  # noqa: A001 - SINGA's names
exp = _unary(F.exp)
ceil = _unary(F.ceil)
log = _unary(F.log)
sigmoid = _unary(F.sigmoid)
sign = _unary(F.sign)
sqrt = _unary(F.sqrt)
square = _unary(F.square)
tanh = _unary(F.tanh)
floor = _unary(F.floor)
relu = _unary(F.relu)


def _out(ret, out):
    if out is None:
        return ret
    if tuple(out.shape) != tuple(ret.shape):
        raise errors.ShapeError(f"out has shape {tuple(out.shape)}, the result "
                                f"{tuple(ret.shape)}")
    with _ag.no_grad():
        _HLTensor.copy_(out, ret)
    return out


def sum(t, axis=None, out=None):  # noqa: A001
    return _out(_py(F.sum(t, axis=axis)), out)


def pow(t, x, out=None):  # noqa: A001
    return _out(_py(F.pow(t, _operand(x))), out)


def average(t, axis=None):
    """The mean of all elements (a float) when axis is None, else a Tensor of means along
    axis."""
    if axis is None:
        return float(np.mean(to_numpy(t), dtype=np.float64))
    return _py(F.mean(t, axis=axis))


def softmax(t, out=None):
    return _out(_py(F.softmax(t, axis=-1)), out)


def _cmp(f):
    def fn(t, x):
        return _py(f(t, _operand(x)).astype(float32))
    fn.__name__ = f.__name__
    return fn


lt = _cmp(F.lt)
le = _cmp(F.le)
gt = _cmp(F.gt)
ge = _cmp(F.ge)
eq = _cmp(F.eq)


def add(lhs, rhs, ret=None):
    return _out(_py(F.add(lhs, _operand(rhs))), ret)


def sub(lhs, rhs, ret=None):
    return _out(_py(F.sub(lhs, _operand(rhs))), ret)


def eltwise_mult(lhs, rhs, ret=None):
    return _out(_py(F.mul(lhs, _operand(rhs))), ret)


def div(lhs, rhs, ret=None):
    return _out(_py(F.true_divide(lhs, _operand(rhs))), ret)


def mult(A, B, C=None, alpha=1.0, beta=0.0):  # noqa: N803 - SINGA's names
    """C = alpha * A @ B + beta * C (matrix-vector, matrix-matrix or batched)."""
    r = F.matmul(A, B)
    if alpha != 1.0:
        r = r * float(alpha)
    if C is None:
        return _py(r)
    if beta != 0.0:
        r = r + C.detach() * float(beta)
    return _out(_py(r), C)


def einsum(subscripts, *args):
    """numpy's einsum on the tensors' values (SINGA's also computes it on the host)."""
    arrays = [to_numpy(a) for a in args]
    r = np.einsum(subscripts, *arrays)
    return from_numpy(np.ascontiguousarray(r), args[0].device)


def repeat(t, repeats, axis=None):
    """numpy's repeat."""
    return Tensor.repeat(t, repeats, axis)


def tensordot(A, B, axes=2):  # noqa: N803
    """numpy's tensordot, as a matmul of the two tensors reshaped (records gradients)."""
    if isinstance(axes, int):
        a_axes = list(range(A.ndim - axes, A.ndim))
        b_axes = list(range(axes))
    else:
        a_axes, b_axes = ([axes[0]] if isinstance(axes[0], int) else list(axes[0]),
                          [axes[1]] if isinstance(axes[1], int) else list(axes[1]))
    a_axes = [a % A.ndim for a in a_axes]
    b_axes = [b % B.ndim for b in b_axes]
    for a, b in zip(a_axes, b_axes):
        if A.shape[a] != B.shape[b]:
            raise errors.ShapeError(f"tensordot: axis {a} of {tuple(A.shape)} and axis {b} of "
                                    f"{tuple(B.shape)} differ")
    a_free = [i for i in range(A.ndim) if i not in a_axes]
    b_free = [i for i in range(B.ndim) if i not in b_axes]
    k = product(A.shape[i] for i in a_axes)
    a2 = F.reshape(F.permute(A, *(a_free + a_axes)), product(A.shape[i] for i in a_free), k)
    b2 = F.reshape(F.permute(B, *(b_axes + b_free)), k, product(B.shape[i] for i in b_free))
    r = F.matmul(a2, b2)
    return _py(F.reshape(r, *([A.shape[i] for i in a_free] + [B.shape[i] for i in b_free])))


def axpy(alpha, x, y):
    y += x * float(alpha)
    return y


def bernoulli(p, t):
    return t.bernoulli(p) if isinstance(t, Tensor) else _sw.Bernoulli(p, t) or t


def gaussian(mean, std, t):
    _sw.Gaussian(float(mean), float(std), t)
    return t


def uniform(low, high, t):
    _sw.Uniform(float(low), float(high), t)
    return t


def add_column(alpha, v, beta, M):  # noqa: N803
    return _set(M, M * float(beta) + F.reshape(v, -1, 1) * float(alpha))


def add_row(alpha, v, beta, M):  # noqa: N803
    return _set(M, M * float(beta) + v * float(alpha))


def _set(M, value):  # noqa: N803
    with _ag.no_grad():
        _HLTensor.copy_(M, value)
    return M


def sum_columns(M):  # noqa: N803
    return _py(F.sum(M, axis=1, keepdims=True))


def sum_rows(M):  # noqa: N803
    return _py(F.sum(M, axis=0, keepdims=True))


def copy_from_numpy(data, np_array):
    """Copies the array's values into the raw tensor `data`."""
    a = np.asarray(np_array)
    if a.size != data.size:
        raise errors.ShapeError(f"copy_from_numpy: {a.size} values for a tensor of shape "
                                f"{tuple(data.shape)}")
    with _ag.no_grad():
        _HLTensor.copy_(data, _HLTensor(a.reshape(tuple(data.shape))))


def concatenate(tensors, axis):
    return _py(F.cat(list(tensors), axis))


def random(shape, device=None):
    return Tensor(shape, device=device).uniform(0, 1)


def zeros(shape, device=None):
    return Tensor(shape, device=device)


def ones(shape, device=None):
    return Tensor(shape, device=device).set_value(1.0)


__all__ = ["Tensor", "PlaceHolder", "CTensor", "float16", "float32", "int32", "from_numpy",
           "to_numpy", "from_raw_tensor", "from_raw_tensors", "to_host", "zeros_like",
           "ones_like", "product", "sizeof", "contiguous", "reshape", "transpose",
           "copy_data_to_from", "abs", "exp", "ceil", "floor", "log", "sigmoid", "sign", "sqrt",
           "square", "tanh", "relu", "sum", "pow", "average", "softmax", "lt", "le", "gt", "ge",
           "eq", "add", "sub", "eltwise_mult", "mult", "div", "einsum", "repeat", "tensordot",
           "axpy", "bernoulli", "gaussian", "uniform", "add_column", "add_row", "sum_columns",
           "sum_rows", "copy_from_numpy", "concatenate", "random", "zeros", "ones"]
