"""to_onnx: hl models out as ONNX (SINGA's sonnx.to_onnx, wider).

    proto = hl.onnx.to_onnx(model, [x])                 # a Module (or any Layer), traced
    proto = hl.onnx.to_onnx(model, [x], opset=18, dynamic_axes={"x": {0: "batch"}},
                            path="model.onnx")           # written atomically
    proto = hl.onnx.to_onnx([x], [y1, y2])               # SINGA's form: a recorded forward
    hl.onnx.save(proto, "model.onnx")

Finding the graph. A Module is *traced*: its forward runs in eval() mode on copies of the
example inputs marked requires_grad, so every op on them records, while the tracer hook of
hl/autograd/function.py hands each op call (a Function) to the Tracer below with its
arguments, inputs and outputs. Comparisons and argmax have no gradient and run as plain ops:
during a trace their entry points are wrapped so they are noted too. SINGA's form instead walks
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

The per-op translations are in export_ops.py (one rule per Function class).
"""
import copy
import inspect
import os
import sys
import tempfile
import threading

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from .. import dtypes as _dt
from .. import errors
from .._tensor import Tensor
from ..autograd import Placeholder, enable_grad
from ..autograd.mode import trace_state

DEFAULT_OPSET = 17
MIN_OPSET = 13  # the first opset with Squeeze/Unsqueeze/ReduceSum/Split sizes as inputs

ONNX_TYPES = {
    "float32": TensorProto.FLOAT, "float64": TensorProto.DOUBLE,
    "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
    "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint8": TensorProto.UINT8, "bool": TensorProto.BOOL,
}


def onnx_type(dtype):
    """The TensorProto element type of an hl dtype."""
    return ONNX_TYPES[_dt.dtype(dtype).name]


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
    from ..layers.layer import Layer
    from .backend import BackendRep
    requested, opset = opset, _check_opset(opset)
    if isinstance(model, BackendRep):  # prepare()'s result: its imported model
        model = model.model
    if isinstance(model, Layer):
        from .model import ONNXModel
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


# ---- tracing a Module ----------------------------------------------------------------------

class Record:
    """One op call: the Function, its arguments as they were before forward, its inputs and
    outputs (tensors or placeholders; None for an omitted input), and the layer that ran it."""
    __slots__ = ("fn", "cfg", "xs", "ys", "layer")

    def __init__(self, fn, cfg, xs, ys, layer):
        self.fn, self.cfg, self.xs, self.ys, self.layer = fn, cfg, tuple(xs), ys, layer


class Tracer:
    """Installed as hl.autograd.mode.trace_state.tracer: Function.__call__ hands it every op
    call, which it runs (with itself switched off, so the ops an op runs inside are not seen)
    and records with the innermost layer whose method is on the stack. The outputs of an op
    that read a traced value are marked requires_grad, so the ops after it record too (a
    comparison's mask, argmax's indices)."""

    def __init__(self, layer_paths):
        self.records = []
        self.paths = layer_paths
        self.stop = None     # the frame that started the trace: layers above it are not ours
        self.handles = {}    # id of a made tensor's core handle -> the tensor (see alias())

    def __call__(self, fn, xs):
        cfg = fn.__dict__.copy()
        trace_state.tracer = None
        try:
            ys = fn(*xs)
        finally:
            trace_state.tracer = self
        self.note(fn, cfg, xs, ys)
        return ys

    def note(self, fn, cfg, xs, ys):
        ys_t = ys if isinstance(ys, tuple) else (ys,)
        traced = any(isinstance(x, Tensor) and x.requires_grad for x in xs)
        for y in ys_t:
            if isinstance(y, Tensor):
                if traced:
                    y.requires_grad = True
                self.handles[id(y._h)] = y
        self.records.append(Record(fn, cfg, xs, ys_t, self._layer()))

    def alias(self, t):
        """The traced tensor that ``t`` is a detached handle of (topk's indices), or None."""
        y = self.handles.get(id(t._h))
        return y if y is not None and y is not t else None

    def _layer(self):
        f = sys._getframe(2)
        while f is not None and f is not self.stop:
            code = f.f_code
            if code is _RUN_NODES_CODE:  # an imported graph (ONNXModel): its node's name
                node = f.f_locals.get("node")
                if node is not None:
                    return node.name
            if code.co_argcount and code.co_varnames[0] == "self":
                path = self.paths.get(id(f.f_locals.get("self")))
                if path:
                    return path
            f = f.f_back
        return None

    def run(self, call):
        with _TRACE_LOCK, _comparisons_traced():
            self.stop = sys._getframe()
            trace_state.tracer = self
            try:
                with enable_grad():  # every op on a traced input records (and reaches us)
                    return call()
            finally:
                trace_state.tracer = None


# Comparisons, argmax, any... run as plain ops on tensors (they have no gradient), so a trace
# would not see them. While a trace runs, hl's entry points to them (hl.autograd.functional,
# the hl namespace, Tensor's methods) are wrapped: on a traced tensor they run the plain op
# and note it under its shape-inference Function (Compare, ShapeOnly), which export_ops.py
# translates. Outside a trace (another thread, or a method Tensor cached meanwhile) the
# wrapper is the plain op.
_COMPARE_NAMES = {"eq": "eq", "equal": "eq", "ne": "ne", "not_equal": "ne", "lt": "lt",
                  "less": "lt", "le": "le", "less_equal": "le", "gt": "gt", "greater": "gt",
                  "ge": "ge", "greater_equal": "ge", "logical_and": "logical_and",
                  "logical_or": "logical_or", "logical_xor": "logical_xor"}
