"""Symbolic tensors for Keras's functional API: ``x = hl.Input(shape=(784,))``, then layers
called on x record *layer calls* (nodes), which hl.Model(inputs, outputs) replays on real
tensors.

A SymbolicTensor holds a shape (None for an unknown axis, the batch axis by default), a
dtype, a device and the node that produced it. Calling a layer on symbolic tensors
(Layer.__call__ sends them here) builds the layer and infers the output shapes by running
it once on hl.Placeholder stand-ins (unknown axes get a stand-in size, reported back as
None), and wraps the outputs as new symbolic tensors. Only layer calls are recorded, never
the ops inside them, so the graph does not depend on how placeholders compute shapes.
Operators and Tensor methods on symbolic tensors (``a + b``, ``x.relu()``, ``x[:, 0]``)
record a FunctionCall layer (merge.py) that applies hl's function of that name.
"""
import itertools

from .. import dtypes as _dt
from .. import errors
from ..autograd import Placeholder, no_grad
from ..autograd.placeholder import standing_in_for
from ..autograd.methods import METHODS as TENSOR_METHODS

# The size a placeholder gets for an unknown axis (the batch). A prime that no real layer
# size is likely to be, so an output axis of this size is reported back as None.
UNKNOWN = 9973

_ids = itertools.count()


class Node:
    """One recorded call: ``layer(*args, **kwargs)`` whose arguments may hold symbolic
    tensors (in lists, tuples and dicts too), producing ``outputs`` (a flat list of
    SymbolicTensor; ``structure`` is what the call returned, with them in place)."""

    def __init__(self, layer, args, kwargs):
        self.layer, self.args, self.kwargs = layer, args, kwargs
        self.outputs = []
        self.structure = None
        self.id = next(_ids)

    def inputs(self):
        """The symbolic tensors among the call's arguments, in order."""
        return [t for t in _flatten((self.args, self.kwargs)) if type(t) is SymbolicTensor]


class SymbolicTensor:
    """A tensor of the functional API: a shape (None where unknown), a dtype, and where it
    came from (``node``, ``index`` among its outputs; an Input has no node)."""

    def __init__(self, shape, dtype=_dt.float32, device=None, node=None, index=0, name=None):
        self.shape = tuple(None if d is None else int(d) for d in shape)
        self.dtype = _dt.dtype(dtype)
        self.device = device
        self.node = node
        self.index = index
        self.name = name

    @property
    def ndim(self):
        return len(self.shape)

    def placeholder(self, unknown=UNKNOWN):
        """A Placeholder of this shape, unknown axes of size `unknown` (UNKNOWN while a graph
        is built; 1 for an example input such as to_onnx takes)."""
        shape = tuple(unknown if d is None else d for d in self.shape)
        return Placeholder(shape, self.dtype, self.device, self.name)

    def __repr__(self):
        where = f", name='{self.name}'" if self.name else ""
        return f"<SymbolicTensor shape={self.shape}, dtype={self.dtype.name}{where}>"

    def numpy(self):
        raise errors.ValueError(f"{self!r} has no values: it stands for a model's input or an "
                                f"intermediate while the model is being defined; build "
                                f"hl.Model(inputs, outputs) and call it on data")

    __array__ = numpy

    def __bool__(self):
        raise errors.ValueError(f"{self!r} has no truth value while the model is being "
                                f"defined (no Python `if` on symbolic tensors)")

    def __len__(self):
        raise errors.ValueError(f"{self!r}: len() of a symbolic tensor is unknown")

    def __getattr__(self, name):
        if name not in TENSOR_METHODS:  # a symbolic tensor has the methods a Tensor has
            raise AttributeError(f"'SymbolicTensor' object has no attribute '{name}'")
        return lambda *args, **kwargs: Operation(name)(self, *args, **kwargs)

    __hash__ = object.__hash__


def _operator(fn_name, reflected=False):
    def method(self, other):
        op = Operation(fn_name)
        return op(other, self) if reflected else op(self, other)
    return method


for _op, _name in [("add", "add"), ("sub", "sub"), ("mul", "mul"), ("truediv", "true_divide"),
                   ("pow", "pow"), ("matmul", "matmul")]:
    setattr(SymbolicTensor, f"__{_op}__", _operator(_name))
    setattr(SymbolicTensor, f"__r{_op}__", _operator(_name, True))
SymbolicTensor.__neg__ = lambda self: Operation("neg")(self)
SymbolicTensor.__getitem__ = lambda self, key: Operation("getitem")(self, key)


