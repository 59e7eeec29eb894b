"""The SINGA Tensor class (hl.singa.tensor.Tensor) and how hl results become SINGA Tensors:
an hl.Tensor subclass with SINGA's constructor and methods, re-classed in place, and SINGA's
Operator.backward given to the ops that made them. hl.singa.tensor re-exports it with SINGA's
module functions."""
import functools
import weakref

import numpy as np

from .. import dtypes as _dt
from .. import errors, ops
from .. import autograd as _ag
from .._grad_state import state as _grad
from .._tensor import Tensor as _HLTensor, _fill, _wrap
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
        _fill(self, t._h, t._dtype, t._shape, bool(requires_grad), bool(stores_grad), creator,
              name)

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
        """numpy's repeat (SINGA's also computes it on the host)."""
        r = np.repeat(to_numpy(self), repeats, axis)
        return Tensor(device=self.device, data=np.ascontiguousarray(r))

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


def composite(y, *inputs):
    """y (a SINGA tensor) computed from `inputs` by several hl ops, where SINGA has one
    operator (mse_loss, mean, n-ary max, cossim, prelu, tile, depth_to_space ...): its
    creator's SINGA backward gives SINGA's operator's gradients, one per input of `inputs`
    that requires one, by walking hl's records from y back to them (the graph is kept). hl's
    engine, calling the same attribute with grad mode off, still gets the last op's own
    contract."""
    fn = y.creator
    if fn is None:
        return y
    last = functools.partial(_raw_backward, weakref.ref(fn))
    y_ref = weakref.ref(y)  # a strong one would make a cycle through y.creator

    def backward(*dys):
        if not _grad.enabled:
            return last(*dys)
        out = y_ref()
        if out is None:
            raise errors.ValueError(f"{fn.name}.backward: its output is gone (keep the result "
                                    f"of the function while calling result.creator.backward)")
        want = [x for x in inputs if x.requires_grad]
        dy = dys[0] if dys else None
        kept = [x.stores_grad for x in want]
        got = {}
        try:
            for x in want:
                x.stores_grad = True
            for t, g in _ag.backward(out, dy, retain_graph=True):
                if any(t is x for x in want):
                    got[id(t)] = g
                    if len(got) == len(want):
                        break
        finally:
            for x, k in zip(want, kept):
                x.stores_grad = k
        dxs = tuple(_sw.raw(got[id(x)] if id(x) in got else ops.zeros_like(x)) for x in want)
        return dxs[0] if len(dxs) == 1 else dxs
    fn.__dict__["backward"] = backward
    return y


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


def to_numpy(t):
    """A numpy copy of the values."""
    return np.array(t.detach().cpu().numpy())
