"""Layers that combine or wrap computations, mostly for Keras's functional API:
Concatenate, Add, Multiply (several inputs, one output), Lambda (any function as a layer)
and FunctionCall (what ``a + b`` on symbolic tensors records)."""
import types

from .. import errors
from ..autograd import functional as F
from .layer import Layer
from .symbolic import register_operation_layer


def _tensors(layer, xs):
    """Keras passes the inputs as one list (``Concatenate()([a, b])``); hl also takes them as
    separate arguments."""
    if len(xs) == 1 and isinstance(xs[0], (list, tuple)):
        xs = tuple(xs[0])
    if len(xs) < 2:
        raise errors.ValueError(f"{layer.describe()}: expected at least 2 inputs, received "
                                f"{len(xs)}")
    return xs


class Concatenate(Layer):
    """Joins its inputs along ``axis`` (the last by default), as keras.layers.Concatenate."""

    def __init__(self, axis=-1, name=None):
        super().__init__(name)
        self.axis = int(axis)

    def forward(self, *xs):
        return F.concat(list(_tensors(self, xs)), self.axis)

    def extra_repr(self):
        return f"axis={self.axis}"


class Add(Layer):
    """The element-wise sum of its inputs (keras.layers.Add)."""

    def forward(self, *xs):
        xs = _tensors(self, xs)
        out = xs[0]
        for x in xs[1:]:
            out = out + x
        return out


class Multiply(Layer):
    """The element-wise product of its inputs (keras.layers.Multiply)."""

    def forward(self, *xs):
        xs = _tensors(self, xs)
        out = xs[0]
        for x in xs[1:]:
            out = out * x
        return out


class Lambda(Layer):
    """``Lambda(fn)``: fn(*inputs) as a layer without parameters (keras.layers.Lambda). A model
    holding a lambda or a local function cannot be stored with hl.save (its loader admits no
    functions); a function of hl (``Lambda(hl.relu)``) can."""

    def __init__(self, function, name=None):
        super().__init__(name)
        if not callable(function):
            raise errors.ValueError(f"Lambda: function must be callable, got {function!r}")
        self.function = function

    def forward(self, *xs, **kwargs):
        return self.function(*xs, **kwargs)

    def extra_repr(self):
        return getattr(self.function, "__name__", repr(self.function))


@register_operation_layer
class FunctionCall(Layer):
    """``hl.<fn_name>(*args)`` as a layer: what an operator or a Tensor method applied to
    symbolic tensors records (``a + b`` is FunctionCall('add')). Keeps the name, not the
    function, so models holding one save with hl.save."""

    def __init__(self, fn_name, name=None):
        super().__init__(name)
        _function(fn_name)
        self.fn_name = fn_name

    def forward(self, *args, **kwargs):
        # checked again here: a model loaded from a file sets fn_name without __init__
        return _function(self.fn_name)(*args, **kwargs)

    def extra_repr(self):
        return self.fn_name


def _function(name):
    """hl.autograd.functional's public function `name`, and nothing else (not a module, a
    class or a private helper), whatever string a saved model holds."""
    fn = getattr(F, name, None) if isinstance(name, str) and not name.startswith("_") else None
    if not isinstance(fn, types.FunctionType) or not fn.__module__.startswith("hl."):
        raise errors.ValueError(f"FunctionCall: {name!r} is not a function of hl")
    return fn


__all__ = ["Add", "Concatenate", "FunctionCall", "Lambda", "Multiply"]