def Input(shape=None, batch_size=None, dtype=None, name=None, batch_shape=None, device=None):
    """Keras's ``Input(shape=(784,))``: a symbolic input of shape (batch_size, *shape), the
    batch size unknown (None) unless given. ``batch_shape`` gives the whole shape instead,
    None marking unknown axes (``batch_shape=(T, None, F)`` for a time-major sequence)."""
    if (shape is None) == (batch_shape is None):
        raise errors.ValueError("Input: give shape (without the batch axis) or batch_shape "
                                "(with it), exactly one of them")
    if batch_shape is None:
        if isinstance(shape, int):
            shape = (shape,)
        batch_shape = (batch_size,) + tuple(shape)
    batch_shape = tuple(batch_shape)
    for d in batch_shape:
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 0):
            raise errors.ShapeError(f"Input: each size must be a non-negative int or None, got "
                                    f"the shape {batch_shape}")
    from ..devices import device as _device
    return SymbolicTensor(batch_shape, _dt.float32 if dtype is None else dtype,
                          _device(device), name=name)


# The Layer class recorded for ``hl.<fn_name>`` applied to symbolic tensors: merge.FunctionCall,
# which registers itself here (merge.py builds on layer.py, which builds on this module, so
# this module cannot import it; hl.layers imports merge with the package, before any call).
_operation_layer = None


def register_operation_layer(cls):
    global _operation_layer
    _operation_layer = cls
    return cls


def Operation(fn_name):
    """The layer recorded for ``hl.<fn_name>`` on symbolic tensors."""
    return _operation_layer(fn_name)


# ---- what Layer.__call__ asks ---------------------------------------------------------------

def any_symbolic(xs, kwargs):
    """Whether a call's arguments hold a symbolic tensor (directly or in a list/tuple/dict):
    the test on every layer call, so it is kept flat and cheap."""
    for x in xs:
        if type(x) is SymbolicTensor:
            return True
        if isinstance(x, (list, tuple)) and any(type(v) is SymbolicTensor for v in x):
            return True
    if kwargs:
        return any(type(v) is SymbolicTensor for v in _flatten(kwargs))
    return False


def shapes_of(out):
    """The shape(s) of a call's output, kept by the layer for summary."""
    if _is_tensor_like(out):
        return tuple(out.shape)
    if isinstance(out, (list, tuple)):
        return tuple(shapes_of(o) for o in out)
    return None


def record_call(layer, args, kwargs):
    """``layer(*args, **kwargs)`` on symbolic tensors: runs the layer on placeholders (which
    builds it) and returns its outputs as symbolic tensors of a new node."""
    node = Node(layer, args, kwargs)
    stand_in = _map(lambda t: t.placeholder(), (args, kwargs))
    out = run_on_placeholders(layer, *stand_in[0], **stand_in[1])

    def wrap(t):
        shape = tuple(None if d == UNKNOWN else d for d in t.shape)
        s = SymbolicTensor(shape, t.dtype, t.device, node, len(node.outputs))
        node.outputs.append(s)
        return s

    node.structure = _map(wrap, out, _is_tensor_like)
    if not node.outputs:
        raise errors.ValueError(f"{layer.describe()}: called on symbolic tensors, it returned "
                                f"{type(out).__name__}, not tensors")
    return node.structure


def run_on_placeholders(layer, *args, **kwargs):
    """layer(*args) on placeholders, without gradients; a layer that receives a plain meta
    tensor still creates its parameters on the placeholders' device (standing_in_for)."""
    device = next((x.device for x in _flatten((args, kwargs)) if isinstance(x, Placeholder)),
                  None)
    with no_grad(), standing_in_for(device):
        return layer(*args, **kwargs)


# ---- structures ---------------------------------------------------------------------------

def _flatten(obj):
    if isinstance(obj, (list, tuple)):
        for v in obj:
            yield from _flatten(v)
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from _flatten(v)
    else:
        yield obj


def _is_symbolic(obj):
    return type(obj) is SymbolicTensor


def _is_tensor_like(obj):
    return hasattr(obj, "shape") and hasattr(obj, "dtype")


def _map(fn, obj, match=_is_symbolic):
    """obj with each leaf that `match`es replaced by fn(leaf), containers rebuilt: symbolic
    tensors by default; _is_tensor_like for what a layer returned."""
    if match(obj):
        return fn(obj)
    if isinstance(obj, (list, tuple)):
        return type(obj)(_map(fn, v, match) for v in obj)
    if isinstance(obj, dict):
        return {k: _map(fn, v, match) for k, v in obj.items()}
    return obj


def substitute(obj, values):
    """obj with each SymbolicTensor replaced by values[id(tensor)] (the replay)."""
    return _map(lambda t: values[id(t)], obj)


def flatten(obj):
    return list(_flatten(obj))


__all__ = ["Input", "Node", "Operation", "SymbolicTensor", "UNKNOWN", "any_symbolic",
           "record_call", "shapes_of", "substitute"]
