"""ONNXModel: an imported ONNX graph as a trainable hl Module.

Floating-point initializers become parameters, with legal hl names derived from their ONNX
names (``onnx_names`` maps back); BatchNormalization's running mean and variance become
states; integer initializers (shapes, indices) stay constants. ``forward`` runs the graph
with hl's autograd ops, so gradients reach every parameter; in training mode Dropout drops
and BatchNormalization uses and updates batch statistics.

Transfer learning, as SINGA's community sketched it:

    class MyModel(hl.onnx.ONNXModel):
        def __init__(self, onnx_model):
            super().__init__(onnx_model)
            self.head = hl.layers.Linear(10)
        def forward(self, x):
            feats = super().forward(x, last_layers=-3)[0]   # before the classifier
            return self.head(feats)
"""
import keyword
import re

import numpy as np
import onnx

from .. import devices as _dev
from .. import errors
from .._tensor import tensor as _tensor
from ..autograd import Placeholder, no_grad
from ..autograd.mode import trace_state as _trace
from ..model import Module
from .graph import Graph
from .load import (inferred_value_info, load_model_and_weights, onnx_errors, opsets,
                   without_initializers)
from .program import Program, check_feeds


class ONNXModel(Module):
    def __init__(self, onnx_model, device=None, trainable=True, check=True, name=None):
        """``onnx_model``: an onnx.ModelProto or a path. ``trainable=False`` keeps every
        initializer a constant (what prepare() does for inference: more folding, no
        parameters)."""
        super().__init__(name)
        where = onnx_model if isinstance(onnx_model, str) else "ONNXModel"
        with onnx_errors(repr(where)):
            model, weights, sk = load_model_and_weights(onnx_model, check,
                                                        for_training=trainable)
            self._build(model, device, trainable, weights)
        known = {v.name for v in self._onnx_meta.graph.value_info}
        self._onnx_meta.graph.value_info.extend(
            v for v in inferred_value_info(model, sk) if v.name not in known)

    def _build(self, model, device, trainable, weights=None):
        d = self.__dict__
        device = _device(device)
        weights = weights or {}
        graph = Graph(model.graph, opsets(model), weights=weights)
        stats = _batchnorm_stats(graph)
        d["onnx_names"] = {}        # hl name -> ONNX initializer name
        d["_by_onnx"] = {}          # ONNX initializer name -> hl name
        constants = {}
        taken = set(dir(type(self))) | set(self.__dict__)
        for onnx_name, array in graph.initializers.items():
            t = weights.pop(onnx_name, None)  # read from the file into a CPU tensor already
            if t is None or t.device != device:
                t = _tensor(np.ascontiguousarray(array).reshape(array.shape), device=device)
            if trainable and onnx_name in stats:
                local = _legal_name(onnx_name, taken)
                self.add_state(local, t)
            elif trainable and array.dtype.kind == "f":
                local = _legal_name(onnx_name, taken)
                self.set_param(local, t)
            else:
                constants[onnx_name] = t
                continue
            self.onnx_names[local] = onnx_name
            self._by_onnx[onnx_name] = local
        self._adopt(model, graph, device, constants)

    def _adopt(self, model, graph, device, constants):
        """Keeps the graph and its program. The weights live once, as hl tensors: the graph
        forgets its numpy copies and the kept ModelProto (for export and pickling) has no
        initializer data."""
        d = self.__dict__
        meta = without_initializers(model)
        d["_onnx_meta"] = meta
        d["_initializer_order"] = list(graph.initializers)
        graph.initializers = dict.fromkeys(graph.initializers)
        d["graph"] = graph
        d["_batchnorms"] = [n for n in graph.nodes if n.op_type == "BatchNormalization"]
        d["_value_names"] = set(graph.initializers) | {v.name for v in graph.proto.input} | {
            name for node in graph.nodes for name in node.outputs if name}  # aux_output's
        d["_input_names"] = [spec.name for spec in graph.inputs]  # a run's list order
        d["program"] = Program(graph, device, constants, fuse=not self._by_onnx)
        d["_device"] = device
        d["_built"] = True

    def initializer_values(self):
        """{ONNX initializer name: its current tensor}, in the file's order: the parameters
        and states as trained, the constants as imported."""
        own = self._params_by_onnx_name()
        return {name: own[name] if name in own else self.program.constant(name)
                for name in self._initializer_order}

    # ---- running ------------------------------------------------------------------------

    @property
    def nodes(self):
        """The graph's nodes in topological order (what ``last_layers`` counts)."""
        return self.graph.nodes

    def node_index(self, last_layers):
        """The index of the last node run for ``last_layers``, counted as SINGA does:
        n >= 0 is node n, a negative n is node (n + 1) % number_of_nodes, so -2 is the
        last node and -3 the one before it."""
        count = len(self.graph.nodes)
        if last_layers is None:
            return None
        if not isinstance(last_layers, (int, np.integer)) or isinstance(last_layers, bool):
            raise errors.ValueError(f"last_layers must be an int, got {last_layers!r}")
        index = int(last_layers) if last_layers >= 0 else (int(last_layers) + 1) % count
        if not 0 <= index < count:
            raise errors.IndexError(f"last_layers={last_layers}: the graph has {count} "
                                    f"nodes")
        return index

    def forward(self, *inputs, last_layers=None, aux_output=(), **named):
        """Runs the graph and returns the list of its outputs (hl tensors, graph order); with
        ``last_layers``, the outputs of that node instead. ``aux_output`` names intermediate
        values to return as well, as ``(outputs, {name: tensor})``. Inputs are positional in
        the graph's input order, or by name."""
        if named:
            if inputs:
                raise errors.ValueError("forward: pass the inputs by position or by name, "
                                        "not both")
            inputs = named
        elif len(inputs) == 1 and isinstance(inputs[0], dict):
            inputs = inputs[0]
        if not isinstance(inputs, dict) and any(isinstance(x, Placeholder) for x in inputs):
            return self._placeholder_forward(inputs, last_layers, aux_output)
        return self._run(inputs, last_layers, aux_output, bool(self.training),
                         f"{type(self).__name__}.forward")

    def _run(self, inputs, last_layers, aux_output, training, where, keep_all=False):
        graph = self.graph
        feeds = check_feeds(graph, inputs, where)
        stop = self.node_index(last_layers)
        if isinstance(aux_output, str):
            aux_output = (aux_output,)
        for name in aux_output:
            if name not in self._value_names:
                raise errors.ValueError(f"{where}: aux_output {name!r} is no value of the "
                                        f"graph")
        values = self.program.run(feeds, self._params_by_onnx_name(), training, stop,
                                  keep=aux_output, keep_all=keep_all,
                                  eval_nodes=self._frozen_batchnorms() if training else ())
        if stop is None:
            outs = [values[o.name] for o in graph.outputs]
        else:
            outs = [values[n] for n in graph.nodes[stop].outputs if n]
        if keep_all:
            return outs, values
        if aux_output:
            return outs, {name: values[name] for name in aux_output}
        return outs

    def replay_arrays(self, inputs):
        """The graph's outputs (numpy arrays, in order) when inputs are numpy arrays (a list
        in input order, or a dict by name) of a signature the program already replays as a
        plan and the model has no parameters; else None (the caller runs _run). Skips
        check_feeds and the layers between: a replay at batch 1 is a few milliseconds, and
        Python right after it runs 2-3x slower than hot, from cold caches (_run's path cost
        MobileNetV2's batch-1 run ~0.25 ms at two threads)."""
        if self._by_onnx or _trace.tracer is not None:
            return None
        if isinstance(inputs, np.ndarray):
            inputs = [inputs]
        if isinstance(inputs, dict):
            feeds = inputs
        elif isinstance(inputs, (list, tuple)) and len(inputs) == len(self._input_names):
            feeds = dict(zip(self._input_names, inputs))
        else:
            return None
        if not all(type(a) is np.ndarray for a in feeds.values()):
            return None
        return self.program.plans.replay_arrays(feeds)

    def _placeholder_forward(self, inputs, last_layers, aux_output):
        """compile([hl.Placeholder(...)]): the parameters exist already; one run on zeros
        gives the output shapes."""
        zeros = [_tensor(np.zeros(x.shape, dtype=x.dtype.np), device=self._device)
                 for x in inputs]
        with no_grad():
            outs = self._run(zeros, last_layers, aux_output, False, "compile")
        if aux_output:
            outs = outs[0]
        return [Placeholder(o.shape, o.dtype, o.device) for o in outs]

    def _frozen_batchnorms(self):
        """BatchNormalization nodes whose scale and bias are both frozen. As in Keras, they
        run in inference mode while the model trains: a frozen body keeps its statistics."""
        frozen = set()
        for node in self._batchnorms:
            affine = [self._by_onnx.get(name) for name in node.inputs[1:3]]
            if all(a is not None and not getattr(self, a).requires_grad for a in affine):
                frozen.add(node.index)
        return frozen

    def _params_by_onnx_name(self):
        return {onnx_name: getattr(self, local) for onnx_name, local in self._by_onnx.items()}

    # ---- freezing -----------------------------------------------------------------------

    def freeze(self, *names):
        """Stops training the parameters whose hl or ONNX name equals or starts with one of
        ``names`` (all of them when none is given). Returns the hl names frozen. A
        BatchNormalization whose scale and bias are both frozen then runs in inference mode
        even while the model trains (Keras's rule for fine-tuning): it normalises with its
        running statistics and leaves them unchanged."""
        return self._set_trainable(names, False)

    def unfreeze(self, *names):
        """Trains again the parameters matched as in freeze (all when none is given)."""
        return self._set_trainable(names, True)

    def _set_trainable(self, names, trainable):
        hit = []
        matched = set()
        for local, onnx_name in self.onnx_names.items():
            t = getattr(self, local)
            if local not in self._param_names:
                continue  # a state
            for n in names or ("",):
                if local.startswith(n) or onnx_name.startswith(n):
                    matched.add(n)
                    t.requires_grad = trainable
                    t.stores_grad = trainable
                    hit.append(local)
                    break
        unknown = [n for n in names if n not in matched]
        if unknown:
            raise errors.ValueError(f"{'un' if trainable else ''}freeze: no parameter's name "
                                    f"starts with {unknown}; the parameters are "
                                    f"{list(self.onnx_names)[:6]}...")
        return hit

    # ---- pickling (hl.save / hl.load) ---------------------------------------------------

    def __getstate__(self):
        # The graph travels as ONNX bytes without weights; the parameters and states as the
        # module's own tensors (hl.save stores those), the constants as arrays.
        state = dict(self.__dict__)
        state["_onnx_meta"] = state["_onnx_meta"].SerializeToString()
        state["_onnx_constants"] = {name: t.numpy() for name, t in
                                    self.initializer_values().items()
                                    if name not in self._by_onnx}
        for k in ("graph", "program", "_device", "_batchnorms", "_value_names"):
            state.pop(k)
        return state

    def __setstate__(self, state):
        _check_pickled_state(state)
        try:
            model = onnx.load_from_string(state.pop("_onnx_meta"))
        except Exception as e:  # noqa: BLE001 - protobuf's DecodeError and kin
            raise errors.ONNXError(f"ONNXModel: the pickled graph is not a valid ONNX "
                                   f"model ({type(e).__name__}: {e})") from None
        arrays = state.pop("_onnx_constants")
        self.__dict__.update(state)
        own = {onnx_name: state[local] for local, onnx_name in state["onnx_names"].items()}
        device = next(iter(own.values())).device if own else _dev.cpu()
        arrays.update({name: t.numpy() for name, t in own.items()})
        from onnx import numpy_helper
        model.graph.initializer.extend(numpy_helper.from_array(np.asarray(arrays[name]), name)
                                       for name in state["_initializer_order"])
        graph = Graph(model.graph, opsets(model))
        constants = {name: _tensor(np.ascontiguousarray(a).reshape(a.shape), device=device)
                     for name, a in graph.initializers.items() if name not in own}
        self._adopt(model, graph, device, constants)
    __setstate__.checks_its_state = True  # hl.load admits it: _check_pickled_state

    def extra_repr(self):
        g = self.graph
        return (f"{len(g.nodes)} nodes, inputs {[v.name for v in g.inputs]}, "
                f"outputs {[v.name for v in g.outputs]}")


