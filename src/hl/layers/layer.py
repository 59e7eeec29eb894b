"""Layer: the building block of models (SINGA's Layer, with Keras's lazy build).

A layer creates its parameters on its first call, from the shapes of its inputs (or at
``Module.compile`` time, from placeholders), so no in-features argument is needed. Override

    initialize(self, *xs)   create parameters with self.add_param / buffers with self.add_state;
                            xs have .shape, .dtype and .device (tensors or placeholders)
    forward(self, *xs)      compute with hl.autograd.functional (so gradients are recorded)

Sub-layers are found through attributes, lists, tuples and dicts, and every parameter and
buffer gets a hierarchical name from the attribute names on the way to it: a Conv2d kept as
``self.conv1`` inside a block kept as ``self.blk1`` owns ``blk1.conv1.W``.

Modes: ``train()`` / ``eval()`` set a layer and everything under it; a layer never switched
follows ``hl.autograd.training`` (SINGA's global flag, True by default).
"""
import collections

import numpy as np

from .. import _core, autograd, errors
from .. import dtypes as _dt
from .. import mixed_precision as _mp
from .._tensor import Tensor, as_tensor
from ..autograd import no_grad
from ..autograd.mode import trace_state as _trace
from ..autograd.placeholder import initialize_inputs
from ..checkpoint.matching import compare, describe_problems
from . import initializers, symbolic
from .keras_api import KerasLayerAPI
from .torch_api import TorchModuleAPI

LoadReport = collections.namedtuple("LoadReport", "missing unexpected mismatched")