_SHAPE_ONLY_NAMES = ("argmax", "argmin", "any", "all", "count_nonzero")
_TRACE_LOCK = threading.RLock()


def _run_nodes_code():
    from .program import run_nodes
    return run_nodes.__code__


_RUN_NODES_CODE = _run_nodes_code()


def _traced(t):
    return isinstance(t, Tensor) and t.requires_grad


def _wrap_compare(op, plain):
    from ..autograd.binary import Compare, _recorded_operands

    def f(a, b, out=None):
        tracer = trace_state.tracer
        if out is None and tracer is not None and (_traced(a) or _traced(b)):
            a, b = _recorded_operands(a, b)  # the promoting casts are traced ops themselves
            fn = Compare(op)
            y = plain(a, b)
            tracer.note(fn, fn.__dict__.copy(), (a, b), y)
            return y
        return plain(a, b, out=out)
    f.__name__, f.__doc__, f._hl_plain = plain.__name__, plain.__doc__, plain
    return f


def _wrap_shape_only(name, plain):
    from ..autograd.reduce import ShapeOnly
    dtypes = {"argmax": _dt.int64, "argmin": _dt.int64, "any": _dt.bool_, "all": _dt.bool_,
              "count_nonzero": _dt.int64}

    def f(x, *args, **kwargs):
        tracer = trace_state.tracer
        if tracer is None or not _traced(x) or kwargs.get("out") is not None:
            return plain(x, *args, **kwargs)
        axis = args[0] if args else kwargs.get("axis", kwargs.get("dim"))
        keep = args[1] if len(args) > 1 else kwargs.get("keepdims", kwargs.get("keepdim"))
        fn = ShapeOnly(name, axis, bool(keep), dtypes[name])
        y = plain(x, *args, **kwargs)
        tracer.note(fn, fn.__dict__.copy(), (x,), y)
        return y
    f.__name__, f.__doc__, f._hl_plain = plain.__name__, plain.__doc__, plain
    return f


def _wrap_topk(plain):
    """topk hands back its positions detached (they carry no gradient); while tracing they
    are marked again, so the ops that use them record (the tracer knows them by handle)."""
    def f(x, *args, **kwargs):
        v, i = plain(x, *args, **kwargs)
        if trace_state.tracer is not None and _traced(x) and isinstance(i, Tensor):
            i.requires_grad = True
        return v, i
    f.__name__, f.__doc__, f._hl_plain = plain.__name__, plain.__doc__, plain
    return f


class _comparisons_traced:  # noqa: N801 - a context manager
    def __enter__(self):
        import hl
        from ..autograd import functional
        self.saved = []
        wrapped = {}
        for name in list(_COMPARE_NAMES) + list(_SHAPE_ONLY_NAMES) + ["topk"]:
            plain = getattr(functional, name)
            plain = getattr(plain, "_hl_plain", plain)
            if name in _COMPARE_NAMES:
                wrapped[name] = _wrap_compare(_COMPARE_NAMES[name], plain)
            elif name == "topk":
                wrapped[name] = _wrap_topk(plain)
            else:
                wrapped[name] = _wrap_shape_only(name, plain)
            for owner in (functional, hl):
                if getattr(owner, name, None) is plain:
                    self.saved.append((owner, name, plain))
                    setattr(owner, name, wrapped[name])
            if name in Tensor.__dict__:  # a method Tensor made on first use
                self.saved.append((Tensor, name, Tensor.__dict__[name]))
                setattr(Tensor, name, _method(wrapped[name]))
        return self

    def __exit__(self, *exc):
        for owner, name, value in reversed(self.saved):
            setattr(owner, name, value)
        return False


def _method(f):
    def method(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    method.__name__ = f.__name__
    return method


def _export_module(model, inputs, opset, dynamic_axes, input_names, output_names, name):
    from ..layers.layer import Layer
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
    from .model import ONNXModel
    names = {}
    for path, layer in model.named_layers():
        if isinstance(layer, ONNXModel):
            prefix = f"{path}." if path else ""
            for local, onnx_name in layer.onnx_names.items():
                names[id(getattr(layer, local))] = prefix + onnx_name
            for onnx_name, t in layer.program.constants.items():
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
    from .._tensor import tensor
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
        from .._tensor import tensor
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


def _output_names(outs, given):
    if given is not None:
        names = list(given)
        if len(names) != len(outs):
            raise errors.ValueError(f"to_onnx: {len(names)} output_names for {len(outs)} "
                                    f"outputs")
        return _unique_names(names, "output_names")
    return ["output"] if len(outs) == 1 else [f"output_{i}" for i in range(len(outs))]


def _unique_names(names, what):
    for n in names:
        if not isinstance(n, str) or not n:
            raise errors.ValueError(f"to_onnx: {what} must be non-empty strings, got {n!r}")
    if len(set(names)) != len(names):
        raise errors.ValueError(f"to_onnx: {what} {names} repeat a name")
    return names


def _flatten_outputs(out, where):
    """forward's result as a flat list of tensors (tuples, lists and dicts opened, None
    skipped: LSTM's (y, (h, c)) gives [y, h, c])."""
    flat = []

    def walk(o):
        if o is None:
            return
        if isinstance(o, (Tensor, Placeholder)):
            flat.append(o)
        elif isinstance(o, (list, tuple)):
            for v in o:
                walk(v)
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        else:
            raise errors.UnsupportedError(f"to_onnx: {where} returned a {type(o).__name__}; "
                                          f"only tensors (in tuples, lists, dicts) can be "
                                          f"graph outputs")
    walk(out)
    if not flat:
        raise errors.ValueError(f"to_onnx: {where} returned no tensor")
    return flat


# ---- dynamic axes --------------------------------------------------------------------------

def _axes_spec(spec, key):
    """{axis: name} from {axis: name} or [axes] (named "<key>_dim<axis>")."""
    if isinstance(spec, dict):
        out = {}
        for a, n in spec.items():
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)) or \
                    not isinstance(n, str) or not n:
                raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must map axes (ints) "
                                        f"to names (strings), got {spec!r}")
            out[int(a)] = n
        return out
    if isinstance(spec, (list, tuple)):
        for a in spec:
            if isinstance(a, bool) or not isinstance(a, (int, np.integer)):
                raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must list axes "
                                        f"(ints), got {spec!r}")
        return {int(a): f"{key}_dim{int(a)}" for a in spec}
    raise errors.ValueError(f"to_onnx: dynamic_axes[{key!r}] must be {{axis: name}} or a list "
                            f"of axes, got {type(spec).__name__}")