def _device(device):
    if device is None:
        return _dev.get_default_device()
    if isinstance(device, str):
        kind = device.strip().lower()
        if kind.startswith("cuda"):
            index = int(kind.split(":")[1]) if ":" in kind else 0
            return _dev.cuda(index)
        if kind == "cpu":
            return _dev.cpu()
    return _dev.device(device)


def _legal_name(onnx_name, taken):
    """An attribute name for an ONNX initializer: non-identifier characters become '_',
    a leading digit or keyword gets a prefix, clashes get a numbered suffix."""
    name = re.sub(r"\W", "_", onnx_name).strip("_") or "param"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = "p_" + name
    base, i = name, 1
    while name in taken:
        name = f"{base}_{i}"
        i += 1
    taken.add(name)
    return name


def _batchnorm_stats(graph):
    """Initializer names read as BatchNormalization's running mean and variance."""
    names = set()
    for node in graph.nodes:
        if node.op_type == "BatchNormalization":
            names.update(n for n in node.inputs[3:5] if n in graph.initializers)
    return names


def _check_pickled_state(state):
    """What ONNXModel.__getstate__ writes, field by field (hl.load's unpickler admits
    __setstate__ only with this check): the graph as bytes, constants as numeric arrays, the
    parameter map from attribute names to tensors, and initializers that exist."""
    from .._tensor import Tensor
    ok = isinstance(state, dict) and isinstance(state.get("_onnx_meta"), bytes) and \
        isinstance(state.get("_onnx_constants"), dict) and \
        all(isinstance(k, str) and isinstance(v, np.ndarray) and v.dtype.kind in "biufc"
            for k, v in state["_onnx_constants"].items()) and \
        isinstance(state.get("onnx_names"), dict) and \
        all(isinstance(k, str) and isinstance(v, str) and isinstance(state.get(k), Tensor)
            for k, v in state["onnx_names"].items()) and \
        isinstance(state.get("_initializer_order"), list)
    if ok:
        known = set(state["_onnx_constants"]) | set(state["onnx_names"].values())
        ok = all(isinstance(n, str) and n in known for n in state["_initializer_order"])
    if not ok:
        raise errors.ONNXError("ONNXModel: the pickled state is not one ONNXModel writes "
                               "(graph bytes, constant arrays, parameters, initializer order)")
