"""Matrix products with a constant weight, for inference programs (prepare()).

Each MatMul or Gemm whose B is a float32 constant matrix becomes a FusedMatMul node: B is
packed once, here, into the layout the GEMM kernel reads (hl.gemm_pack_b; onnxruntime does
the same at session creation), so a product with few rows (batch-1 transformers: 64-128
token rows) does not repack B on every call. What follows the product is absorbed when it
can run in the product's output loop (hl.matmul_fused): an Add of a constant bias, a Reshape
(GPT-2's Gemm between two Reshapes, BERT's split into heads: the epilogue is element-wise, so
it runs before the reshape, on the residual viewed in the product's shape), an Add of a
residual, and an
element-wise chain that computes ReLU, GELU (BERT's Div/Erf/Add/Mul/Mul) or GELU's tanh form
(GPT-2's Mul/Pow/Mul/Add/Mul/Tanh/Add/Mul). A chain is recognised by what it computes, not by
its spelling: the nodes that form a function of the product's output alone are run on probe
values and compared with each activation (float64 references, 2e-5 tolerance, far below the
4.7e-4 by which GELU's two forms differ), so exporters' variants of one formula all match.

As for conv_epilogues (fuse.py), the fused node keeps the nodes it absorbed and runs them one
after another for a call the kernel cannot take (gradients wanted, another dtype, a residual
that broadcasts); runs that ask for intermediates use the graph as written.
"""
import copy
import math

import numpy as np

from ..autograd import functional as F
from ..autograd import is_grad_enabled, no_grad
from .fuse import FUSING_DEVICES
from .ops.shape import reshape_target

# Element-wise ops an activation chain may be made of (unary, or binary with a scalar
# constant), and how far past the product the chain's nodes may lie in the node order.
CHAIN_OPS = {"Add", "Sub", "Mul", "Div", "Pow", "Erf", "Tanh", "Relu", "Sqrt", "Neg"}
CHAIN_SPAN = 24
TOLERANCE = 2e-5


def _erf(x):
    return np.vectorize(math.erf)(x)


# The activations matmul_fused applies, as float64 references for the probe.
REFERENCES = {
    "relu": lambda x: np.maximum(x, 0.0),
    "gelu": lambda x: 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0))),
    "gelu_tanh": lambda x: 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) *
                                                    (x + 0.044715 * x ** 3))),
}
PROBE = np.concatenate([np.linspace(-8.0, 8.0, 321), [-30.0, -12.5, 12.5, 30.0, 1e-3, -1e-3]])


def matmul_epilogues(nodes, graph, constants, device, skip, packed_only=None):
    """The program's node list with FusedMatMul nodes in place of the chains they absorb, or
    None when nothing fused. ``skip``: indices of nodes that do not run (the returned list
    leaves them out). On the CPU B is packed; on cuda the node keeps B as the (K, N) view of
    the constant, which cuBLAS reads in place (a packed B would be unpacked on every call:
    libcore/cuda/fused.cu). With a dict ``packed_only`` (CPU), a B that only fused products
    read leaves ``constants`` once packed, into packed_only[name] = (PackedMatrix, trans_b)
    (the program re-derives it on demand), so that it is freed at once and the next packing
    reuses its memory."""
    kind = getattr(device, "kind", "cpu")
    if kind not in FUSING_DEVICES:
        return None
    nodes = [n for n in nodes if n.index not in skip]
    readers, pos = {}, {}
    for i, node in enumerate(nodes):
        pos[id(node)] = i
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.outputs}
    absorbed, at, packs = set(), {}, {}
    pending = {}  # B's name -> its readers not yet fused, while all of them are products
    if packed_only is not None and kind == "cpu":  # (on cuda the "packed" B is B itself)
        pending = _packed_only_candidates(nodes, readers, constants, outputs)

    def only_reader(name):
        rs = readers.get(name, [])
        ok = len(rs) == 1 and name not in outputs and id(rs[0]) not in absorbed
        return rs[0] if ok else None

    for mm in nodes:
        if id(mm) in absorbed:
            continue
        spec = _product(mm, constants)
        if spec is None:
            continue
        b_name, trans_b, bias = spec
        n_cols = constants[b_name].shape[0 if trans_b else 1]
        chain, y, reshape, residual, act = [mm], mm.outputs[0], None, "", ("none", 0.0, 0.0)
        nxt = only_reader(y)
        if bias is None and nxt is not None and nxt.op_type == "Add" and \
                _other(nxt, y) in constants and _is_bias(constants[_other(nxt, y)], n_cols):
            bias = _other(nxt, y)
            chain.append(nxt)
            y = nxt.outputs[0]
            nxt = only_reader(y)
        if nxt is not None and nxt.op_type == "Reshape" and nxt.inputs[0] == y and \
                len(nxt.inputs) > 1 and nxt.inputs[1] and nxt.opset >= 5:
            reshape = nxt
            chain.append(nxt)
            y = nxt.outputs[0]
            nxt = only_reader(y)
        if nxt is not None and nxt.op_type == "Add" and _other(nxt, y) and \
                _other(nxt, y) not in constants:
            residual = _other(nxt, y)
            chain.append(nxt)
            y = nxt.outputs[0]
        found = _activation(y, nodes, pos, readers, constants, outputs, absorbed, device)
        if found is not None:
            act, more = found
            chain += more
        if isinstance(bias, np.ndarray):  # Gemm's C, made a (N,) constant
            name = f"{mm.name}/fused_bias"
            constants[name] = _const(bias, constants[b_name])
            bias = name
        key = (b_name, trans_b)
        if key not in packs:
            b = constants[b_name]
            packs[key] = F.gemm_pack_b(b, trans_b=trans_b) if kind == "cpu" else \
                (b.T if trans_b else b)
        fused = copy.copy(mm)
        fused.op_type = "FusedMatMul"
        fused.name = "+".join(n.name for n in chain)
        fused.inputs = [mm.inputs[0], bias or "", residual, reshape.inputs[1] if reshape else ""]
        fused.outputs = [chain[-1].outputs[0]]
        fused.index = chain[-1].index
        fused.handler = run_fused_matmul
        fused.fused_chain = chain
        fused.packed = packs[key]
        fused.packed_from = key  # (B's name, trans_b): the plain B may be dropped
        if b_name in pending:
            pending[b_name] -= 1
            if not pending[b_name]:  # its last reader: from now on only the packed copy
                packed_only[b_name] = (packs[key], trans_b)
                del constants[b_name]
        fused.epilogue = act
        fused.fused_reshape = reshape
        absorbed.update(id(n) for n in chain)
        at[id(chain[-1])] = fused
    if not at:
        return None
    return [at.get(id(n), n) for n in nodes if id(n) not in absorbed or id(n) in at]