def _split_dynamic(dynamic_axes, in_names, examples):
    """({input index: {axis: name}}, {output name: {axis: name}}), input axes checked."""
    if dynamic_axes is None:
        return {}, {}
    if not isinstance(dynamic_axes, dict):
        raise errors.ValueError(f"to_onnx: dynamic_axes must be a dict {{name: {{axis: "
                                f"dim_name}}}}, got {type(dynamic_axes).__name__}")
    dyn_in, dyn_out = {}, {}
    sizes = {}
    for key, spec in dynamic_axes.items():
        axes = _axes_spec(spec, key)
        if key in in_names:
            i = in_names.index(key)
            nd = len(examples[i].shape)
            norm = {}
            for a, n in axes.items():
                if not -nd <= a < nd:
                    raise errors.IndexError(f"to_onnx: dynamic axis {a} of input {key!r} is out "
                                            f"of range for its shape {tuple(examples[i].shape)}")
                a %= nd
                norm[a] = n
                size = examples[i].shape[a]
                if sizes.setdefault(n, (size, key))[0] != size:
                    raise errors.ShapeError(
                        f"to_onnx: dynamic axis {n!r} is {sizes[n][0]} in input "
                        f"{sizes[n][1]!r} but {size} in input {key!r}")
            dyn_in[i] = norm
        else:
            dyn_out[key] = axes  # checked against the outputs once they are known
    return dyn_in, dyn_out


def _check_dynamic_outputs(dyn_out, out_names, outs):
    for key, axes in list(dyn_out.items()):
        if key not in out_names:
            raise errors.ValueError(f"to_onnx: dynamic_axes names {key!r}, which is neither an "
                                    f"input nor an output; the outputs are {out_names}")
        nd = len(outs[out_names.index(key)].shape)
        for a in axes:
            if not -nd <= a < nd:
                raise errors.IndexError(f"to_onnx: dynamic axis {a} of output {key!r} is out "
                                        f"of range for its {nd} dimensions")
        dyn_out[key] = {a % nd: n for a, n in axes.items()}


def _grown(first, in_names, dyn_in):
    """The second trace's inputs: each dynamic axis larger by a step that differs per axis
    name, so two dynamic sizes that happen to be equal are still told apart."""
    order = []
    for i in sorted(dyn_in):
        for a in sorted(dyn_in[i]):
            if dyn_in[i][a] not in order:
                order.append(dyn_in[i][a])
    specs = []
    for i, p in enumerate(first):
        shape = list(p.shape)
        for a, n in dyn_in.get(i, {}).items():
            shape[a] += order.index(n) + 1
        specs.append(Placeholder(tuple(shape), p.dtype, p.device))
    return specs


def _signatures(rec1, rec2, outs1, outs2, specs1, specs2, tracers=(None, None)):
    """{id(value of the first trace): its dims}, a dim being an int where both traces agree
    and the pair (first size, second size) where it changed; and {record index: the argument
    names whose values differ}. Raises where the traces do not line up, or where a constant
    differs between them (computed from the inputs by something the trace cannot see)."""
    if len(rec1) != len(rec2) or any(type(a.fn) is not type(b.fn) or a.fn.name != b.fn.name
                                     for a, b in zip(rec1, rec2)):
        raise errors.UnsupportedError(
            "to_onnx: the forward runs different ops on other input values or sizes (a "
            "branch on the values, or a Python loop over a dynamic axis such as a recurrent "
            "layer unrolled over time), so it has no single ONNX graph")
    sigs, varying = {}, {}

    def pair(a, b, what):
        if a is None or b is None:
            return
        if len(a.shape) != len(b.shape):
            raise errors.UnsupportedError(f"to_onnx: {what} changes rank with the dynamic axes")
        sigs[id(a)] = tuple(x if x == y else (x, y) for x, y in zip(a.shape, b.shape))

    def made(records, specs, tracer):
        ids = {id(x) for x in specs}
        for r in records:
            ids.update(id(y) for y in r.ys if y is not None)
        return ids, tracer

    known = [made(rec1, specs1, tracers[0]), made(rec2, specs2, tracers[1])]

    def leaf(x, k):
        ids, tracer = known[k]
        if not isinstance(x, Tensor) or id(x) in ids:
            return False
        return tracer is None or tracer.alias(x) is None

    for p1, p2 in zip(specs1, specs2):
        pair(p1, p2, "an input")
    for k, (r1, r2) in enumerate(zip(rec1, rec2)):
        for x1, x2 in zip(r1.xs, r2.xs):
            if leaf(x1, 0) and leaf(x2, 1) and x1 is not x2 and not _same_tensor(x1, x2):
                where = f" in layer '{r1.layer}'" if r1.layer else ""
                raise errors.UnsupportedError(
                    f"to_onnx: {r1.fn.name}{where} reads a constant {tuple(x1.shape)} that "
                    f"changes with the input values or sizes: it was computed from the inputs "
                    f"by something the trace cannot follow (x.numpy(), float(x), an op without "
                    f"an export such as logical_not or nonzero, a tensor made from x.shape of "
                    f"a dynamic axis...), so no ONNX graph reproduces it")
        for y1, y2 in zip(r1.ys, r2.ys):
            pair(y1, y2, f"the output of {r1.fn.name}")
        diff = {name for name, v in r1.cfg.items()
                if name not in ("needs", "const_inputs") and
                not _same(v, r2.cfg.get(name))}
        if diff:
            varying.setdefault(k, set()).update(diff)
    for k, (o1, o2) in enumerate(zip(outs1, outs2)):
        if leaf(o1, 0) and leaf(o2, 1) and o1 is not o2 and not _same_tensor(o1, o2):
            raise errors.UnsupportedError(
                f"to_onnx: output {k} {tuple(o1.shape)} changes with the input values or sizes "
                f"but was computed by nothing the trace can follow (an op without an export, "
                f"or an hl function imported before the trace, such as argmax or a "
                f"comparison taken as 'from hl.autograd.functional import argmax'), so no "
                f"ONNX graph reproduces it")
        pair(o1, o2, "an output")
    return sigs, varying


