"""hl.onnx: ONNX models in and out (SINGA's sonnx API, wider).

    rep = hl.onnx.prepare("model.onnx")          # inference: BackendRep
    y, = rep.run([x])
    m = hl.onnx.ONNXModel("model.onnx")          # a trainable hl.Module
    hl.onnx.to_onnx(model, [x], opset=17)        # export a Module (or SINGA's to_onnx([x], [y]))

Files: load.py (reading and checking), graph.py (the nodes in order), node.py (what a
handler sees), ops/ (the import table, one module per op family), program.py (folding and
running), model.py (ONNXModel), backend.py (prepare, BackendRep, Backend), export.py and
export_ops.py (to_onnx).
"""
from .backend import Backend, BackendRep, prepare, run_model, run_node
from .model import ONNXModel
from .ops import onnx_op, supported_ops

SONNXModel = ONNXModel  # SINGA's name


def to_onnx(*args, **kwargs):
    """Exports an hl Module, or SINGA's ``to_onnx([x], [y, ...])``: see export.to_onnx."""
    from .export import to_onnx as _to_onnx
    return _to_onnx(*args, **kwargs)


def save(model, path):
    """Writes an onnx.ModelProto to ``path`` atomically (see export.save)."""
    from .export import save as _save
    return _save(model, path)

__all__ = ["Backend", "BackendRep", "ONNXModel", "SONNXModel", "onnx_op", "prepare",
           "run_model", "run_node", "save", "supported_ops", "to_onnx"]