class Layer(KerasLayerAPI, TorchModuleAPI):
    def __init__(self, name=None):
        d = self.__dict__
        d["name"] = name
        d["_built"] = False
        d["_param_names"] = []   # local names of this layer's own parameters, in order
        d["_state_names"] = []   # local names of its buffers (batch-norm running stats, ...)
        d["_fixed"] = set()      # local names of parameters created with trainable=False
        d["_trainable"] = True   # Keras's layer.trainable (keras_api.py)
        d["_training"] = None
        d["_parent"] = None
        d["_local_name"] = None
        d["_output_shapes"] = None  # of the building call, for summary
        d["_dtype_policy"] = _mp.global_policy()  # Keras: the policy at construction

    # ---- subclasses override ------------------------------------------------------------

    def initialize(self, *xs):
        """Creates parameters from the inputs' shapes (nothing by default)."""

    def forward(self, *xs, **kwargs):
        raise NotImplementedError(f"{type(self).__name__} defines no forward()")

    # ---- calling ------------------------------------------------------------------------

    def __call__(self, *xs, **kwargs):
        if _trace.tracer is not None:  # hl.onnx.to_onnx: the ops inside are named after self
            with _trace.tracer.scope(self):
                return self._layer_call(xs, kwargs)
        return self._layer_call(xs, kwargs)

    def _layer_call(self, xs, kwargs):
        if _mp.autocast_needed(self.__dict__.get("_dtype_policy")):
            kind = _mp.device_kind_of(xs)
            if kind in ("cpu", "cuda"):  # a mixed policy: the forward runs under autocast
                with self._dtype_policy.autocast(kind):
                    return self._layer_call(xs, kwargs)
        if symbolic.any_symbolic(xs, kwargs):  # the functional API: record the call
            return symbolic.record_call(self, xs, kwargs)
        if not self._built:
            self._check_init_attrs()
            if _core.recording() and type(self).initialize is not Layer.initialize:
                # its initialisation would be recorded, and every replay would redo it
                raise errors.GraphBreak(
                    f"{self.describe()}: the layer would create its parameters while a plan "
                    f"is recorded; call it (or compile the model) once first",
                    op=f"{type(self).__name__} initialize", transient=True)
            self._link_children()
            with no_grad():
                self.initialize(*_mp.variable_inputs(initialize_inputs(xs)))
            self.__dict__["_built"] = True
            out = self.forward(*xs, **kwargs)
            # the output shapes of the building call (summary's column), as Keras keeps its
            # build shapes: placeholders at compile, the first batch otherwise
            self.__dict__["_output_shapes"] = symbolic.shapes_of(out)
            return out
        return self.forward(*xs, **kwargs)

    def _check_init_attrs(self):
        if "_built" not in self.__dict__:
            raise errors.ValueError(
                f"{type(self).__name__}.__init__ did not call super().__init__(); a Layer "
                f"needs it to track its parameters")

    def _link_children(self):
        """Gives sub-layers added after their container was assigned (self.blocks = [];
        self.blocks.append(...)) their parent, so their names and messages are right."""
        for name, child in self.named_children():
            if child._parent is None:
                child.__dict__["_parent"] = self
                child.__dict__["_local_name"] = name

    @property
    def built(self):
        return self._built

    @property
    def dtype_policy(self):
        """Keras's dtype policy (hl.mixed_precision.Policy): the global one when the layer
        was constructed, unless assigned."""
        return self.__dict__.get("_dtype_policy") or _mp.FLOAT32

    @dtype_policy.setter
    def dtype_policy(self, policy):
        self.__dict__["_dtype_policy"] = _mp.Policy(policy)

    # ---- parameters and buffers ---------------------------------------------------------

    def add_param(self, name, shape, init="glorot_uniform", dtype=None, device=None,
                  trainable=True):
        """Creates a parameter tensor, keeps it as attribute `name`, and returns it."""
        dtype = _dt.dtype(dtype) if dtype is not None else _dt.float32
        t = initializers.get(init)(tuple(int(s) for s in shape), dtype, device)
        return self.set_param(name, t, trainable)

    def set_param(self, name, tensor, trainable=True):
        """Adopts `tensor` as parameter `name` (it is not copied). A parameter of a layer
        frozen with ``layer.trainable = False`` is created frozen."""
        fixed = self.__dict__.setdefault("_fixed", set())
        if trainable:
            fixed.discard(name)
        else:
            fixed.add(name)
        trainable = trainable and self.trainable
        tensor.requires_grad = trainable
        tensor.stores_grad = trainable
        tensor.name = self._path(name)
        if name not in self._param_names:
            self._param_names.append(name)
        object.__setattr__(self, name, tensor)
        return tensor

    def add_state(self, name, tensor):
        """Keeps `tensor` as buffer `name`: part of get_states(), never of get_params()
        (batch-norm running statistics, step counters...)."""
        tensor = as_tensor(tensor)
        tensor.requires_grad = False
        tensor.stores_grad = False
        tensor.name = self._path(name)
        if name not in self._state_names:
            self._state_names.append(name)
        object.__setattr__(self, name, tensor)
        return tensor

    def _path(self, local):
        """`local` prefixed with the attribute names from the outermost layer down."""
        parts = [local]
        layer = self
        while layer._parent is not None:
            parts.append(layer._local_name)
            layer = layer._parent
        return ".".join(reversed(parts))

    def __setattr__(self, name, value):
        if "_built" not in self.__dict__ and not name.startswith("_"):
            self._check_init_attrs()
        for child_name, child in _layers_in(name, value):
            if child._parent is self and any(c is child and n == child._local_name
                                             for n, c in self.named_children()):
                continue  # a layer kept twice (weight sharing) keeps its first name
            child.__dict__["_parent"] = self
            child.__dict__["_local_name"] = child_name
        object.__setattr__(self, name, value)

    # ---- walking the tree ---------------------------------------------------------------

    def named_children(self):
        """(name, layer) for each direct sub-layer, in attribute order."""
        seen = set()
        for name, value in self.__dict__.items():
            if name.startswith("_"):
                continue
            for child_name, child in _layers_in(name, value):
                if id(child) not in seen:
                    seen.add(id(child))
                    yield child_name, child

    def named_layers(self, prefix=""):
        """(name, layer) for this layer and everything under it."""
        yield prefix, self
        for name, child in self.named_children():
            yield from child.named_layers(f"{prefix}.{name}" if prefix else name)

    def _named(self, kinds):
        out = {}
        seen = set()
        for prefix, layer in self.named_layers():
            for kind in kinds:
                for local in getattr(layer, kind):
                    t = layer.__dict__[local]
                    if id(t) in seen:  # a layer used twice owns its tensors once
                        continue
                    seen.add(id(t))
                    key = f"{prefix}.{local}" if prefix else local
                    if key in out:
                        raise errors.ValueError(
                            f"{self.describe()}: two different tensors are both named "
                            f"'{key}' (two sub-layers given the same name?); give them "
                            f"distinct names")
                    out[key] = t
                    if self._parent is None:  # from the root, names are the full paths
                        t.name = key
        return out

    def get_params(self):
        """{hierarchical name: parameter tensor} (the tensors themselves, not copies)."""
        return self._named(("_param_names",))

    def get_states(self):
        """Parameters plus buffers: everything needed to restore the layer."""
        return self._named(("_param_names", "_state_names"))

    def set_params(self, values, strict=True):
        """Copies values (name -> Tensor or array) into the parameters, in place."""
        return _load(self, self.get_params(), values, strict, "set_params")

    def set_states(self, values, strict=True):
        """Copies values into the parameters and buffers, in place."""
        return _load(self, self.get_states(), values, strict, "set_states")

    def save_weights(self, path, overwrite=True):
        """Writes the states to an HDF5 file, one group per layer (hl/checkpoint/weights.py),
        atomically."""
        from ..checkpoint import weights
        weights.save(self, path, overwrite)

    def load_weights(self, path, strict=True):
        """Loads a file written by save_weights into the states, in place."""
        from ..checkpoint import weights
        weights.load(self, path, strict)

    def parameters(self, recurse=True):
        """Every parameter tensor, frozen ones included, as PyTorch's Module.parameters
        (optimisers skip those without a gradient)."""
        return [t for _, t in self.named_parameters(recurse=recurse)]

    def _unbuilt_layers(self):
        """Names of the layers under this one that create parameters but have not been
        called (so their parameters do not exist yet)."""
        return _unbuilt(self)

    # ---- modes --------------------------------------------------------------------------

    @property
    def training(self):
        return self._training if self._training is not None else autograd.training

    def train(self, mode=True):
        for _, layer in self.named_layers():
            layer.__dict__["_training"] = bool(mode)
        return self

    def eval(self):
        return self.train(False)

    # ---- display ------------------------------------------------------------------------

    def extra_repr(self):
        return ""

    def __repr__(self):
        head = f"{type(self).__name__}({self.extra_repr()})"
        kids = list(self.named_children())
        if not kids:
            return head
        lines = [head]
        for name, child in kids:
            body = repr(child).replace("\n", "\n  ")
            lines.append(f"  ({name}): {body}")
        return "\n".join(lines)

    def describe(self):
        """'Conv2d 'blk1.conv1'': how errors name a layer."""
        path = self._path("")[:-1] if self._parent is not None else (self.name or "")
        return f"{type(self).__name__} '{path}'" if path else type(self).__name__