def _same_tensor(a, b):
    if a.shape != b.shape or a.dtype is not b.dtype:
        return False
    return np.array_equal(_host(a), _host(b), equal_nan=a.dtype.is_floating)


def _same(a, b):
    if a is b:
        return True
    if isinstance(a, Placeholder) or isinstance(b, Placeholder):  # (a Tensor subclass)
        return isinstance(a, Placeholder) and isinstance(b, Placeholder) and \
            a.shape == b.shape and a.dtype is b.dtype
    if isinstance(a, Tensor) or isinstance(b, Tensor):
        return isinstance(a, Tensor) and isinstance(b, Tensor) and _same_tensor(a, b)
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - incomparable: treat as different
        return False


def _host(t):
    return np.asarray(t.cpu().numpy() if hasattr(t, "cpu") else t.numpy())


# ---- SINGA's form: a recorded forward ------------------------------------------------------

def _export_recorded(inputs, outputs, opset, dynamic_axes, input_names, output_names, name):
    inputs = [inputs] if isinstance(inputs, Tensor) else list(inputs)
    if outputs is None:
        raise errors.ValueError("to_onnx([x], [y]): give the outputs of the recorded forward")
    outputs = [outputs] if isinstance(outputs, Tensor) else list(outputs)
    for i, y in enumerate(outputs):
        if not isinstance(y, Tensor):
            raise errors.ValueError(f"to_onnx([x], [y]): output {i} is a {type(y).__name__}, "
                                    f"not an hl tensor")
    for i, x in enumerate(inputs):
        if not isinstance(x, Tensor):
            raise errors.ValueError(f"to_onnx([x], [y]): input {i} is a {type(x).__name__}, "
                                    f"not an hl tensor")
    fns, sources = _walk(inputs, outputs)
    reached = {s[1] for srcs in sources.values() for s in srcs if s and s[0] == "input"}
    reached |= {i for i, x in enumerate(inputs) if any(y is x for y in outputs)}
    for i, x in enumerate(inputs):
        if i not in reached:
            raise errors.ValueError(
                f"to_onnx([x], [y]): input {i} {tuple(x.shape)} is read by no recorded op on "
                f"the way to the outputs. If ops that do not record came first (x does not "
                f"require a gradient, so reshape(x) or x * 2 ran as plain ops), their results "
                f"would be frozen into the model as constants: create x with "
                f"requires_grad=True before the forward, or export the Module with "
                f"to_onnx(model, [x])")
    if input_names is not None:
        in_names = _unique_names(list(input_names), "input_names")
        if len(in_names) != len(inputs):
            raise errors.ValueError(f"to_onnx: {len(in_names)} input_names for {len(inputs)} "
                                    f"inputs")
    else:
        in_names = _unique_names([x.name if isinstance(x.name, str) and x.name else
                                  f"input_{i}" for i, x in enumerate(inputs)], "input names")
    dyn_in, dyn_out = _split_dynamic(dynamic_axes, in_names, inputs)
    first = [Placeholder(x.shape, x.dtype, x.device) for x in inputs]
    records, outs = _replay(fns, sources, inputs, first, outputs)
    second = None
    if dyn_in:
        grown = _grown(first, in_names, dyn_in)
        try:
            second = _replay(fns, sources, inputs, grown, outputs) + (grown,)
        except errors.HLError as e:
            raise errors.UnsupportedError(
                f"to_onnx([x], [y]): the recorded ops fix the sizes of the axes marked dynamic "
                f"({e}); export the Module instead, to_onnx(model, [x], dynamic_axes=...), "
                f"which traces it afresh") from e
    out_names = _output_names(outs, output_names)
    _check_dynamic_outputs(dyn_out, out_names, outs)
    return _assemble(records, first, in_names, outs, out_names, second, dyn_in, dyn_out, opset,
                     name or "hl", from_layers=True)


