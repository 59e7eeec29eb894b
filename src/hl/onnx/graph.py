"""Graph: an ONNX GraphProto as hl runs it: nodes in topological order, each bound to its
handler; initializers as numpy arrays; the inputs the caller feeds, with their declared
dtypes and (possibly symbolic) shapes; the outputs; and, per value, the last node that reads
it, so the runner can free intermediates as it goes."""
import onnx
from onnx import numpy_helper

from .. import errors
from . import ops
from .node import Node
from .types import ELEM_TYPES, elem_type_name

class ValueSpec:
    """A graph input or output: its name, element type and shape (ints, dim names, None)."""

    def __init__(self, vi):
        self.name = vi.name
        t = vi.type
        self.optional = t.HasField("optional_type")  # an optional tensor may be fed None
        if self.optional:
            t = t.optional_type.elem_type
        tt = t.tensor_type if t.HasField("tensor_type") else None
        self.elem_type = tt.elem_type if tt is not None else None
        self.shape = None
        if tt is not None and tt.HasField("shape"):
            self.shape = tuple(d.dim_value if d.HasField("dim_value")
                               else (d.dim_param or None) for d in tt.shape.dim)

    @property
    def dtype(self):
        return ELEM_TYPES.get(self.elem_type)

    def __repr__(self):
        return f"ValueSpec({self.name!r}, {elem_type_name(self.elem_type)}, {self.shape})"


class Graph:
    def __init__(self, proto, opsets, outer_names=(), check_ops=True, weights=None):
        """``weights``: {initializer name: CPU hl tensor} for initializers whose data the
        proto does not hold (read from the file by weights_file.py); their arrays here are
        views of those tensors."""
        self.proto = proto
        self.opsets = opsets
        weights = weights or {}
        self.initializers = {t.name: weights[t.name].numpy() if t.name in weights
                             else _read_initializer(t) for t in proto.initializer}
        for sp in proto.sparse_initializer:
            from .node import _sparse_to_dense
            self.initializers[sp.values.name] = _sparse_to_dense(sp)
        self.inputs = [ValueSpec(v) for v in proto.input if v.name not in self.initializers]
        self.outputs = [ValueSpec(v) for v in proto.output]
        self.outer_names = set(outer_names)
        self.nodes = self._sorted_nodes(proto.node)
        if check_ops:
            self._bind_handlers()
        self.last_use = self._last_uses()

    # ---- order -------------------------------------------------------------------------

    def _sorted_nodes(self, protos):
        """Kahn's algorithm, keeping the file's order among ready nodes; a value read but
        never made, or a cycle, is an ONNXError naming the nodes."""
        known = set(self.initializers) | {v.name for v in self.proto.input} | self.outer_names
        producer = {}
        for i, p in enumerate(protos):
            for out in p.output:
                if out:
                    producer[out] = i
        needs = []
        for i, p in enumerate(protos):
            deps = set()
            for name in list(p.input) + sorted(_subgraph_free_names(p)):
                if not name or name in known:
                    continue
                if name not in producer:
                    raise errors.ONNXError(
                        f"ONNX node '{p.name or p.op_type}' ({p.op_type}) reads {name!r}, "
                        f"which is no graph input, initializer or node output")
                if producer[name] != i:
                    deps.add(producer[name])
            needs.append(deps)
        users = [[] for _ in protos]
        for i, deps in enumerate(needs):
            for d in deps:
                users[d].append(i)
        waiting = [len(d) for d in needs]
        import heapq
        ready = [i for i, w in enumerate(waiting) if w == 0]
        heapq.heapify(ready)
        order = []
        while ready:
            i = heapq.heappop(ready)
            order.append(i)
            for u in users[i]:
                waiting[u] -= 1
                if waiting[u] == 0:
                    heapq.heappush(ready, u)
        if len(order) != len(protos):
            stuck = [protos[i].name or protos[i].op_type for i, w in enumerate(waiting) if w]
            raise errors.ONNXError(
                f"the ONNX graph has a cycle: nodes {stuck[:8]}"
                f"{' ...' if len(stuck) > 8 else ''} wait on each other")
        nodes = []
        for index, i in enumerate(order):
            p = protos[i]
            domain = p.domain if p.domain != "ai.onnx" else ""
            nodes.append(Node(p, index, self.opsets.get(domain, self.opsets.get("", 1))))
            nodes[-1].graph = self
        return nodes

    def _bind_handlers(self):
        for node in self.nodes:
            node.handler = ops.lookup(node.domain, node.op_type, node.opset)
            if node.handler is None:
                raise errors.UnsupportedError(
                    f"ONNX operator {node.op_type!r} (domain {node.domain or 'ai.onnx'!r}, "
                    f"opset {node.opset}) in node '{node.name}' is not supported by hl; "
                    f"hl.onnx.supported_ops() lists the ones it is")
            for attr in node.proto.attribute:  # If, Loop, Scan: their bodies must import too
                for g in ([attr.g] if attr.type == onnx.AttributeProto.GRAPH else
                          list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []):
                    node.attrs[attr.name] = Graph(g, self.opsets, self._visible_names())

    def _visible_names(self):
        names = set(self.outer_names) | set(self.initializers)
        names |= {v.name for v in self.proto.input}
        for n in self.nodes:
            names |= set(n.outputs)
        return names

    def _last_uses(self):
        return last_uses(self.nodes, self)

    def free_names(self):
        """Names this graph reads from an enclosing scope."""
        made = set(self.initializers) | {v.name for v in self.proto.input}
        for n in self.nodes:
            made |= set(n.outputs)
        used = set()
        for n in self.nodes:
            used |= {x for x in n.inputs if x}
            used |= _subgraph_free_names(n.proto)
        used |= {o.name for o in self.outputs}
        return used - made


def last_uses(nodes, graph):
    """{value name: index of the last node of ``nodes`` (an order of graph's nodes, or of
    nodes made from them) that reads it}; graph outputs live past the end."""
    last = {}
    for node in nodes:
        for name in node.inputs:
            if name:
                last[name] = node.index
        for name in _subgraph_free_names(node.proto):
            last[name] = node.index
    for out in graph.outputs:
        last[out.name] = len(graph.nodes)
    return last


def _read_initializer(t):
    """An initializer as a numpy array; data that does not fit its dims is an ONNXError."""
    try:
        return numpy_helper.to_array(t)
    except Exception as e:  # noqa: BLE001 - numpy and onnx raise several kinds
        raise errors.ONNXError(
            f"initializer {t.name!r} ({elem_type_name(t.data_type)} {list(t.dims)}) cannot be "
            f"read: {e}") from None


def _subgraph_free_names(proto):
    """Names the node's subgraphs (If/Loop/Scan bodies) read from the enclosing scope."""
    names = set()
    for attr in proto.attribute:
        graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else \
            list(attr.graphs) if attr.type == onnx.AttributeProto.GRAPHS else []
        for g in graphs:
            made = {t.name for t in g.initializer} | {v.name for v in g.input}
            for n in g.node:
                made |= set(n.output)
            used = set()
            for n in g.node:
                used |= {x for x in n.input if x}
                used |= _subgraph_free_names(n)
            used |= {o.name for o in g.output}
            names |= used - made
    return names
