"""Exports of what is already a graph: SINGA's form (a recorded forward walked back from its
outputs and replayed on placeholders) and an imported ONNXModel written back as its own
graph with its current weights."""
import copy

import numpy as np
import onnx
from onnx import numpy_helper

from ... import errors
from ..._tensor import Tensor
from ...autograd import Placeholder
from .assemble import _assemble
from .builder import _host
from .io import (_axes_spec, _check_dynamic_outputs, _grown, _output_names, _split_dynamic,
                 _unique_names)
from .trace import Record


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
    from ..graph import _subgraph_free_names
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