def _walk(inputs, outputs):
    """The recorded Functions that lead to ``outputs``, inputs before users, and for each the
    source of each input: ("fn", creator, index), ("input", i), ("leaf", tensor), or None."""
    ids = {id(x): i for i, x in enumerate(inputs)}
    order, seen = [], set()
    sources = {}

    def source(t):
        if t is None:
            return None
        if id(t) in ids:
            return ("input", ids[id(t)])
        return ("leaf", t)

    def visit(root):
        stack = [(root, False)]
        while stack:
            fn, done = stack.pop()
            if done:
                order.append(fn)
                continue
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            if fn.__dict__.get("src") is None:
                raise errors.ValueError(
                    f"to_onnx([x], [y]): the record of {fn.name} was freed by backward(); "
                    f"export before the backward pass (or run it with retain_graph=True)")
            consts = fn.__dict__.get("const_inputs")
            srcs = []
            for i, edge in enumerate(fn.src):
                if edge is None:
                    c = consts[i] if consts is not None and i < len(consts) else None
                    srcs.append(source(c))
                elif edge[0] is None:
                    srcs.append(source(edge[1]))
                else:
                    srcs.append(("fn", edge[0], edge[1]))
            sources[id(fn)] = srcs
            stack.append((fn, True))
            for s in reversed(srcs):
                if s is not None and s[0] == "fn" and id(s[1]) not in seen:
                    stack.append((s[1], False))

    for k, y in enumerate(outputs):
        if id(y) in ids:
            continue
        if y.creator is None:
            raise errors.ValueError(
                f"to_onnx([x], [y]): output {k} {tuple(y.shape)} was not recorded by autograd: "
                f"record the forward with grad mode on and an input or parameter that requires "
                f"a gradient (hl.tensor(..., requires_grad=True)), or export the Module with "
                f"to_onnx(model, [x])")
        visit(y.creator)
    return order, sources


def _spec_device(specs):
    return specs[0].device if specs else None


def _replay(fns, sources, inputs, specs, outputs):
    """Runs the recorded Functions again on placeholders (the recorded tensors themselves may
    be gone): Records as a trace would give, and the outputs."""
    made = {}
    records = []
    for fn in fns:
        xs = []
        for s in sources[id(fn)]:
            if s is None:
                xs.append(None)
            elif s[0] == "input":
                xs.append(specs[s[1]])
            elif s[0] == "leaf":
                xs.append(s[1])
            else:
                xs.append(made[id(s[1])][s[2]])
        cfg = dict(fn.__dict__)
        # a copy runs: _on_meta gives the op's own tensors meta stand-ins, and the recorded
        # graph may still be walked backward after the export
        ys = copy.copy(fn)._on_meta(xs, _spec_device(specs)) \
            if any(x is not None for x in xs) else None
        if ys is None:
            raise errors.UnsupportedError(f"to_onnx([x], [y]): {fn.name} has no inputs")
        ys = ys if isinstance(ys, tuple) else (ys,)
        made[id(fn)] = ys
        records.append(Record(fn, cfg, xs, ys, None))
    ids = {id(x): i for i, x in enumerate(inputs)}
    outs = []
    for y in outputs:
        if id(y) in ids:
            outs.append(specs[ids[id(y)]])
        else:
            outs.append(made[id(y.creator)][y.out_index])
    return records, outs


# ---- values and the graph being built ------------------------------------------------------

class Val:
    """A value of the graph: its ONNX name, traced shape, dtype and per-dim signature (an int
    for a fixed size, (size in trace 1, size in trace 2) for a dynamic one)."""
    __slots__ = ("name", "shape", "dtype", "sig")

    def __init__(self, name, shape, dtype, sig=None):
        self.name, self.shape, self.dtype = name, tuple(shape), _dt.dtype(dtype)
        self.sig = tuple(sig) if sig is not None else self.shape

    @property
    def ndim(self):
        return len(self.shape)

    def dynamic(self, d):
        return not isinstance(self.sig[d], int)

    @property
    def static(self):
        return all(isinstance(s, int) for s in self.sig)

    def __repr__(self):
        return f"Val({self.name!r}, {self.sig}, {self.dtype.name})"


class Attrs:
    """An op's arguments as export rules read them: its recorded arguments first, then the
    Function itself (class attributes, methods)."""

    def __init__(self, fn, cfg):
        self.__dict__["_fn"], self.__dict__["_cfg"] = fn, cfg

    def __getattr__(self, name):
        cfg = self.__dict__["_cfg"]
        if name in cfg:
            return cfg[name]
        return getattr(self.__dict__["_fn"], name)


