"""Attention blocks of transformer graphs as one kernel, for inference programs (prepare()).

Exporters write attention as separate nodes: MatMul(Q, K^T), a scale (Mul or Div by a
constant, on the scores, or on Q and K^T both as PyTorch's scaled_dot_product_attention
does), Add of a mask, Softmax on the last axis, with SDPA's IsNaN/Where after it (a fully
masked row's NaN probabilities made 0) and Casts to float32 that change nothing, then
MatMul(., V); and after it the heads merged
back by Transpose(0, 2, 1, 3) and Reshape (sometimes behind a Reshape that changes nothing).
Run one by one these write the (batch, heads, queries, keys) scores and re-read them four
times. Here the chain becomes one FusedAttention node that runs hl.attention (libcore
cpu/attention.c): per (batch, head), a few query rows' scores kept in cache, q, k and v read
through the head split's views (the Transposes before the block are views already), the
scales folded into one, the output written in the merged-heads layout when a head merge
follows (its Transpose and Reshape then find views, not copies, to work on).

The pattern is recognised by the nodes' types and wiring, each intermediate read only inside
the chain. What depends on shapes (4-D operands, a mask that broadcasts) is checked at each
call; a call that does not fit (or wants gradients, or another
dtype) runs the absorbed nodes one after another, as fuse_matmul.py's fallback does. CPU
only: libcore's CUDA backend has no attention kernel.
"""
import copy

from ..autograd import functional as F
from ..autograd import is_grad_enabled

HEAD_MERGE = [0, 2, 1, 3]


def attention_blocks(nodes, graph, constants, device, skip):
    """The program's node list with FusedAttention nodes in place of the attention chains
    they absorb, or None when there is none. ``skip``: nodes that do not run."""
    if getattr(device, "kind", "cpu") != "cpu":
        return None
    nodes = [n for n in nodes if n.index not in skip]
    pos = {id(n): i for i, n in enumerate(nodes)}
    producer, readers = {}, {}
    for node in nodes:
        for name in node.outputs:
            if name:
                producer[name] = node
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.outputs}
    absorbed, at = set(), {}

    def sole_reader(name, op_type=None):
        """The one node reading ``name`` (of that type), when nothing else does."""
        rs = readers.get(name, [])
        if len(rs) != 1 or name in outputs or id(rs[0]) in absorbed:
            return None
        return rs[0] if op_type is None or rs[0].op_type == op_type else None

    def own(name, op_type):
        """The producer of ``name`` when it is an ``op_type`` node whose output only the
        chain reads (its one reader is the caller's node)."""
        p = producer.get(name)
        if p is None or p.op_type != op_type or id(p) in absorbed or \
                len(readers.get(name, [])) != 1 or name in outputs:
            return None
        return p

    for sm in nodes:
        if sm.op_type != "Softmax" or id(sm) in absorbed or not _last_axis(sm):
            continue
        found = _match(sm, constants, readers, outputs, own, sole_reader)
        if found is None:
            continue
        chain, spec = found
        chain.sort(key=lambda n: pos[id(n)])  # the fused node runs where the last one ran
        fused = _fused_node(chain, spec, constants)
        absorbed.update(id(n) for n in chain)
        at[id(chain[-1])] = fused
    if not at:
        return None
    return [at.get(id(n), n) for n in nodes if id(n) not in absorbed or id(n) in at]


def _last_axis(sm):
    axis = sm.attr("axis", -1 if sm.opset >= 13 else 1)
    return axis in (-1, 3) and len([o for o in sm.outputs if o]) == 1


def _scalar_value(name, constants):
    """A float32 constant of one element and rank <= 1 (which cannot widen what it meets)."""
    t = constants.get(name)
    if t is None or t.numel() != 1 or t.ndim > 1 or t.dtype.name != "float32":
        return None
    return float(t.numpy().reshape(-1)[0])