def _layers_in(name, value):
    """(name, layer) for a layer held directly or inside a list, tuple or dict."""
    if isinstance(value, Layer):
        yield name, value
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            if isinstance(v, Layer):
                yield f"{name}.{i}", v
    elif isinstance(value, dict):
        for k, v in value.items():
            if isinstance(v, Layer):
                yield f"{name}.{k}", v


def _unbuilt(layer):
    """Names of the layers under `layer` that create parameters but have not been called."""
    return [name or type(sub).__name__ for name, sub in layer.named_layers()
            if not sub._built and type(sub).initialize is not Layer.initialize]


def _load(layer, targets, values, strict, op):
    unbuilt = _unbuilt(layer)
    if unbuilt and values and not targets:
        raise errors.ValueError(
            f"{op}: {layer.describe()} has no parameters yet: layers create them on their "
            f"first call. Call it once on an input (or compile it with hl.Placeholder inputs) "
            f"before loading")
    missing, unexpected, wrong, ready = compare(targets, values)
    mismatched = [f"{k}: expected {want}, got {got}" for k, want, got in wrong]
    if strict and (missing or unexpected or mismatched):
        parts = describe_problems(missing, unexpected, wrong,
                                  ("missing", "unexpected", "wrong shape", "expected", "got"))
        if unbuilt:
            parts.append(f"(layers {unbuilt} have not been called yet, so their parameters "
                         f"do not exist)")
        raise errors.ValueError(f"{op} on {layer.describe()}: " + ", ".join(parts) +
                                "; nothing was loaded (pass strict=False to load what fits)")
    with no_grad():
        for t, v in ready:
            t.copy_(v if isinstance(v, Tensor) else np.asarray(v))
    return LoadReport(missing, unexpected, mismatched)


__all__ = ["Layer", "LoadReport"]