class Builder:
    """The graph under construction: nodes, initializers and the helpers export rules use.
    Rules name their final outputs as given (``ys[i].name``); everything else gets a
    temporary name, renamed after the node that makes it once the graph is complete."""

    def __init__(self, opset, names=None):
        self.opset = opset
        self.names = names or {}  # id(tensor) -> a name for its initializer
        self.nodes = []        # NodeProto, in order
        self.node_layers = []  # the layer path (or None) each node was made under
        self.inits = []        # TensorProto
        self.taken = set()
        self.layer = None      # the layer of the op being translated
        self.op_name = None    # its Function's name, for messages
        self.vals = []         # every Val made, for finding a dynamic size's source
        self._temp = 0
        self._consts = {}      # (dtype, shape, bytes) -> name, for small constants
        self._leaves = {}      # id(tensor) -> Val
        self._shape_slices = {}
        self.varying = set()   # arguments of the current op that differ between the traces
        self.recorded = False  # True for SINGA's form: arguments read after forward ran

    # ---- names and values ----------------------------------------------------------------

    def temp(self):
        self._temp += 1
        return f"%{self._temp}"

    def unique(self, name):
        base, k = name, 1
        while name in self.taken:
            name = f"{base}_{k}"
            k += 1
        self.taken.add(name)
        return name

    def val(self, name, shape, dtype, sig=None):
        v = Val(name, shape, dtype, sig)
        self.vals.append(v)
        return v

    def leaf(self, t):
        """The initializer for a tensor that no traced op made (a parameter, a buffer, a
        constant): named after the tensor when it has a name."""
        v = self._leaves.get(id(t))
        if v is not None:
            return v
        a = _host(t)
        given = self.names.get(id(t)) or t.name
        if isinstance(given, str) and given:
            name = self.unique(given)
            self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
        else:
            name = self.const(a)
        v = self._leaves[id(t)] = self.val(name, a.shape, t.dtype)
        return v

    def const(self, value, dtype=None, name=None):
        """An initializer holding ``value`` (numpy dtype ``dtype`` if given); small unnamed
        ones are shared."""
        a = np.asarray(value) if dtype is None else np.asarray(value, dtype=dtype)
        if name is not None:
            name = self.unique(name)
            self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
            return name
        key = None
        if a.size <= 64:
            key = (str(a.dtype), a.shape, a.tobytes())
            if key in self._consts:
                return self._consts[key]
        name = self.unique("const")
        self.inits.append(numpy_helper.from_array(np.array(a, order="C"), name))
        if key is not None:
            self._consts[key] = name
        return name

    def ints(self, values):
        """A 1-D int64 constant (axes, sizes, pads)."""
        return self.const(np.asarray([int(v) for v in values], dtype=np.int64))

    def scalar(self, value, dtype):
        """A 0-d constant of the hl dtype ``dtype``."""
        return self.const(np.asarray(value, dtype=_dt.dtype(dtype).np))

    # ---- nodes ---------------------------------------------------------------------------

    def node(self, op_type, inputs, n=1, out=None, **attrs):
        """Appends a node; returns its output names (``out`` names them, else temporaries)."""
        outs = list(out) if out is not None else [self.temp() for _ in range(n)]
        attrs = {k: v for k, v in attrs.items() if v is not None}
        self.nodes.append(helper.make_node(op_type, [i or "" for i in inputs], outs, **attrs))
        self.node_layers.append(self.layer)
        return outs

    def op(self, op_type, inputs, out=None, **attrs):
        """Appends a one-output node and returns the output's name."""
        return self.node(op_type, inputs, out=None if out is None else [out], **attrs)[0]

    def cast(self, name, dtype, out=None):
        return self.op("Cast", [name], out=out, to=onnx_type(dtype))

    def reduce(self, op_type, x, axes, keepdims, out=None):
        """Reduce<op_type> over ``axes`` (a list; None for all), as each opset spells it:
        axes an input for ReduceSum from 13 and for the others from 18."""
        if axes is not None and not axes:
            return self.op("Identity", [x], out=out)  # hl reduces over no axis: a copy
        if op_type == "ReduceSum" or self.opset >= 18:
            ins = [x] + ([self.ints(axes)] if axes is not None else [])
            return self.op(op_type, ins, out=out, keepdims=int(keepdims))
        return self.op(op_type, [x], out=out, keepdims=int(keepdims),
                       axes=None if axes is None else [int(a) for a in axes])

    def squeeze(self, x, axes, out=None):
        return self.op("Squeeze", [x, self.ints(axes)], out=out)

    def unsqueeze(self, x, axes, out=None):
        return self.op("Unsqueeze", [x, self.ints(axes)], out=out)

    # ---- sizes that change with the dynamic axes -------------------------------------------

    def error(self, message, kind=None):
        where = f"{self.op_name}" + (f" in layer '{self.layer}'" if self.layer else "")
        return (kind or errors.UnsupportedError)(f"to_onnx: {where}: {message}")

    def varies(self, *names):
        """Did any of these arguments of the current op change between the two traces?
        (Asking marks them handled; an unhandled change is an error.)"""
        hit = self.varying.intersection(names)
        self.varying.difference_update(names)
        return bool(hit)

    def dim(self, sig, prefer=()):
        """A 1-element int64 tensor holding a dynamic size: a slice of Shape of the first
        value (``prefer`` first, then every value made so far) that has a dimension with the
        same signature."""
        for v in list(prefer) + self.vals:
            if v is None:
                continue
            for j, s in enumerate(v.sig):
                if s == sig:
                    return self.shape_slice(v, j)
        raise self.error(f"a size that changes with the dynamic axes ({sig[0]}, then {sig[1]}) "
                         f"is not the size of any value hl could read it from")

    def shape_slice(self, v, j):
        key = (v.name, j)
        if key not in self._shape_slices:
            if self.opset >= 15:
                s = self.op("Shape", [v.name], start=j, end=j + 1)
            else:
                s = self.op("Gather", [self.op("Shape", [v.name]), self.ints([j])], axis=0)
            self._shape_slices[key] = s
        return self._shape_slices[key]

    def shape_tensor(self, sig, prefer=()):
        """A 1-D int64 tensor of the sizes ``sig``: a constant when every size is fixed, else
        the fixed parts and Shape slices concatenated."""
        if all(isinstance(s, int) for s in sig):
            return self.ints(sig)
        parts, run = [], []
        for s in sig:
            if isinstance(s, int):
                run.append(s)
                continue
            if run:
                parts.append(self.ints(run))
                run = []
            parts.append(self.dim(s, prefer))
        if run:
            parts.append(self.ints(run))
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, axis=0)

    def reshape(self, x, y, out=None):
        """Reshape of value ``x`` to the shape of value ``y``: fixed sizes written out, a
        dynamic size kept from x's same axis (0) where it is the same size, one other
        dynamic size left to Reshape (-1), any further ones read from Shape."""
        target, open_ = [], []
        for i, s in enumerate(y.sig):
            if isinstance(s, int):
                target.append(s)
            elif i < x.ndim and x.sig[i] == s:
                target.append(0)
            else:
                target.append(None)
                open_.append(i)
        fixed_zero = any(isinstance(s, int) and s == 0 for s in y.sig)
        if fixed_zero:  # a real 0 would read as "copy" unless allowzero
            if y.static:
                if self.opset < 14:
                    raise self.error(f"reshaping to {y.shape}, which has a 0 size, needs "
                                     f"Reshape's allowzero (opset 14 or later)")
                return self.op("Reshape", [x.name, self.ints(y.shape)], out=out, allowzero=1)
            raise self.error(f"reshaping to {y.shape} mixes a 0 size with dynamic ones")
        if len(open_) == 1:
            target[open_[0]] = -1
        if all(t is not None for t in target):
            return self.op("Reshape", [x.name, self.ints(target)], out=out)
        sig = [s if t is None else t for s, t in zip(y.sig, target)]
        return self.op("Reshape", [x.name, self.shape_tensor(sig, [x])], out=out)


