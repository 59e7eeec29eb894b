"""Assembling an ONNX graph from recorded ops: each record written by its export rule (the
families of hl/onnx/ops/), the two traces compared, names and dynamic dims finished."""
import numpy as np
from onnx import helper

from ... import errors
from ..._tensor import Tensor
from ...autograd import Placeholder
from ..types import onnx_type
from .builder import Attrs, Builder, _host


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
                f"or a value read on the host), so no ONNX graph reproduces it")
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


# ---- putting the graph together ------------------------------------------------------------

def _assemble(records, specs, in_names, outs, out_names, second, dyn_in, dyn_out, opset,
              graph_name, from_layers, tracer=None, names=None):
    from ..registry import rule_for
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
        from ... import __version__
        return str(__version__)
    except ImportError:
        return ""
