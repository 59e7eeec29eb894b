"""SINGA's sonnx module over hl.onnx.

``to_onnx([x], [y])`` exports what autograd recorded from x to y; ``prepare(model,
device=dev)`` imports an onnx.ModelProto (or a path) and ``rep.run([x])`` returns hl.singa
Tensors computed with hl's autograd ops, so they can be trained further (SINGA's re-training
and transfer learning); ``SONNXModel`` is a SINGA Model around an imported graph.
"""
from .. import errors
from .. import onnx as _onnx
from . import model as _model
from .device import Device
from .tensor import _py

SingaBackend = _onnx.Backend


def _device(device):
    if device is None or isinstance(device, Device) or not isinstance(device, str):
        return device
    if device.upper() == "CPU":
        return "cpu"
    if device.upper() in ("CUDA", "GPU"):
        return "cuda"
    raise errors.DeviceError(f"sonnx.prepare: unknown device {device!r}; use 'CPU' or a "
                             f"device from hl.singa.device")


class SingaRep:
    """A prepared ONNX graph: ``run(inputs)`` returns the list of its outputs as Tensors
    (recorded by autograd, so a loss on them trains the graph's parameters)."""

    def __init__(self, model, device=None, **kwargs):
        self.model = _onnx.ONNXModel(model, device=_device(device), trainable=True)
        self.is_graph = False     # SINGA's switch for its graph mode: hl runs eagerly either way
        self.device = device

    @property
    def layers(self):
        """(node, node) pairs of the graph, in order (SINGA pairs each node with its
        operator; here the node stands for both)."""
        return [(n, n) for n in self.model.nodes]

    def run(self, x, last_layers=None, aux_output=(), **kwargs):
        out = self.model.forward(*x, last_layers=last_layers, aux_output=aux_output)
        if aux_output:
            outs, aux = out
            return [_py(t) for t in outs], {k: _py(v) for k, v in aux.items()}
        return [_py(t) for t in out]


def prepare(model, device=None, **kwargs):
    return SingaRep(model, device, **kwargs)


def to_onnx(inputs, y, model_name="sonnx"):
    """The ONNX model of what autograd recorded from `inputs` to the outputs `y`. Numbers
    and shapes in `inputs` are dropped: they are attributes of the graph (as in SINGA)."""
    from .._tensor import Tensor as _HLTensor
    inputs = [x for x in inputs if isinstance(x, _HLTensor)]
    return _onnx.to_onnx(inputs, list(y) if isinstance(y, (list, tuple)) else [y],
                         model_name=model_name)


def run_node(node, inputs, device=None, **kwargs):
    return _onnx.run_node(node, inputs, _device(device), **kwargs)


def run_model(model, inputs, device=None, **kwargs):
    return prepare(model, device).run(inputs)


class SONNXModel(_model.Model, _onnx.ONNXModel):
    """A SINGA Model around an imported graph: ``forward(*x)`` returns its outputs as a list;
    subclass it to add layers and train_one_batch (transfer learning)."""

    def __init__(self, onnx_model):
        _onnx.ONNXModel.__init__(self, onnx_model, trainable=True)
        self.__dict__.update(graph_mode=False, sequential=False)

    def forward(self, *x, aux_output=(), last_layers=None, **kwargs):
        out = _onnx.ONNXModel.forward(self, *x, last_layers=last_layers, aux_output=aux_output)
        if aux_output:
            return [_py(t) for t in out[0]], {k: _py(v) for k, v in out[1].items()}
        return [_py(t) for t in out]


__all__ = ["SingaBackend", "SingaRep", "SONNXModel", "prepare", "run_model", "run_node",
           "to_onnx"]