# ---- putting the graph together ------------------------------------------------------------

def _assemble(records, specs, in_names, outs, out_names, second, dyn_in, dyn_out, opset,
              graph_name, from_layers, tracer=None, names=None):
    from .export_ops import rule_for
    sigs, varying = {}, {}
    if second is not None:
        sigs, varying = _signatures(records, second[0], outs, second[1], specs, second[2],
                                    (tracer, second[3] if len(second) > 3 else None))
    g = Builder(opset, names)
    for n in in_names + out_names:
        g.taken.add(n)
    values = {}
    dim_names = {}  # signature -> the name of an input axis
    inputs_vi = []
    for i, (p, name) in enumerate(zip(specs, in_names)):
        v = g.val(name, p.shape, p.dtype, sigs.get(id(p)))
        values[id(p)] = v
        dims = []
        for a, d in enumerate(p.shape):
            axis_name = dyn_in.get(i, {}).get(a)
            if axis_name is not None:
                dim_names.setdefault(v.sig[a], axis_name)
            dims.append(axis_name if axis_name is not None else d)
        inputs_vi.append(helper.make_tensor_value_info(name, onnx_type(p.dtype), dims))

    producer = {}
    for k, r in enumerate(records):
        for j, y in enumerate(r.ys):
            if y is not None:
                producer[id(y)] = (k, j)
    needed = _needed(records, producer, outs, values)

    for k, r in enumerate(records):
        if k not in needed:
            continue
        xs = []
        for x in r.xs:
            if x is None:
                xs.append(None)
            elif id(x) in values:
                xs.append(values[id(x)])
            elif tracer is not None and id(tracer.alias(x)) in values:
                xs.append(values[id(tracer.alias(x))])  # a detached handle of a traced value
            elif isinstance(x, Tensor):
                xs.append(g.leaf(x))
            else:
                raise errors.UnsupportedError(
                    f"to_onnx: an input of {r.fn.name} {tuple(x.shape)} was not made by any op "
                    f"hl can export (the indices of max_pool(return_indices=True), the "
                    f"statistics of batch_norm(return_stats=True), a Placeholder made in "
                    f"forward...)")
        ys = []
        for y in r.ys:
            if y is None:
                ys.append(None)
                continue
            v = g.val(g.temp(), y.shape, y.dtype, sigs.get(id(y)))
            values[id(y)] = v
            ys.append(v)
        rule = rule_for(type(r.fn))
        if rule is None:
            raise errors.UnsupportedError(
                f"to_onnx: hl has no ONNX export for {type(r.fn).__name__} ({r.fn.name})")
        g.layer = r.layer if r.layer is not None else (_layer_of_params(r.xs)
                                                        if from_layers else None)
        g.op_name = r.fn.name
        g.varying = set(varying.get(k, ()))
        g.recorded = from_layers  # SINGA's form: the arguments as forward left them
        rule(g, Attrs(r.fn, r.cfg), xs, ys)
        if g.varying:
            raise g.error(f"its arguments {sorted(g.varying)} differ between two traces (on "
                          f"other input values, and other sizes of the dynamic axes), and its "
                          f"ONNX form cannot follow them")
    g.layer = None

    # The outputs: the value itself renamed, or an Identity where it is an input, a constant
    # or already another output.
    rename = {}
    outputs_vi = []
    for name, o in zip(out_names, outs):
        v = values.get(id(o))
        if v is None:
            if isinstance(o, Tensor):
                v = g.leaf(o)
            else:
                raise errors.UnsupportedError(f"to_onnx: output {name!r} was not made by any "
                                              f"op hl can export")
        if v.name.startswith("%") and v.name not in rename:
            rename[v.name] = name
        else:
            g.op("Identity", [rename.get(v.name, v.name)], out=name)
        dims = []
        for a, (d, s) in enumerate(zip(v.shape, v.sig)):
            given = dyn_out.get(name, {}).get(a)
            if given is not None:
                dims.append(given)
            elif isinstance(s, int):
                dims.append(d)
            else:
                dims.append(dim_names.get(s, f"{name}_dim{a}"))
        outputs_vi.append(helper.make_tensor_value_info(name, onnx_type(v.dtype), dims))

    nodes = _finish_names(g, rename)
    graph = helper.make_graph(nodes, graph_name, inputs_vi, outputs_vi, initializer=g.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                              producer_name="hl", producer_version=_version())
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", opset)])
    return model


