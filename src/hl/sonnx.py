"""SINGA's ONNX module names, so a SINGA script ports by changing its imports:

    from hl import sonnx                 # was: from singa import sonnx
    rep = sonnx.prepare(onnx_model, device=dev)
    y = rep.run([x])[0]

Everything here is hl.onnx under SINGA's spellings.
"""
from .onnx import Backend, BackendRep, ONNXModel, prepare, run_node

SONNXModel = ONNXModel
SingaBackend = Backend
SingaRep = BackendRep


def to_onnx(*args, **kwargs):
    """SINGA's ``to_onnx([x], [y, ...], model_name=...)`` (and hl's module form):
    hl.onnx.to_onnx."""
    from .onnx import to_onnx as _to_onnx
    return _to_onnx(*args, **kwargs)


__all__ = ["Backend", "BackendRep", "ONNXModel", "SONNXModel", "SingaBackend", "SingaRep",
           "prepare", "run_node", "to_onnx"]
