"""hl.Placeholder: a tensor's shape, dtype and device without its memory.

`Module.compile` feeds placeholders through forward: every autograd op then infers its
output's shape instead of computing it, layers create their parameters from the inferred
shapes, and no activation is ever allocated. A placeholder answers the same methods and
operators as a Tensor (they resolve to the same autograd functions).
"""
from .. import devices as _dev
from .. import dtypes as _dt
from .. import errors


class Placeholder:
    """Stands for an input of `shape` (a tuple of ints), `dtype` and `device`."""

    __slots__ = ("shape", "dtype", "_device", "name")
    requires_grad = False
    stores_grad = False
    creator = None
    grad = None

    def __init__(self, shape, dtype=_dt.float32, device=None, name=None):
        shape = tuple(shape)
        if not all(isinstance(d, int) and d >= 0 for d in shape):
            raise errors.ShapeError(f"Placeholder: shape must be non-negative ints, got {shape}")
        self.shape = shape
        self.dtype = _dt.dtype(dtype)
        self._device = _dev.device(device)
        self.name = name

    @property
    def device(self):
        return self._device

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
        return self.shape[0]

    def __repr__(self):
        return f"Placeholder(shape={self.shape}, dtype={self.dtype.name}, device='{self._device}')"

    def numpy(self):
        raise errors.ValueError(f"{self!r} has no values: it only stands for a shape during "
                                f"compile; run the model on real tensors to get numbers")

    __array__ = numpy

    def __getattr__(self, name):
        f = _method(name)
        return f.__get__(self, Placeholder)


def _method(name):
    from . import functional
    f = getattr(functional, name, None) if not name.startswith("_") else None
    if f is None or not callable(f) or name in functional.NOT_METHODS:
        raise AttributeError(f"'Placeholder' object has no attribute '{name}'")

    def method(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    method.__name__ = name
    return method


def _operator(name, reflected=False):
    def method(self, other):
        from . import functional
        f = getattr(functional, name)
        return f(other, self) if reflected else f(self, other)
    method.__name__ = name
    return method


for _op, _name in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "true_divide"),
                   ("pow", "pow"), ("matmul", "matmul")]:
    setattr(Placeholder, f"__{_op}__", _operator(_name))
    setattr(Placeholder, f"__r{_op}__", _operator(_name, True))
for _op in ("eq", "ne", "lt", "le", "gt", "ge"):
    setattr(Placeholder, f"__{_op}__", _operator(_op))
Placeholder.__hash__ = object.__hash__
Placeholder.__neg__ = lambda self: _method("neg")(self)
Placeholder.__getitem__ = lambda self, key: _method("getitem")(self, key)
Placeholder.T = property(lambda self: _method("permute")(self, *reversed(range(self.ndim))))


def is_placeholder(x):
    return x.__class__ is Placeholder