def _scaling(node, constants):
    """(the input a Mul or Div node scales, the factor) when its other input is a float32
    scalar constant (the divisor, for Div), else None."""
    if node.op_type not in ("Mul", "Div") or len(node.inputs) != 2 or not all(node.inputs):
        return None
    for i in ((1, 0) if node.op_type == "Mul" else (1,)):  # the constant's place
        c = _scalar_value(node.inputs[i], constants)
        inner = node.inputs[1 - i]
        if c is None or inner in constants or (node.op_type == "Div" and c == 0.0):
            continue
        return inner, (c if node.op_type == "Mul" else 1.0 / c)
    return None


def _scores(x, constants, own):
    """(the MatMul making the scores x, through at most one scaling; the scale; the scaling
    node or None), or None."""
    scale, scaler = 1.0, None
    for op_type in ("Mul", "Div"):
        s = own(x, op_type)
        found = _scaling(s, constants) if s is not None else None
        if found is not None:
            x, scale = found
            scaler = s
            break
    mm = own(x, "MatMul")
    if mm is None or len(mm.inputs) != 2 or not all(mm.inputs):
        return None
    return mm, scale, scaler


def _match(sm, constants, readers, outputs, own, sole_reader):
    """(chain in node order, spec) for the attention chain around Softmax ``sm``, or None."""
    mask, before = "", []  # before: the nodes between the first MatMul and the Softmax
    found = _scores(sm.inputs[0], constants, own)
    add = own(sm.inputs[0], "Add") if found is None else None
    if add is not None and len(add.inputs) == 2 and all(add.inputs) and \
            add.inputs[0] != add.inputs[1]:
        for i in (0, 1):  # the scores' side is the one that leads back to a MatMul
            found = _scores(add.inputs[i], constants, own)
            if found is not None:
                mask = add.inputs[1 - i]
                before.append(add)
                break
    if found is None:
        return None
    mm, scale, scaler = found
    if scaler is not None:
        before.append(scaler)
    q, kt = mm.inputs
    pre = []
    for side in (0, 1):  # SDPA's Mul on Q and on K^T
        for op_type in ("Mul", "Div"):
            s = own(mm.inputs[side], op_type)
            scaled = _scaling(s, constants) if s is not None else None
            if scaled is not None:
                scale *= scaled[1]
                pre.append(s)
                q, kt = (scaled[0], kt) if side == 0 else (q, scaled[0])
                break
    # after the Softmax: SDPA's Where(IsNaN(p), 0, p), then MatMul(p, V)
    p, nan_to_zero, after = sm.outputs[0], False, []
    if p in outputs:
        return None
    p = _float_casts(p, sole_reader, after)
    rs = readers.get(p, [])
    if len(rs) == 2 and {r.op_type for r in rs} == {"IsNaN", "Where"}:
        isnan = next(r for r in rs if r.op_type == "IsNaN")
        where = next(r for r in rs if r.op_type == "Where")
        if len(where.inputs) != 3 or where.inputs[0] != isnan.outputs[0] or \
                where.inputs[2] != p or _scalar_value(where.inputs[1], constants) != 0.0 or \
                len(readers.get(isnan.outputs[0], [])) != 1 or isnan.outputs[0] in outputs:
            return None
        after += [isnan, where]
        p, nan_to_zero = _float_casts(where.outputs[0], sole_reader, after), True
    pv = sole_reader(p, "MatMul")
    if pv is None or pv.inputs[0] != p or len(pv.inputs) != 2 or not pv.inputs[1]:
        return None
    after.append(pv)
    v, y = pv.inputs[1], pv.outputs[0]
    # the heads merged back next, by Transpose(0, 2, 1, 3) (maybe behind a Reshape that
    # changes nothing): the kernel writes the merged layout and the node returns its
    # (B, H, Sq, Dv) view, which those nodes turn back without a copy. Those nodes stay:
    # their shape inputs are computed from Shape nodes reading these very values.
    rs = [r for r in readers.get(y, []) if r.op_type != "Shape"]
    if len(rs) == 1 and rs[0].op_type == "Reshape":
        rs = [r for r in readers.get(rs[0].outputs[0], []) if r.op_type != "Shape"]
    merge = len(rs) == 1 and rs[0].op_type == "Transpose" and \
        [int(a) for a in rs[0].attr("perm", [])] == HEAD_MERGE
    chain = pre + before + [mm, sm] + after
    spec = {"q": q, "kt": kt, "v": v, "mask": mask, "scale": scale,
            "nan_to_zero": nan_to_zero, "merge": merge}
    return chain, spec


