"""hl.Placeholder: a tensor's shape, dtype and device without its memory.

A placeholder is a Tensor on libcore's meta device that stands for an input living on another
device (``device``, the CPU by default). `Module.compile` feeds placeholders through forward:
every op then runs its real entry point on meta tensors, which checks the arguments and
computes the output's shape and dtype exactly as a real call would, with the same error
messages, and allocates and computes nothing. Layers create their parameters on the device
the placeholder stands for. Real tensors that meet a placeholder in an op (a layer's weights)
take part as meta tensors of their shape (`Function.__call__`), and what comes out is again a
placeholder for the same device.
"""
import contextlib
import threading

from .. import _core, errors
from .. import devices as _dev
from .. import dtypes as _dt
from .._tensor import Tensor, _fill, _wrap

_META = _dev._KINDS["meta"]


class Placeholder(Tensor):
    """Stands for an input of `shape` (a tuple of ints), `dtype` and `device`."""

    __slots__ = ("_target",)

    def __init__(self, shape, dtype=_dt.float32, device=None, name=None):
        shape = tuple(shape)
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise errors.ShapeError(f"Placeholder: shape must be non-negative ints, got {shape}")
        d = _dt.dtype(dtype)
        _make(_core.empty(shape, d.code, _META, 0), d, _dev.device(device), self)
        self.name = name

    @property
    def device(self):
        """The device the placeholder stands for (its own memory is nowhere)."""
        return self._target

    @property
    def is_meta(self):
        return True

    def meta(self):
        """The plain meta tensor behind this placeholder."""
        return _wrap(self._h, self._dtype)

    def __repr__(self):
        return (f"Placeholder(shape={self.shape}, dtype={self._dtype.name}, "
                f"device='{self._target}')")

    __str__ = __repr__

    def numpy(self):
        raise errors.ValueError(f"{self!r} has no values: it only stands for a shape during "
                                f"compile; run the model on real tensors to get numbers")

    def __array__(self, dtype=None, copy=None):
        return self.numpy()

    def item(self):
        return self.numpy()

    tolist = item

    # Tensor's own methods that make a tensor without going through an op give placeholders.
    def astype(self, dtype):
        return adopt(self.meta().astype(dtype), self._target)

    def contiguous(self):
        return self

    def clone(self):
        return adopt(self.meta().clone(), self._target)

    copy = clone

    def detach(self):
        return adopt(self.meta(), self._target)

    def to(self, *args, **kwargs):
        """A placeholder for the same shape on another device and/or of another dtype."""
        t = self.meta().to(*[a for a in args if not _is_device(a)],
                           dtype=kwargs.get("dtype"))
        dev = kwargs.get("device")
        for a in args:
            if _is_device(a):
                dev = a
        return adopt(t, self._target if dev is None else _dev.device(dev))

    def fill_(self, value):
        return self

    def copy_(self, src):
        return self


def _is_device(a):
    return isinstance(a, _dev.Device) or (isinstance(a, str) and
                                          a.split(":")[0] in _dev._KINDS)


def _make(h, dtype, target, p=None):
    p = _fill(p if p is not None else Placeholder.__new__(Placeholder), h, dtype)
    p._target = target
    return p


def adopt(t, target):
    """A placeholder for `target` over t's shape and dtype (t itself moved to meta when it is
    a real tensor)."""
    if t is None:
        return None
    h = t._h if _core.device_of(t._h)[0] == _META else _core.to_device(t._h, _META, 0)
    return _make(h, t._dtype, target)


def as_meta(x):
    """x as a plain tensor on the meta device (None, numbers and other objects unchanged)."""
    if x.__class__ is Placeholder:
        return _wrap(x._h, x._dtype)
    if isinstance(x, Tensor) and _core.device_of(x._h)[0] != _META:
        return _wrap(_core.to_device(x._h, _META, 0), x._dtype)
    return x


def follow(t, like):
    """t as a placeholder for like's device when like is a placeholder (an op's second result
    kept on the op object: batch norm's statistics, max pooling's indices), else t."""
    return adopt(t, like._target) if like.__class__ is Placeholder and t is not None else t


_compile = threading.local()


@contextlib.contextmanager
def standing_in_for(device):
    """While Module.compile runs forward on placeholders for `device`: a layer whose input
    reached it as a plain meta tensor (an op outside autograd's Functions drops the
    placeholder's device) still creates its parameters on `device`, never on meta."""
    prev = getattr(_compile, "device", None)
    _compile.device = device
    try:
        yield
    finally:
        _compile.device = prev


def initialize_inputs(xs):
    """What a layer's initialize() sees: xs, with plain meta tensors made placeholders for the
    device compile stands in for (see standing_in_for)."""
    device = getattr(_compile, "device", None)
    if device is None:
        return xs
    return tuple(adopt(x, device) if isinstance(x, Tensor) and x.__class__ is not Placeholder
                 and _core.device_of(x._h)[0] == _META else x for x in xs)


def is_placeholder(x):
    return x.__class__ is Placeholder
