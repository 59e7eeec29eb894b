"""hl.Tensor: a handle on a tensor owned by the C core.

A Tensor is dtype + shape + strides over reference-counted core storage. Views (reshape,
transpose, slicing, expand, squeeze) share storage; ``numpy()`` and ``__array__`` on a CPU
tensor return an array over the same memory (the array keeps the storage alive), so writes
through one show in the other. Operators follow numpy's broadcasting and promotion rules,
with Python scalars taking the tensor's dtype (see hl.dtypes).

Operations live in hl.ops (kernels) and hl.autograd (ops with gradients); Tensor's methods
and operators are installed from one table in hl/autograd/methods.py.
"""
import numbers
import operator

import numpy as np

from . import _core, errors
from ._grad_state import state as _grad
from . import dtypes as _dt
from . import devices as _dev

_BY_CODE = _dt.BY_CODE
_META = _dev._KINDS["meta"]


class Tensor:
    """An n-dimensional array on a device.

    ``Tensor(data, dtype=None, device=None, requires_grad=False)`` copies data (a numpy
    array, nested lists, a scalar or another Tensor). Without a dtype, float64 numpy data
    keeps float64, Python floats give float32, Python ints int64 and bools bool.
    """

    __slots__ = ("_h", "_dtype", "_shape", "requires_grad", "stores_grad", "grad", "creator",
                 "out_index", "name", "__weakref__")
    __array_priority__ = 1000  # numpy defers to our reflected operators
    __hash__ = object.__hash__  # == is element-wise, identity hashing keeps sets and dicts working

    def __init__(self, data=None, dtype=None, device=None, requires_grad=False,
                 stores_grad=False, name=None):
        if data is None:
            data = []
        if isinstance(data, Tensor):
            src = data if dtype is None else data.astype(dtype)
            d = _dev.device(device) if device is not None else src.device
            h = _core.to_device(src._h, d.code, d.index)
            t = _wrap(h)
        else:
            t = _from_data(data, dtype, device)
        _fill(self, t._h, t._dtype, t._shape, requires_grad, stores_grad, name=name)

    # ---- metadata -----------------------------------------------------------------------

    @property
    def shape(self):
        s = self._shape
        if s is None:
            s = self._shape = _core.shape(self._h)
        return s

    @property
    def dtype(self):
        return self._dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def numel(self):
        return self.size

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d tensor")
        return self.shape[0]

    @property
    def device(self):
        kind, index = _core.device_of(self._h)
        return _dev.Device(_dev.KIND_NAMES[kind], index)

    @property
    def is_meta(self):
        """True for a tensor on the meta device: a shape and a dtype, no values."""
        return _core.device_of(self._h)[0] == _META

    @property
    def strides(self):
        """Strides in elements (numpy's are in bytes)."""
        return _core.strides(self._h)

    def is_contiguous(self):
        return _core.is_contiguous(self._h)

    def shares_memory(self, other):
        return _core.shares_storage(self._h, other._h)

    # ---- conversion ---------------------------------------------------------------------

    def numpy(self):
        """The values as a numpy array: a view of the same memory for a CPU tensor (writes
        show through; read-only for a broadcast view, as numpy.broadcast_to), a copy for a
        tensor on another device."""
        if self._dtype is _dt.bfloat16 and _dt.bfloat16.np is None:
            raise errors.DTypeError("numpy has no bfloat16 without the ml_dtypes package")
        _core.refuse_host_read("numpy()")
        kind = _core.device_of(self._h)[0]
        if kind == 0:
            return _core.numpy_view(self._h, self._dtype.np)
        if kind == _META:
            raise errors.DeviceError(
                f"{self!r} is on the meta device: it has a shape and a dtype but no values; "
                f"run the computation on a real device to get numbers")
        return _core.read(self._h, self._dtype.np)

    def __array__(self, dtype=None, copy=None):
        arr = self.numpy()
        if dtype is not None and np.dtype(dtype) != arr.dtype:
            return arr.astype(dtype)
        return arr.copy() if copy else arr

    def tolist(self):
        return self.numpy().tolist()

    def item(self):
        if self.size != 1:
            raise errors.ValueError(
                f"item(): only a tensor with one element converts to a Python scalar, "
                f"this one has shape {self.shape}")
        _core.refuse_host_read("item()")
        return self.numpy().reshape(()).item()

    def __float__(self):
        _core.refuse_host_read("float(tensor)")
        return float(self.item())

    def __int__(self):
        _core.refuse_host_read("int(tensor)")
        return int(self.item())

    def __index__(self):
        if not self._dtype.is_integer:
            raise TypeError(f"only integer tensors can be used as an index, not {self._dtype.name}")
        return int(self.item())

    def __bool__(self):
        if self.size != 1:
            raise errors.ValueError(
                f"the truth value of a tensor of shape {self.shape} is ambiguous; "
                f"use .any() or .all()")
        _core.refuse_host_read("bool(tensor)")
        return bool(self.item())

    def to(self, *args, **kwargs):
        """``to(device)``, ``to(dtype)`` or ``to(device, dtype)``: a tensor there (self when
        nothing changes). The new tensor keeps the name (an optimiser keys its state by it);
        a move to another device is a copy outside the autograd graph (``to(dtype)`` is
        astype, which gradients flow through)."""
        device = kwargs.pop("device", None)
        dtype = kwargs.pop("dtype", None)
        if kwargs:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        for a in args:
            if isinstance(a, (_dt.DType, type, np.dtype)) or (
                    isinstance(a, str) and a.split(":")[0] not in _dev._KINDS):
                dtype = a
            else:
                device = a
        t = self
        if dtype is not None and _dt.dtype(dtype) is not t._dtype:
            t = t.astype(dtype)
        if device is not None:
            d = _dev.device(device)
            if d != t.device:
                t = _wrap(_core.to_device(t._h, d.code, d.index))
        if t is not self:
            t.name = self.name
        return t

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        """PyTorch's ``t.cuda()`` / ``t.cuda(1)``: ``to("cuda")`` / ``to("cuda:1")``."""
        return self.to("cuda" if device is None else f"cuda:{int(device)}")

    def _move_to(self, device):
        """Moves the data to `device` in place: the object (and every reference to it, an
        optimiser's included) stays; what Module.to does to each parameter."""
        t = self.to(device)
        self._h, self._shape = t._h, t._shape

    def astype(self, dtype):
        """A copy converted to dtype. Float -> integer truncates toward zero and saturates at
        the integer type's range, NaN becoming 0 (numpy leaves those undefined); integer ->
        narrower integer wraps; float16 and bfloat16 round to nearest even, once."""
        d = _dt.dtype(dtype)  # (hl/autograd/methods.py records it when a gradient flows)
        return _wrap(_core.call("cast", self._h, d.code, _core.OUT), d)

    def contiguous(self):
        return _wrap(_core.contiguous(self._h), self._dtype)

    def clone(self):
        return _wrap(_core.call("cast", self._h, self._dtype.code, _core.OUT), self._dtype)

    copy = clone

    def detach(self):
        """The same data with no autograd history."""
        return _wrap(self._h, self._dtype)

    # ---- autograd -----------------------------------------------------------------------

    # backward() (PyTorch style) is installed by hl/autograd/methods.py with the op methods.

    def requires_grad_(self, requires_grad=True):
        self.requires_grad = bool(requires_grad)
        return self

    def retain_grad(self):
        """Keeps this intermediate tensor's gradient in ``.grad`` after backward."""
        self.stores_grad = True
        return self

    @property
    def is_leaf(self):
        return self.creator is None

    def zero_grad(self):
        self.grad = None

    def fill_(self, value):
        _core.fill(self._h, value)
        return self

    def copy_(self, src):
        """Copies src (broadcast and cast) into this tensor, in place."""
        _core.copy_into(self._h, as_tensor(src, device=self.device)._h)
        return self

    # ---- printing -----------------------------------------------------------------------

    def __repr__(self):
        extras = [f"dtype={self._dtype.name}"]
        dev = self.device
        if dev.kind == "meta":  # no values to print (PyTorch prints "...")
            return f"tensor(..., shape={self.shape}, {extras[0]}, device='meta')"
        if dev.kind != "cpu":
            extras.append(f"device='{dev}'")
        if self.requires_grad:
            extras.append("requires_grad=True")
        if self._dtype is _dt.bfloat16:
            body = np.array2string(self.astype(_dt.float32).numpy(), separator=", ")
        else:
            body = np.array2string(np.asarray(self.cpu().numpy()), separator=", ",
                                   threshold=1000)
        body = body.replace("\n", "\n       ")
        if self.size == 0 and self.ndim != 1:
            extras.insert(0, f"shape={self.shape}")  # "[]" alone would hide the shape
        return f"tensor({body}, {', '.join(extras)})"

    __str__ = __repr__

    # Views, indexing, operators and every op as a method (x.exp(), x.sum(axis=1)) are
    # installed by hl/autograd/methods.py, one explicit table: they run autograd's Functions,
    # which sit above this module.

    def __setstate__(self, state):
        """Never: a tensor pickles through __reduce__ (a copy of its values), so no pickle
        hl writes sets a tensor's fields, and one that tries (a BUILD setting _dtype to a
        wider type would make numpy() read past the storage) is refused."""
        raise errors.UnsafeCheckpointError(
            "a pickle tried to set a Tensor's internal fields; tensors are rebuilt from their "
            "values only", global_name="hl._tensor.Tensor.__setstate__")

    def __reduce__(self):
        return (_rebuild, (np.array(self.cpu().numpy()), self._dtype.name, str(self.device),
                           self.requires_grad, self.stores_grad, self.name))


