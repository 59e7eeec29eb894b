"""hl.onnx: ONNX models in and out (SINGA's sonnx API, wider).

    rep = hl.onnx.prepare("model.onnx")          # inference: BackendRep
    y, = rep.run([x])
    m = hl.onnx.ONNXModel("model.onnx")          # a trainable hl.Module
    hl.onnx.to_onnx(model, [x], opset=17)        # export a Module (or SINGA's to_onnx([x], [y]))

Files: load.py (reading and checking), types.py (element types), graph.py (the nodes in
order), node.py (what a handler sees), registry.py (the import and export tables), ops/ (one
module per op family: its import handlers and export rules side by side), program.py
(folding and running), control.py (If, Loop, Scan: ops that run subgraphs), model.py
(ONNXModel), backend.py (prepare, BackendRep, Backend), export/ (to_onnx: tracing, assembling).
"""
from .backend import Backend, BackendRep, prepare, run_model, run_node
from .model import ONNXModel
from . import control  # noqa: F401 - registers If, Loop, Scan, FlexAttention, Optional
from .ops import onnx_op, supported_ops

SONNXModel = ONNXModel  # SINGA's name


def to_onnx(*args, **kwargs):
    """Exports an hl Module, or SINGA's ``to_onnx([x], [y, ...])``: see export.to_onnx."""
    from .export import to_onnx as _to_onnx
    return _to_onnx(*args, **kwargs)


def set_max_tensor_bytes(nbytes):
    """Sets the largest tensor (in bytes) a node of an imported model may create (2 GiB by
    default; docs/onnx.md, "Untrusted models"); returns the previous limit."""
    from .ops import _util
    if not isinstance(nbytes, int) or nbytes <= 0:
        from .. import errors
        raise errors.ValueError(f"set_max_tensor_bytes: expected a positive int, got "
                                f"{nbytes!r}")
    previous, _util.MAX_BYTES = _util.MAX_BYTES, nbytes
    return previous


def save(model, path):
    """Writes an onnx.ModelProto to ``path`` atomically (see export.save)."""
    from .export import save as _save
    return _save(model, path)

__all__ = ["Backend", "BackendRep", "ONNXModel", "SONNXModel", "onnx_op", "prepare",
           "run_model", "run_node", "save", "set_max_tensor_bytes", "supported_ops", "to_onnx"]
