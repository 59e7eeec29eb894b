"""Exporting a Module: its forward traced twice (the example inputs, then other values and,
for dynamic axes, other sizes) and the two traces assembled into one graph."""
import inspect

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ..._tensor import Tensor
from ...autograd import Placeholder
from .assemble import _assemble
from .builder import _host
from .io import (_check_dynamic_outputs, _flatten_outputs, _output_names, _split_dynamic,
                 _unique_names)
from .trace import Tracer


def _export_module(model, inputs, opset, dynamic_axes, input_names, output_names, name):
    from ...layers.layer import Layer
    examples = _examples(model, inputs)
    in_names = _input_names(model, examples, input_names)
    dyn_in, dyn_out = _split_dynamic(dynamic_axes, in_names, examples)
    paths = {}
    for p, layer in model.named_layers():
        if p:
            paths.setdefault(id(layer), p)
    modes = [(layer, layer.__dict__.get("_training")) for _, layer in model.named_layers()]
    device = _model_device(model)
    names = _onnx_model_names(model)

    def trace(arrays):
        xs = [_trace_input(a, e, device) for a, e in zip(arrays, examples)]
        tracer = Tracer(paths)
        model.eval()  # torch.onnx's default: dropout off, batch norm on its running statistics
        try:
            out = tracer.run(lambda: Layer.__call__(model, *xs))
        finally:
            for layer, mode in modes:
                layer.__dict__["_training"] = mode
        return tracer, _flatten_outputs(out, "forward"), xs

    # Two traces: the example inputs, then other values (and, for dynamic axes, larger
    # sizes). A constant that differs between them was computed from the inputs by something
    # the trace cannot see, and the sizes that differ are the dynamic ones.
    first = [_values_of(e) for e in examples]
    try:
        t1, outs, specs = trace(first)
    except errors.HLError as e:
        raise type(e)(f"to_onnx: {model.describe()}'s forward failed on the example inputs "
                      f"(shapes {[tuple(a.shape) for a in first]}): {e}") from e
    other = _other_values(first, dyn_in, in_names)
    try:
        t2, outs2, specs2 = trace(other)
    except Exception as e:  # noqa: BLE001 - any failure means the forward cannot vary so
        what = "with the dynamic axes at other sizes" if dyn_in else "on other input values"
        raise errors.UnsupportedError(
            f"to_onnx: {model.describe()}'s forward fails {what} (inputs of shapes "
            f"{[tuple(a.shape) for a in other]}), so it cannot be exported that way: "
            f"{type(e).__name__}: {e}") from e
    out_names = _output_names(outs, output_names)
    _check_dynamic_outputs(dyn_out, out_names, outs)
    return _assemble(t1.records, specs, in_names, outs, out_names,
                     (t2.records, outs2, specs2, t2), dyn_in, dyn_out, opset,
                     name or type(model).__name__, from_layers=False, tracer=t1, names=names)


def _onnx_model_names(model):
    """{id(tensor): ONNX name} for the weights and constants of imported graphs (ONNXModel)
    inside ``model``, so a re-export keeps their original names."""
    from ..model import ONNXModel
    names = {}
    for path, layer in model.named_layers():
        if isinstance(layer, ONNXModel):
            prefix = f"{path}." if path else ""
            for local, onnx_name in layer.onnx_names.items():
                names[id(getattr(layer, local))] = prefix + onnx_name
            for onnx_name, t in layer.program.all_constants().items():
                names.setdefault(id(t), prefix + onnx_name)
    return names


def _model_device(model):
    for t in model.get_states().values():
        return t.device
    return None


def _values_of(e):
    """Example values for an example input: its own, or random ones for a placeholder
    (zeros for integers, which are valid indices of any table)."""
    if isinstance(e, Tensor) and not isinstance(e, Placeholder):
        return _host(e).copy()
    shape, np_dtype = tuple(e.shape), e.dtype.np
    if e.dtype.is_floating:
        return np.random.default_rng(0).standard_normal(shape).astype(np_dtype)
    return np.zeros(shape, dtype=np_dtype)