def _check_in_place(t, op):
    if t.requires_grad and _grad.enabled:
        raise errors.ValueError(
            f"{op}: in-place change of a tensor that requires a gradient while gradients are "
            f"recorded would make its gradient wrong; do it under `with hl.no_grad():` or on "
            f"x.detach()")


def _rebuild(arr, dtype_name, device, requires_grad, stores_grad, name):
    return Tensor(arr, dtype=dtype_name, device=device, requires_grad=requires_grad,
                  stores_grad=stores_grad, name=name)


_new = object.__new__


def _wrap(h, dtype=None):
    """A Tensor over a core handle (no copy)."""
    return _fill(_new(Tensor), h, dtype)


def _fill(t, h, dtype=None, shape=None, requires_grad=False, stores_grad=False, creator=None,
          name=None):
    """Sets every field of a new Tensor (or subclass instance) t over handle h (the one
    place that lists them; shape None is read from the core when first asked)."""
    t._h = h
    t._dtype = dtype if dtype is not None else _BY_CODE[_core.dtype_code(h)]
    t._shape = shape
    t.requires_grad = requires_grad
    t.stores_grad = stores_grad
    t.grad = None
    t.creator = creator
    t.name = name
    return t


def _infer_dtype(data):
    """The hl dtype for Python data without one given."""
    if isinstance(data, np.generic):  # a numpy scalar keeps its dtype, like an array
        data = np.asarray(data)
    elif isinstance(data, bool):
        return _dt.bool_
    elif isinstance(data, numbers.Integral):
        return _dt.int64
    elif isinstance(data, numbers.Real):
        return _dt.float32
    arr = _asarray(data)
    if arr.dtype.kind == "f" and not isinstance(data, np.ndarray):
        return _dt.float32  # Python floats in lists
    if arr.dtype.kind in "iu" and arr.dtype not in (np.int32, np.int64, np.uint8):
        return _dt.int64
    if arr.dtype == np.float16:
        return _dt.float16
    return _dt.from_numpy(arr.dtype)