def _needed(records, producer, outs, values):
    """The indices of the records the outputs depend on."""
    needed = set()
    stack = [o for o in outs]
    while stack:
        t = stack.pop()
        if t is None or id(t) in values:
            continue
        hit = producer.get(id(t))
        if hit is None or hit[0] in needed:
            continue
        needed.add(hit[0])
        stack.extend(x for x in records[hit[0]].xs if x is not None)
    return needed


def _layer_of_params(xs):
    """SINGA's form has no layers on the stack: an op that reads a parameter named
    'conv1.W' is taken to belong to layer 'conv1'."""
    for x in xs:
        name = getattr(x, "name", None) if isinstance(x, Tensor) else None
        if isinstance(name, str) and "." in name:
            return name.rsplit(".", 1)[0]
    return None


def _finish_names(g, rename):
    """Names the nodes after their layers and the temporary values after their nodes."""
    by_layer = {}
    for node, layer in zip(g.nodes, g.node_layers):
        by_layer.setdefault(layer, []).append(node)
    count, node_names = {}, set()
    for layer, nodes in by_layer.items():
        for node in nodes:
            if layer is None:
                base = f"{node.op_type}_{count.setdefault(node.op_type, 0)}"
                count[node.op_type] += 1
            elif len(nodes) == 1:
                base = layer
            else:
                base = f"{layer}/{node.op_type}"
            name, k = base, 1
            while name in node_names:  # node names and value names are separate namespaces
                name = f"{base}_{k}"
                k += 1
            node_names.add(name)
            node.name = name
    for node in g.nodes:
        for i, out in enumerate(node.output):
            if out.startswith("%") and out not in rename:
                rename[out] = g.unique(node.name if len(node.output) == 1 else
                                       f"{node.name}:{i}")
    for node in g.nodes:
        for field in (node.input, node.output):
            for i, n in enumerate(field):
                if n in rename:
                    field[i] = rename[n]
    return g.nodes


def _version():
    try:
        from .. import __version__
        return str(__version__)
    except ImportError:
        return ""


# ---- an imported model, written back ---------------------------------------------------------

def _export_onnx_model(model, opset, dynamic_axes, last_layers, name):
    """The ONNXModel's own graph with its current weights; cut after node ``last_layers``."""
    proto = onnx.ModelProto()
    proto.CopyFrom(model._onnx_meta)  # the graph without its weights
    graph = proto.graph
    graph.initializer.extend(numpy_helper.from_array(np.array(_host(t), order="C"), name)
                             for name, t in model.initializer_values().items())
    if last_layers is not None:
        _cut(model, graph, model.node_index(last_layers))
    if dynamic_axes:
        _mark_dynamic(graph, dynamic_axes)
    if name:
        graph.name = name
    own = {o.domain or "": o.version for o in proto.opset_import}
    if opset is not None and own.get("") != opset:
        try:
            proto = onnx.version_converter.convert_version(proto, opset)
        except Exception as e:  # noqa: BLE001 - onnx raises several kinds
            raise errors.ONNXError(f"to_onnx: the imported model is opset {own.get('')}; onnx "
                                   f"could not convert it to opset {opset}: {e}") from None
    return proto


def _cut(model, graph, stop):
    """Keeps the nodes node ``stop`` depends on, with its outputs as the graph's outputs."""
    from .graph import _subgraph_free_names
    nodes = model.graph.nodes
    target = [n for n in nodes[stop].outputs if n]
    known = {}
    for vi in list(graph.value_info) + list(graph.output) + list(graph.input):
        known[vi.name] = vi
    missing = [n for n in target if n not in known]
    if missing:
        raise errors.ONNXError(f"to_onnx: ONNX shape inference gave no type for {missing}, "
                               f"the outputs of node {stop}, so the cut graph cannot declare "
                               f"them")
    producer = {}
    for node in graph.node:
        for o in node.output:
            producer[o] = node
    stack = list(target)
    seen = set()
    while stack:
        v = stack.pop()
        node = producer.get(v)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        stack.extend(node.input)
        stack.extend(_subgraph_free_names(node))
    order = [n for n in graph.node if id(n) in seen]
    used = set()
    for n in order:
        used.update(n.input)
        used.update(_subgraph_free_names(n))
    new_outputs = [known[n] for n in target]
    del graph.node[:]
    graph.node.extend(order)
    inits = [t for t in graph.initializer if t.name in used]
    del graph.initializer[:]
    graph.initializer.extend(inits)
    inputs = [i for i in graph.input if i.name in used or i.name in target]
    del graph.input[:]
    graph.input.extend(inputs)
    del graph.output[:]
    graph.output.extend(new_outputs)
    vis = [v for v in graph.value_info if v.name not in target]
    del graph.value_info[:]
    graph.value_info.extend(vis)


def _mark_dynamic(graph, dynamic_axes):
    by_name = {v.name: v for v in list(graph.input) + list(graph.output)}
    for key, spec in dynamic_axes.items():
        if key not in by_name:
            raise errors.ValueError(f"to_onnx: dynamic_axes names {key!r}, which is no input "
                                    f"or output of the model ({sorted(by_name)})")
        dims = by_name[key].type.tensor_type.shape.dim
        for a, n in _axes_spec(spec, key).items():
            if not -len(dims) <= a < len(dims):
                raise errors.IndexError(f"to_onnx: dynamic axis {a} of {key!r} is out of range "
                                        f"for its {len(dims)} dimensions")
            dims[a].Clear()
            dims[a].dim_param = n
    # Inferred shapes of the intermediates may have fixed the old sizes: drop them.
    del graph.value_info[:]


__all__ = ["to_onnx", "save"]