def _other_values(first, dyn_in, in_names):
    """The second trace's inputs: each dynamic axis larger by a step that differs per axis
    name (so two dynamic sizes that happen to be equal are still told apart), and the values
    moved (floats perturbed, integers and bools rotated, so indices stay valid)."""
    order = []
    for i in sorted(dyn_in):
        for a in sorted(dyn_in[i]):
            if dyn_in[i][a] not in order:
                order.append(dyn_in[i][a])
    rng = np.random.default_rng(1)
    out = []
    for i, a in enumerate(first):
        shape = list(a.shape)
        for axis, n in dyn_in.get(i, {}).items():
            shape[axis] += order.index(n) + 1
        b = np.roll(a.reshape(-1), 1).reshape(a.shape) if a.size else a
        if tuple(shape) != a.shape:
            b = np.resize(b, shape) if a.size else np.zeros(shape, a.dtype)
        if a.dtype.kind == "f" or str(a.dtype) == "bfloat16":
            f = b.astype(np.float64)
            scale = float(np.mean(np.abs(f))) if f.size else 1.0
            f = f * 0.9 + rng.standard_normal(f.shape) * 0.1 * (scale or 1.0)
            b = f.astype(a.dtype)
        out.append(np.array(b, order="C"))
    return out


def _trace_input(array, example, device):
    """A fresh tensor of the example's dtype holding ``array``, marked requires_grad so that
    every op on it records (and so reaches the tracer), integers included."""
    from ..._tensor import tensor
    dev = example.device if isinstance(example, Tensor) else device
    t = tensor(np.array(array, order="C"), device=dev)
    if t.dtype is not example.dtype:
        t = t.astype(example.dtype)
    t.requires_grad = True
    return t


def _examples(model, inputs):
    """The example inputs as objects with .shape, .dtype, .device (tensors or placeholders)."""
    if inputs is None and callable(getattr(model, "input_placeholders", None)):
        inputs = model.input_placeholders()  # a model built from hl.Input knows its inputs
    if inputs is None:
        shapes = model.__dict__.get("_input_shapes")
        if not shapes:
            raise errors.ValueError(f"to_onnx: give example inputs for {model.describe()}: "
                                    f"to_onnx(model, [x]) (tensors, arrays or hl.Placeholder)")
        return [Placeholder(s) for s in shapes]
    if isinstance(inputs, (Tensor, Placeholder, np.ndarray)):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        raise errors.ValueError(f"to_onnx: inputs must be a list of tensors, arrays or "
                                f"hl.Placeholder objects, got {type(inputs).__name__}")
    out = []
    for i, x in enumerate(inputs):
        if isinstance(x, (Tensor, Placeholder)):
            out.append(x)
            continue
        a = np.asarray(x)
        if a.dtype == np.float64 and not isinstance(x, np.ndarray):
            a = a.astype(np.float32)  # Python floats, as hl.tensor reads them
        try:
            _dt.dtype(a.dtype)
        except Exception:
            raise errors.DTypeError(f"to_onnx: input {i} has dtype {a.dtype}, which hl cannot "
                                    f"hold") from None
        from ..._tensor import tensor
        out.append(tensor(np.array(a, order="C")))
    return out


def _input_names(model, examples, given):
    if given is not None:
        names = list(given)
        if len(names) != len(examples):
            raise errors.ValueError(f"to_onnx: {len(names)} input_names for {len(examples)} "
                                    f"inputs")
    else:
        names = []
        try:
            params = [p for p in inspect.signature(model.forward).parameters.values()
                      if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            params = []
        for i, e in enumerate(examples):
            own = getattr(e, "name", None) if isinstance(e, Placeholder) else None
            names.append(own or (params[i].name if i < len(params) else f"input_{i}"))
    return _unique_names(names, "input_names")
