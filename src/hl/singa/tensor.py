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
import functools
import weakref

import numpy as np

from .. import dtypes as _dt
from .. import errors, ops
from .. import autograd as _ag
from .._grad_state import state as _grad
from .._tensor import Tensor as _HLTensor, _wrap
from ..autograd import functional as F
from . import singa_wrap as _sw
from .device import _door_device

float16 = _dt.float16
float32 = _dt.float32
int32 = _dt.int32
CTensor = _sw.Tensor


class _Int(int):
    """A number that is also SINGA's method of the same name (``t.ndim()``, ``t.size()``)."""
    __slots__ = ()

    def __call__(self):
        return int(self)


def _dtype(d):
    return _sw.dtype_of(d)


def _device_arg(device):
    return None if device is None else device


class Tensor(_HLTensor):
    """SINGA's Python Tensor: ``Tensor(shape=(), device=None, dtype=float32, data=None,
    requires_grad=True, stores_grad=False, creator=None, name=None)``. ``data`` may be a
    numpy array (copied) or a raw tensor (shared)."""
    __slots__ = ()
    __hash__ = _HLTensor.__hash__

    def __init__(self, shape=(), device=None, dtype=float32, data=None, requires_grad=True,
                 stores_grad=False, creator=None, name=None):
        if isinstance(data, np.ndarray):
            t = _HLTensor(_numpy_for_singa(data), device=_device_arg(device))
        elif isinstance(data, _HLTensor):
            t = data if device is None else data.to(device)
        elif data is None:
            t = ops.zeros(*[int(s) for s in shape], dtype=_dtype(dtype),
                          device=_device_arg(device))
        else:
            raise errors.ValueError(f"tensor.Tensor: data must be a numpy array or a raw "
                                    f"tensor, got {type(data).__name__}")
        self._h, self._dtype, self._shape = t._h, t._dtype, t._shape
        self.requires_grad = bool(requires_grad)
        self.stores_grad = bool(stores_grad)
        self.grad = None
        self.creator = creator
        self.name = name

    # ---- SINGA's fields -----------------------------------------------------------------

    @property
    def data(self):
        """The raw tensor (SINGA's CTensor): the same memory, no copy."""
        return _sw.raw(self)

    @data.setter
    def data(self, t):
        self._h, self._dtype, self._shape = t._h, t._dtype, None

    @property
    def device(self):
        return _door_device(_HLTensor.device.__get__(self))

    @property
    def ndim(self):
        return _Int(len(self.shape))

    @property
    def size(self):
        return _Int(_HLTensor.size.__get__(self))

    def is_dummy(self):
        return self.name is None or str(self.name).startswith("Dummy#")

    def is_empty(self):
        return self.ndim == 0

    def is_transpose(self):
        """True for a permuted view (SINGA's transposed flag)."""
        return not self.is_contiguous()

    def memsize(self):
        return self.size * self._dtype.itemsize

    # ---- SINGA's methods ----------------------------------------------------------------

    def transpose(self, axes=None):
        if axes is None:
            return _py(F.transpose(self))
        if isinstance(axes, int):
            raise errors.ValueError("Tensor.transpose(axes): axes is a tuple of all the axes")
        return _py(F.permute(self, *axes))

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return _py(F.reshape(self, *shape))

    def contiguous(self):
        return _py(_HLTensor.contiguous(self))

    def reset_like(self, t):
        z = ops.zeros(*t.shape, dtype=t.dtype, device=t.device)
        self._h, self._dtype, self._shape = z._h, z._dtype, None

    def as_type(self, dtype):
        return _py(_HLTensor.astype(self.detach(), _dtype(dtype)))

    def to_type(self, dtype):
        self.data = _HLTensor.astype(self.detach(), _dtype(dtype))
        return self

    def to_device(self, device):
        t = _HLTensor.to(self.detach(), device)
        self._h, self._dtype, self._shape = t._h, t._dtype, None

    def to_host(self):
        self.to_device("cpu")

    def l2(self):
        """SINGA's Tensor::l2: the Euclidean norm divided by the number of elements."""
        return self.data.L2()

    def l1(self):
        """SINGA's Tensor::l1: the mean absolute value."""
        return self.data.L1()

    def set_value(self, x, inplace=True):
        if not inplace:
            raise errors.UnsupportedError("Tensor.set_value(inplace=False): SINGA does not "
                                          "have it either")
        self.fill_(float(x))
        return self

    def copy_from_numpy(self, np_array, offset=0):
        a = np.asarray(np_array)
        if a.size + int(offset) > self.size:
            raise errors.ShapeError(f"copy_from_numpy: {a.size} values (from offset {offset}) "
                                    f"do not fit a tensor of shape {self.shape}")
        if offset == 0 and a.size == self.size:
            self.copy_(_HLTensor(a.reshape(self.shape)))
        else:
            flat = np.asarray(self.cpu()).reshape(-1).copy()
            flat[int(offset):int(offset) + a.size] = a.reshape(-1)
            self.copy_(_HLTensor(flat.reshape(self.shape).astype(self._dtype.np)))

    def copy_data(self, t):
        if t.size != self.size:
            raise errors.ShapeError(f"copy_data: {tuple(t.shape)} into {self.shape}: the sizes "
                                    f"differ")
        self.copy_(F.reshape(t.detach(), *self.shape))

    def copy_from(self, t, offset=0):
        if isinstance(t, _HLTensor):
            self.copy_data(t)
        elif isinstance(t, np.ndarray):
            self.copy_from_numpy(t, offset)
        else:
            raise errors.ValueError("copy_from: t should be a Tensor or a numpy array")

    def clone(self):
        return _py(_HLTensor.clone(self))

    def deepcopy(self):
        return self.clone()

    def copy(self):
        """A shallow copy: a new Tensor over the same memory (SINGA's copy constructor)."""
        t = _py(_wrap(self._h, self._dtype))
        t.requires_grad, t.stores_grad = self.requires_grad, self.stores_grad
        return t

    def T(self):  # noqa: N802 - SINGA's method
        return _py(F.transpose(self))

    def repeat(self, repeats, axis=None):
        return repeat(self, repeats, axis)

    def bernoulli(self, p, inplace=True):
        _sw.Bernoulli(float(p), self)
        return self

    def gaussian(self, mean, std, inplace=True):
        _sw.Gaussian(float(mean), float(std), self)
        return self

    def uniform(self, low, high, inplace=True):
        _sw.Uniform(float(low), float(high), self)
        return self

    def add_column(self, v):
        self._in_place(self + F.reshape(v, -1, 1))

    def add_row(self, v):
        self._in_place(self + v)

    def div_column(self, v):
        self._in_place(self / F.reshape(v, -1, 1))

    def div_row(self, v):
        self._in_place(self / v)

    def mult_column(self, v):
        self._in_place(self * F.reshape(v, -1, 1))

    def mult_row(self, v):
        self._in_place(self * v)

    def _in_place(self, value):
        with _ag.no_grad():
            _HLTensor.copy_(self, value)
        return self

    # in place: SINGA changes the values of any tensor, parameters included, without record
    def __iadd__(self, x):
        return self._in_place(_HLTensor.__add__(self.detach(), _operand(x)))

    def __isub__(self, x):
        return self._in_place(_HLTensor.__sub__(self.detach(), _operand(x)))

    def __imul__(self, x):
        return self._in_place(_HLTensor.__mul__(self.detach(), _operand(x)))

    def __itruediv__(self, x):
        return self._in_place(_HLTensor.__truediv__(self.detach(), _operand(x)))

    def __getitem__(self, keys):
        """SINGA's indexing: an int keeps its axis (x[0] of a (2, 3) tensor is (1, 3))."""
        if not isinstance(keys, tuple):
            keys = (keys,)
        keys = tuple(slice(k, (k + 1) or None) if isinstance(k, (int, np.integer)) else k
                     for k in keys)
        return _py(_HLTensor.__getitem__(self, keys))

    def __repr__(self):
        """SINGA's form: the values, then the dtype."""
        return f"{np.array2string(to_numpy(self))}, {self._dtype.name}"

    __str__ = __repr__


