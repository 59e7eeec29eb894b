"""to_onnx: hl models out as ONNX (SINGA's sonnx.to_onnx, wider).

    proto = hl.onnx.to_onnx(model, [x])                 # a Module (or any Layer), traced
    proto = hl.onnx.to_onnx(model, [x], opset=18, dynamic_axes={"x": {0: "batch"}},
                            path="model.onnx")           # written atomically
    proto = hl.onnx.to_onnx([x], [y1, y2])               # SINGA's form: a recorded forward
    hl.onnx.save(proto, "model.onnx")

Finding the graph. A Module is *traced*: its forward runs in eval() mode on copies of the
example inputs marked requires_grad, so every op on them records, while the tracer hook of
hl/autograd/function.py hands each op call (a Function) to the Tracer below with its
arguments, inputs and outputs (trace.py; comparisons and argmax, which have no gradient, take
their Function path while a trace runs so the tracer sees them too). SINGA's form instead walks
the records autograd left on the outputs (``y.creator``, ``fn.src``, ``fn.const_inputs``) back
to the inputs, and replays their shape inference on placeholders.

Two traces. The forward is traced a second time on other values (the example's, rotated and
perturbed) and, for ``dynamic_axes``, other sizes (each dynamic axis a little larger: 1 more
for the first axis name, 2 for the second...). Anything the trace cannot follow (a value read
on the host, an op without a Function, a branch on the values) shows as a constant or an op
sequence that differs between the two, which is an error rather than a model that is wrong on
other inputs. A dimension that differs is dynamic; an op whose ONNX form carries sizes
(Reshape, Expand, Resize, Split) then takes them from the running tensors (0 and -1 in
Reshape, slices of Shape otherwise) instead of writing the traced numbers.

Names. Inputs are named after forward's arguments (or ``input_names``), outputs "output" /
"output_i" (or ``output_names``); parameters keep their hierarchical names ("conv1.W"); a node
is named after the layer that ran it ("conv1", or "lstm/Gemm_2" where a layer runs several
ops), else "OpType_N"; a value after the node that makes it.

Files: trace.py (the tracer), module.py (tracing a Module twice), io.py (input and output
names, dynamic axes), recorded.py (SINGA's form; an ONNXModel written back as its graph),
assemble.py (records -> one ONNX graph), builder.py (what export rules write with). The
per-op translations sit beside their import handlers, one family per module of hl/onnx/ops/
(registered with ``@exports(FunctionClass)`` in hl/onnx/registry.py).
"""
import os
import tempfile

import numpy as np
import onnx

from ... import errors
from ..._tensor import Tensor
from .builder import DEFAULT_OPSET, MIN_OPSET
from .module import _export_module
from .recorded import _export_onnx_model, _export_recorded


# ---- the public functions ------------------------------------------------------------------

def to_onnx(model, inputs=None, opset=None, dynamic_axes=None, *, path=None, input_names=None,
            output_names=None, model_name=None, last_layers=None, check=True):
    """An onnx.ModelProto of ``model``.

    ``to_onnx(model, inputs)``: an hl Module (or any Layer) traced, in eval() mode, on
    ``inputs`` (a list of tensors, numpy arrays, or hl.Placeholder objects, for which random
    values are made). ``to_onnx([x], [y, ...])``: SINGA's form, the outputs of a forward that
    autograd recorded (some input of each op required a gradient, as the parameters do;
    export before backward frees the records).
    An hl.onnx.ONNXModel writes its own graph back with the current weights, cut after node
    ``last_layers`` (counted as ONNXModel.forward counts) when given.

    ``opset``: 13 up to the newest onnx knows (default 17). ``dynamic_axes``: {input or
    output name: {axis: "dim name"}} or {name: [axes]}, as torch.onnx.export. ``path``: also
    write the model there (atomically). ``check``: run onnx.checker (full_check) on it."""
    from ...layers.layer import Layer
    from ..backend import BackendRep
    requested, opset = opset, _check_opset(opset)
    if isinstance(model, BackendRep):  # prepare()'s result: its imported model
        model = model.model
    if isinstance(model, Layer):
        from ..model import ONNXModel
        if isinstance(model, ONNXModel) and type(model).forward is ONNXModel.forward:
            proto = _export_onnx_model(model, requested, dynamic_axes, last_layers, model_name)
        else:
            if last_layers is not None:
                raise errors.ValueError("to_onnx: last_layers applies to an hl.onnx.ONNXModel "
                                        "only")
            proto = _export_module(model, inputs, opset, dynamic_axes, input_names,
                                   output_names, model_name)
    elif isinstance(model, (list, tuple, Tensor)):
        proto = _export_recorded(model, inputs, opset, dynamic_axes, input_names,
                                 output_names, model_name)
    else:
        raise errors.ValueError(f"to_onnx: expected an hl Module (to_onnx(model, [x])) or the "
                                f"input tensors of a recorded forward (to_onnx([x], [y])), got "
                                f"{type(model).__name__}")
    if check:
        _check(proto)
    if path is not None:
        save(proto, path)
    return proto


def save(model, path):
    """Writes an onnx.ModelProto to ``path`` atomically: to a temporary file in the same
    folder, then renamed over ``path``, so a reader never sees half a file."""
    if not isinstance(model, onnx.ModelProto):
        raise errors.ValueError(f"save: expected an onnx.ModelProto, got {type(model).__name__}")
    path = os.fspath(path)
    if model.ByteSize() > 2**31 - 1:
        raise errors.UnsupportedError(
            f"save: the model is {model.ByteSize():,} bytes, over protobuf's 2 GB limit; write "
            f"it with onnx.save_model(model, path, save_as_external_data=True)")
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".onnx", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(model.SerializeToString())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _check_opset(opset):
    newest = onnx.defs.onnx_opset_version()
    if opset is None:
        return DEFAULT_OPSET
    if isinstance(opset, bool) or not isinstance(opset, (int, np.integer)) or \
            not MIN_OPSET <= opset <= newest:
        raise errors.ValueError(f"to_onnx: opset must be an int from {MIN_OPSET} to {newest} "
                                f"(the newest this onnx knows), got {opset!r}")
    return int(opset)


def _check(proto):
    try:
        if proto.ByteSize() < 2**31 - 1:
            onnx.checker.check_model(proto, full_check=True)
    except onnx.checker.ValidationError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise errors.ONNXError(f"to_onnx produced a model that fails onnx.checker ({first}); "
                               f"this is a bug in hl's exporter") from None
    except onnx.shape_inference.InferenceError as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise errors.ONNXError(f"to_onnx produced a model that fails ONNX shape inference "
                               f"({first}); this is a bug in hl's exporter") from None


__all__ = ["to_onnx", "save"]