def _packed_only_candidates(nodes, readers, constants, outputs):
    """{B's name: its number of readers} for the constant matrices that only products read
    (as B, all with one trans_b), and no subgraph, nor the graph's outputs."""
    from .graph import _subgraph_free_names
    inner = set()
    for node in nodes:
        if any(a.type in (a.GRAPH, a.GRAPHS) for a in node.proto.attribute):
            inner |= _subgraph_free_names(node.proto)
    out = {}
    for name, rs in readers.items():
        b = constants.get(name)
        if b is None or b.ndim != 2 or b.dtype.name != "float32" or name in outputs or \
                name in inner:
            continue
        specs = [_product(r, constants) if r.inputs[1:2] == [name] else None for r in rs]
        if None not in specs and len({(s[0], s[1]) for s in specs}) == 1:
            out[name] = len(rs)
    return out


def _other(node, name):
    """The other input of a two-input node that reads ``name`` once, or ""."""
    if len(node.inputs) != 2 or node.inputs.count(name) != 1 or not all(node.inputs):
        return ""
    return node.inputs[1] if node.inputs[0] == name else node.inputs[0]


def _is_bias(t, n):
    return t.dtype.name == "float32" and tuple(t.shape) == (n,)


def _const(array, like):
    from .ops._util import const
    return const(array, like=like)


def _product(node, constants):
    """(B's name, trans_b, bias: None or a (N,) float32 array) for a MatMul or Gemm whose B
    is a float32 constant matrix that the kernel can take as it is; else None."""
    if len([o for o in node.outputs if o]) != 1 or len(node.inputs) < 2 or \
            not node.inputs[0]:
        return None
    b = constants.get(node.inputs[1])
    if b is None or b.ndim != 2 or b.dtype.name != "float32" or b.requires_grad:
        return None
    if node.op_type == "MatMul" and len(node.inputs) == 2:
        return node.inputs[1], False, None
    if node.op_type != "Gemm" or node.attr("transA", 0) or \
            float(node.attr("alpha", 1.0)) != 1.0:
        return None
    trans_b = bool(node.attr("transB", 0))
    n_cols = b.shape[0 if trans_b else 1]
    c_name = node.inputs[2] if len(node.inputs) > 2 else ""
    if not c_name:
        return node.inputs[1], trans_b, None
    c = constants.get(c_name)
    if c is None or c.dtype.name != "float32" or c.numel() != n_cols or \
            c.shape not in ((n_cols,), (1, n_cols)):
        return None
    bias = c.numpy().reshape(n_cols).astype(np.float64) * float(node.attr("beta", 1.0))
    return node.inputs[1], trans_b, bias.astype(np.float32)