def _float_casts(name, sole_reader, after):
    """Past Casts to float32 (on float32 probabilities, which _fits sees to: no-ops) that
    are ``name``'s one reader, appending them to ``after``; the last value's name."""
    cast = sole_reader(name, "Cast")
    while cast is not None and cast.attr("to", 0) == 1:  # TensorProto.FLOAT
        after.append(cast)
        name = cast.outputs[0]
        cast = sole_reader(name, "Cast")
    return name


def _fused_node(chain, spec, constants):
    last = chain[-1]
    fused = copy.copy(last)
    fused.op_type = "FusedAttention"
    fused.name = "+".join(n.name for n in chain)
    main = [spec["q"], spec["kt"], spec["v"], spec["mask"]]
    made = {o for n in chain for o in n.outputs if o}
    extra = []  # what the fallback reads besides: the chain's other inputs (scales, zero)
    for n in chain:
        for name in n.inputs:
            if name and name not in made and name not in main and name not in extra:
                extra.append(name)
    fused.inputs = main + extra
    fused.outputs = [last.outputs[0]]
    fused.index = last.index
    fused.handler = run_fused_attention
    fused.fused_chain = chain
    fused.scale = spec["scale"]
    fused.nan_to_zero = spec["nan_to_zero"]
    fused.merge_heads = spec["merge"]
    return fused


def run_fused_attention(n, q, kt, v, mask, *rest):
    """The handler of a FusedAttention node: hl.attention on q, k (the view of K^T's
    transpose) and v, or the absorbed nodes one after another for a call it cannot take."""
    if not _fits(q, kt, v, mask) or (is_grad_enabled() and any(
            getattr(t, "requires_grad", False) for t in (q, kt, v, mask))):
        return _run_chain(n, (q, kt, v, mask) + rest)
    y = F.attention(q, F.permute(kt, 0, 1, 3, 2), v, mask, scale=n.scale,
                    nan_to_zero=n.nan_to_zero, merge_heads=n.merge_heads)
    if not n.merge_heads:
        return y
    b, h, sq, _ = q.shape
    return F.permute(F.reshape(y, b, sq, h, v.shape[3]), 0, 2, 1, 3)


def _fits(q, kt, v, mask):
    """Whether hl.attention computes what the chain would: float32 4-D operands of matching
    shapes, and a float32 mask that broadcasts to the scores without widening them."""
    ts = (q, kt, v) if mask is None else (q, kt, v, mask)
    if any(t.dtype.name != "float32" for t in ts) or q.ndim != 4 or kt.ndim != 4 or \
            v.ndim != 4:
        return False
    b, h, sq, d = q.shape
    if tuple(kt.shape[:3]) != (b, h, d) or tuple(v.shape[:3]) != (b, h, kt.shape[3]):
        return False
    if mask is None:
        return True
    scores = (b, h, sq, kt.shape[3])
    if mask.ndim > 4:
        return False
    ms = (1,) * (4 - mask.ndim) + tuple(mask.shape)
    return all(m in (1, s) for m, s in zip(ms, scores))


def _run_chain(n, xs):
    """The absorbed nodes, one after another, on the fused node's inputs."""
    local = {name: x for name, x in zip(n.inputs, xs) if name}
    for node in n.fused_chain:
        ins = [local[i] if i else None for i in node.inputs]
        node.scope = local
        try:
            ys = node.handler(node, *ins)
        finally:
            node.scope = None
        ys = ys if isinstance(ys, (tuple, list)) else (ys,)
        for name, y in zip(node.outputs, ys):
            if name:
                local[name] = y
    return local[n.outputs[0]]
