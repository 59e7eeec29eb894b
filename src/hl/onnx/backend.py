"""Inference on an imported model: prepare() -> BackendRep.run(), and hl.onnx.Backend, which
follows onnx.backend.base.Backend so ONNX's own backend test runner can drive hl."""
import numpy as np
import onnx
import onnx.backend.base

from .. import errors
from ..devices import empty_cache
from .._tensor import Tensor, tensor as _tensor
from ..autograd import no_grad
from . import ops
from .model import ONNXModel, _device
from .node import Node


class BackendRep(onnx.backend.base.BackendRep):
    """A prepared model. ``run`` takes numpy arrays or hl tensors (a list in input order, or
    a dict by input name) and returns numpy arrays."""

    def __init__(self, model):
        self.model = model  # an ONNXModel whose initializers are all constants

    @property
    def graph(self):
        return self.model.graph

    @property
    def nodes(self):
        return self.model.graph.nodes

    def run(self, inputs, last_layers=None, aux_output=(), all_outputs=False, **kwargs):
        """The graph's outputs in order (a list of numpy arrays). ``last_layers`` stops at a
        node counted as SINGA does (-2 the last node, -3 the one before) and returns its
        outputs; ``aux_output`` (names) also returns those intermediates, as
        ``(outputs, {name: array})``; ``all_outputs=True`` returns {name: array} for every
        value computed."""
        if last_layers is None and not aux_output and not all_outputs:
            outs = self.model.replay_arrays(inputs)
            if outs is not None:
                return _own_memory(outs)
        with no_grad():
            result = self.model._run(inputs, last_layers, aux_output, False,
                                     "BackendRep.run", keep_all=all_outputs)
        if all_outputs:
            values = result[1]
            return {name: _np(v) for name, v in values.items()
                    if name not in self.model.program.constants or name in _node_outputs(self)}
        if aux_output:
            outs, aux = result
            return _own_memory([_np(o) for o in outs]), {k: _np(v) for k, v in aux.items()}
        return _own_memory([_np(o) for o in result])


def _own_memory(arrays):
    """arrays, each in memory of its own (as onnxruntime returns them): an output that is
    another's value (Identity) is copied, so writing one never changes the other."""
    if len(arrays) < 2:
        return arrays
    for i, a in enumerate(arrays):
        if any(np.may_share_memory(a, b) for b in arrays[:i]):
            arrays[i] = a.copy()
    return arrays


def _node_outputs(rep):
    return {n for node in rep.nodes for n in node.outputs}


def _np(t):
    return t.numpy() if isinstance(t, Tensor) else np.asarray(t)


def prepare(model, device=None, check=True, **kwargs):
    """Imports ``model`` (an onnx.ModelProto or a path) for inference: checks it, runs shape
    inference, folds its constant subgraphs, and returns a BackendRep."""
    rep = BackendRep(ONNXModel(model, device=device, trainable=False, check=check))
    # the plain copies of weights now kept only packed went to the caching allocator:
    # give them back (the program's first run allocates its own sizes)
    empty_cache(rep.model._device)
    return rep


def run_model(model, inputs, device=None, **kwargs):
    return prepare(model, device, **kwargs).run(inputs)


def run_node(node, inputs, device=None, outputs_info=None, opset_version=None, **kwargs):
    """Runs one onnx.NodeProto on ``inputs`` (arrays in the node's input order) and returns
    its outputs as a tuple of numpy arrays."""
    opset = opset_version or onnx.defs.onnx_opset_version()
    n = Node(node, 0, opset)
    n.handler = ops.lookup(n.domain, n.op_type, opset)
    if n.handler is None:
        raise errors.UnsupportedError(
            f"ONNX operator {n.op_type!r} (domain {n.domain or 'ai.onnx'!r}, opset {opset}) "
            f"in node '{n.name}' is not supported by hl")
    dev = _device(device)
    n.device = dev
    xs = []
    inputs = list(inputs)
    for i, name in enumerate(n.inputs):
        if not name or i >= len(inputs) or inputs[i] is None:
            xs.append(None)
        else:
            x = inputs[i]
            xs.append(x if isinstance(x, Tensor) else _tensor(np.asarray(x), device=dev))
    with no_grad():
        ys = n.handler(n, *xs)
    if not isinstance(ys, (tuple, list)):
        ys = (ys,)
    return tuple(_np(y) for y, name in zip(ys, n.outputs) if name)


class Backend(onnx.backend.base.Backend):
    """hl as an ONNX backend (onnx.backend.base.Backend's class methods)."""

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        try:
            from .graph import Graph
            from .load import opsets
            Graph(model.graph, opsets(model))
            return True
        except errors.HLError:
            return False

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        return prepare(model, device, **kwargs)

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        return run_node(node, inputs, device, outputs_info, **kwargs)

    @classmethod
    def supports_device(cls, device):
        kind = str(device).split(":")[0].upper()
        if kind == "CPU":
            return True
        if kind == "CUDA":
            from .. import cuda_available
            return cuda_available()
        return False