def _asarray(data):
    try:
        return np.asarray(data)
    except ValueError as e:
        raise errors.ShapeError(f"cannot make a tensor from ragged data: {e}") from None


def _from_data(data, dtype, device):
    d = _dt.dtype(dtype) if dtype is not None else _infer_dtype(data)
    dev = _dev.device(device)
    if isinstance(data, np.ndarray) and data.dtype.kind in "fiub" and d.np is not None:
        arr = data
    else:
        arr = _asarray(data)
        if arr.dtype == object:
            raise errors.DTypeError(f"cannot make a tensor from {type(data).__name__} data "
                                    f"of objects")
    if arr.ndim > 8:
        raise errors.ShapeError(f"hl tensors have at most 8 dimensions; got shape {arr.shape}")
    if d.np is None:
        raise errors.DTypeError(f"{d.name} needs the ml_dtypes package for numpy conversion")
    if arr.dtype != d.np:
        if d.is_integer and arr.dtype.kind == "f" and not np.all(np.isfinite(arr)):
            raise errors.ValueError(f"cannot convert non-finite values to {d.name}")
        if d is _dt.int64 and arr.dtype.kind == "u" and arr.size and arr.max() > 2 ** 63 - 1:
            raise errors.ValueError(f"{arr.dtype} values above 2**63 - 1 do not fit in int64")
        arr = arr.astype(d.np)
    return _wrap(_core.from_numpy(arr, d.code, dev.code, dev.index), d)


def as_tensor(x, dtype=None, device=None):
    """x itself when it is already a Tensor of that dtype and device, else a new Tensor."""
    if isinstance(x, Tensor):
        if dtype is not None and _dt.dtype(dtype) is not x._dtype:
            x = x.astype(dtype)
        if device is not None and _dev.device(device) != x.device:
            x = x.to(device)
        return x
    return _from_data(x, dtype, device)


def tensor(data, dtype=None, device=None, requires_grad=False):
    """A new Tensor holding a copy of data."""
    return Tensor(data, dtype=dtype, device=device, requires_grad=requires_grad)


def from_numpy(arr):
    """A tensor with a copy of arr's values and its dtype."""
    return _from_data(np.asarray(arr), _dt.from_numpy(np.asarray(arr).dtype), None)