def _arith(name):
    base = getattr(_HLTensor, name)

    def method(self, other):
        return _py(base(self, _operand(other)))
    method.__name__ = name
    return method


def _compare(name):
    base = getattr(_HLTensor, name)

    def method(self, other):
        if other is None:
            return False if name == "__eq__" else True
        r = base(self, _operand(other))
        return _py(r.astype(self._dtype if self._dtype.is_floating else float32))
    method.__name__ = name
    return method


for _n in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__", "__truediv__",
           "__rtruediv__", "__pow__", "__rpow__", "__matmul__", "__neg__"):
    setattr(Tensor, _n, _arith(_n) if _n != "__neg__" else
            (lambda self: _py(_HLTensor.__neg__(self))))
for _n in ("__lt__", "__le__", "__gt__", "__ge__", "__eq__", "__ne__"):
    setattr(Tensor, _n, _compare(_n))
Tensor.__floordiv__ = lambda self, other: _py(F.floor(_HLTensor.__truediv__(self, _operand(other))))
del _n

PlaceHolder = Tensor


def _operand(x):
    return float(x) if isinstance(x, (int, np.integer)) and not isinstance(x, bool) else x


def _numpy_for_singa(a):
    """SINGA keeps float32, float16 and int32: float64 and int64 arrays are narrowed."""
    a = np.asarray(a)
    if a.dtype == np.float64:
        return a.astype(np.float32)
    if a.dtype == np.int64 or a.dtype == np.int16 or a.dtype == np.int8:
        return a.astype(np.int32)
    if a.dtype == np.bool_:
        return a.astype(np.float32)
    return a