def _scalar(name, constants):
    t = constants.get(name)
    return t is not None and t.numel() == 1 and t.dtype.name == "float32"


def _activation(y, nodes, pos, readers, constants, outputs, absorbed, device):
    """((act, alpha, beta), the chain's nodes in order) for the element-wise nodes after the
    value ``y`` that compute an activation of y alone, the longest such chain; or None.
    The probe runs on ``device``, where the chain's constants are."""
    rs = readers.get(y, [])
    if not rs or y in outputs or any(id(r) in absorbed for r in rs):
        return None
    start = min(pos[id(r)] for r in rs)
    found, inside = [], {y}
    for node in nodes[start:start + CHAIN_SPAN]:
        ins = [i for i in node.inputs if i]
        if node.op_type not in CHAIN_OPS or id(node) in absorbed or \
                len([o for o in node.outputs if o]) != 1 or not any(i in inside for i in ins):
            continue
        if all(i in inside or _scalar(i, constants) for i in ins):
            found.append(node)
            inside.add(node.outputs[0])
    for end in range(len(found) - 1, -1, -1):
        chain = _ancestors(found, end, y)
        if chain is None or not _closed(chain, y, readers, outputs):
            continue
        act = _identify(chain, y, constants, device)
        if act is not None:
            return (act, 0.0, 0.0), chain
    return None


def _ancestors(found, end, y):
    """The nodes of found[:end + 1] that found[end] depends on (itself included), in order."""
    need, chain = {found[end].outputs[0]}, []
    for node in reversed(found[:end + 1]):
        if node.outputs[0] in need:
            chain.append(node)
            need.update(i for i in node.inputs if i)
    return chain[::-1]


def _closed(chain, y, readers, outputs):
    """Every value the chain makes, but its last, and y itself, is read inside the chain only."""
    members = {id(n) for n in chain}
    for name in [y] + [n.outputs[0] for n in chain[:-1]]:
        if name in outputs or any(id(r) not in members for r in readers.get(name, [])):
            return False
    return True


def _identify(chain, y, constants, device):
    """The activation the chain computes of y, found by running it on PROBE; or None."""
    from .._tensor import tensor
    values = {y: tensor(PROBE.astype(np.float32), device=device)}
    try:
        with no_grad():
            for node in chain:
                xs = [values[i] if i in values else constants[i] if i else None
                      for i in node.inputs]
                node.scope = values
                try:
                    values[node.outputs[0]] = node.handler(node, *xs)
                finally:
                    node.scope = None
        got = values[chain[-1].outputs[0]].numpy().astype(np.float64)
    except Exception:  # a node that cannot run on a vector: no activation of ours
        return None
    if got.shape != PROBE.shape:
        return None
    for act, ref in REFERENCES.items():
        want = ref(PROBE)
        if np.all(np.abs(got - want) <= TOLERANCE * (1.0 + np.abs(want))):
            return act
    return None


def run_fused_matmul(n, x, bias=None, residual=None, shape=None):
    """The handler of a FusedMatMul node: hl.matmul_fused on the packed B, or the absorbed
    nodes one after another where the kernel cannot take the call."""
    k, cols = n.packed.shape
    if x.dtype.name != "float32" or x.ndim < 1 or x.shape[-1] != k or \
            (n.fused_chain[0].op_type == "Gemm" and x.ndim != 2) or \
            (is_grad_enabled() and x.requires_grad):
        return _run_chain(n, x)
    out_shape = tuple(x.shape[:-1]) + (cols,)
    final = out_shape
    if n.fused_reshape is not None:
        final = tuple(reshape_target(n.fused_reshape, out_shape, n.fused_reshape.ints(
            shape, "shape"), bool(n.fused_reshape.attr("allowzero", 0))))
    if residual is not None:
        if tuple(residual.shape) != final or residual.dtype.name != "float32":
            return _run_chain(n, x)  # it broadcasts, or the Add promotes
        if final != out_shape:
            residual = F.reshape(residual, *out_shape)
    act, alpha, beta = n.epilogue
    y = F.matmul_fused(x, n.packed, bias, residual, act=act, alpha=alpha, beta=beta)
    return y if final == out_shape else F.reshape(y, *final)


def _run_chain(n, x):
    """The absorbed nodes, one after another, reading everything else from the run's values."""
    local = {n.fused_chain[0].inputs[0]: x}
    for node in n.fused_chain:
        xs = [local[i] if i in local else n.scope[i] if i in n.scope else n.constant(i)
              if i else None for i in node.inputs]
        node.scope = n.scope
        try:
            ys = node.handler(node, *xs)
        finally:
            node.scope = None
        local[node.outputs[0]] = ys[0] if isinstance(ys, (tuple, list)) else ys
    return local[n.outputs[0]]