# ---- turning hl results into SINGA tensors ---------------------------------------------------

def _raw_backward(ref, *dys):
    """SINGA's Operator.backward over an hl Function's: raw tensors in and out, no argument
    meaning a gradient of ones (SINGA's dy=1.0), and, called from a program, one gradient per
    input that requires one (SINGA's operators take their constants as configuration, not as
    inputs). hl's engine calls it too, with grad mode off: it gets hl's contract, one entry
    per input."""
    fn = ref()
    if not dys:
        dys = tuple(ops.ones(*shape, dtype=dtype, device=device)
                    for shape, dtype, device in _out_specs(fn))
    engine = not _grad.enabled
    dxs = type(fn).backward(fn, *dys)
    if engine:
        return tuple(_sw.raw(d) for d in dxs) if type(dxs) is tuple else _sw.raw(dxs)
    if type(dxs) is not tuple:
        dxs = (dxs,)
    needs = fn.needs or (True,) * len(dxs)
    dxs = tuple(_sw.raw(d) for d, need in zip(dxs, needs) if need)
    return dxs[0] if len(dxs) == 1 else dxs


def _out_specs(fn):
    if fn.out_specs is not None:
        return fn.out_specs
    y = fn.outs[0]()
    return [(y.shape, y.dtype, y.device)]


def _singa_backward(fn):
    """Gives the op that made a SINGA tensor SINGA's backward, on the instance: hl's engine
    and ONNX export keep seeing hl's class; a weak reference keeps the op collectable."""
    d = fn.__dict__
    if "backward" not in d:
        d["backward"] = functools.partial(_raw_backward, weakref.ref(fn))


def _py(t):
    """hl results as SINGA Tensors: the same objects, re-classed (identity kept, so the
    autograd records that point at them stay valid); tuples and lists element-wise."""
    if isinstance(t, _HLTensor):
        if t.__class__ is not Tensor:
            t.__class__ = Tensor
        if t.creator is not None:
            _singa_backward(t.creator)
        return t
    if isinstance(t, tuple):
        return tuple(_py(x) for x in t)
    if isinstance(t, list):
        return [_py(x) for x in t]
    return t


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


def to_numpy(t):
    """A numpy copy of the values."""
    return np.array(t.detach().cpu().numpy())


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
    r = np.repeat(to_numpy(t), repeats, axis)
    return from_numpy(np.ascontiguousarray(r), t.device)


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
