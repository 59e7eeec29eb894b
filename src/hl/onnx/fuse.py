"""Rewrites for inference programs, where every weight is a constant.

Conv followed by BatchNormalization becomes one Conv whose weights and bias carry the
normalisation: per output channel k = scale / sqrt(var + eps), W' = W * k and
B' = (B - mean) * k + bias. That is the same arithmetic in another order (results agree to
float rounding), and it removes a pass over every convolution's output.

The rewrite never touches the Graph: it returns replacement nodes, and Program runs them only
for plain runs; a run that asks for intermediates (last_layers, aux_output, all_outputs) runs
the graph as written, so every value keeps its meaning.
"""
import copy
import math

import numpy as np

from .. import _core, ops
from ..autograd import functional as F
from ..autograd import is_grad_enabled
from .ops._spatial import pads_for, strides_dilations
from .ops._util import const
from .ops.conv import _check_conv


def conv_batchnorm(graph, constants, folded):
    """({index: replacement Node}, {index of a node to skip}, {name: new constant Tensor})."""
    producer, readers = {}, {}
    for node in graph.nodes:
        for name in node.outputs:
            producer[name] = node
        for name in node.inputs:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.outputs}
    replace, skip, new_constants = {}, set(), {}
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.index in folded:
            continue
        if [o for o in bn.outputs if o] != bn.outputs[:1] or bn.attr("training_mode", 0) or \
                bn.attr("spatial", 1) != 1:
            continue
        x = bn.inputs[0]
        conv = producer.get(x)
        if conv is None or conv.op_type != "Conv" or conv.index in folded or \
                readers.get(x) != 1 or x in outputs or conv.index in replace:
            continue
        w = constants.get(conv.inputs[1])
        b = constants.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        stats = [constants.get(name) for name in bn.inputs[1:5]]
        if w is None or any(s is None for s in stats) or not w.dtype.is_floating or \
                w.dtype.name not in ("float32", "float64"):
            continue
        scale, bias, mean, var = (s.numpy().astype(np.float64) for s in stats)
        k = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
        wn = w.numpy()
        if k.shape != (wn.shape[0],):
            continue
        shift = (b.numpy().astype(np.float64) if b is not None else 0.0) - mean
        b2 = (shift * k + bias).astype(wn.dtype)
        wname, bname = f"{conv.name}/folded_W", f"{conv.name}/folded_B"
        new_constants[wname] = _scaled_rows(w, wn, k)
        new_constants[bname] = const(b2, like=w)
        fused = copy.copy(conv)
        fused.inputs = [conv.inputs[0], wname, bname]
        fused.outputs = [bn.outputs[0]]
        replace[conv.index] = fused
        skip.add(bn.index)
    return replace, skip, new_constants


# Elements of the float64 products _scaled_rows forms at a time (512 KiB: they stay in cache).
_SCALE_BLOCK = 1 << 16


def _scaled_rows(w, wn, k):
    """W * k (k float64, one factor an output channel) rounded to W's dtype, as a new tensor
    beside w: the product of each block of rows is formed in float64 and rounded as it is
    stored, which is (wn * k).astype(dtype) value for value, without a float64 copy of all
    the weights (for MobileNetV2 17 MB of fresh pages at every prepare()) nor a second copy
    into hl."""
    rows = wn.reshape(wn.shape[0], -1)
    if w.device.kind != "cpu" or rows.shape[1] == 0:
        return const((wn * k.reshape((-1,) + (1,) * (wn.ndim - 1))).astype(wn.dtype), like=w)
    out = ops.empty(*wn.shape, dtype=w.dtype)
    dst = out.numpy().reshape(rows.shape)
    step = max(1, _SCALE_BLOCK // rows.shape[1])
    for r in range(0, rows.shape[0], step):
        dst[r:r + step] = rows[r:r + step] * k[r:r + step, None]
    return out


# ---- convolution epilogues -------------------------------------------------------------------

# Activations a fused convolution applies, each as (act, alpha, beta) from its node, or None
# where the node's parameters are not constants.
def _relu(node, constants):
    return "relu", 0.0, 0.0


def _leaky_relu(node, constants):
    return "leaky_relu", float(node.attr("alpha", 0.01)), 0.0


def _hard_sigmoid(node, constants):
    return "hard_sigmoid", float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))


def _clip(node, constants):
    big = float(np.finfo(np.float32).max)
    if node.opset < 11:
        return "clip", float(node.attr("min", -big)), float(node.attr("max", big))
    bounds = []
    for i, default in ((1, -np.inf), (2, np.inf)):
        name = node.inputs[i] if len(node.inputs) > i else ""
        if not name:
            bounds.append(default)
            continue
        t = constants.get(name)
        if t is None or t.numel() != 1:
            return None
        bounds.append(float(t.numpy().reshape(())))
    return ("clip", *bounds)


ACTIVATIONS = {"Relu": _relu, "LeakyRelu": _leaky_relu, "HardSigmoid": _hard_sigmoid,
               "Clip": _clip}
# The device kinds whose backends have the fused kernels (conv_fused, matmul_fused).
FUSING_DEVICES = ("cpu", "cuda")


def conv_epilogues(nodes, graph, constants, device, skip):
    """Conv, then Add of another value, then an activation (each step optional) become one
    node that runs hl.conv_fused: the residual add and the activation applied while each
    output is in cache, instead of two more passes over the activations. Each such node whose
    weight is a float32 constant 1x1 or 3x3 stride-1 kernel also gets that weight packed,
    once, into the layout the CPU's kernels read (hl.ops.conv_pack, _packed_weight), which a
    lone Conv takes too.

    ``nodes`` is the program's node list (BatchNormalization already folded), ``skip`` the
    indices of the nodes that do not run (folded constants, absorbed BatchNormalization),
    which the returned list leaves out. The fused node
    takes the place of the last node it absorbs (by then every value it reads exists) and
    keeps the absorbed nodes: a call that the kernel cannot take (a residual that broadcasts,
    a dtype the core does not compute, gradients wanted) runs them one after another. On the
    CPU and on cuda (FUSING_DEVICES); cuda packs nothing (its GEMM reads w as it is).
    Returns the new list, or None when nothing fused."""
    kind = getattr(device, "kind", "cpu")
    if kind not in FUSING_DEVICES:
        return None
    nodes = [n for n in nodes if n.index not in skip]
    readers = {}
    for node in nodes:
        for name in node.inputs:
            if name:
                readers.setdefault(name, []).append(node)
    outputs = {o.name for o in graph.outputs}

    absorbed, at = set(), {}

    def only_reader(name):
        """The one node that reads name, if name is read once, is no graph output and its
        reader is not yet in another chain (two convolutions may feed one Add)."""
        rs = readers.get(name, [])
        ok = len(rs) == 1 and name not in outputs and id(rs[0]) not in absorbed
        return rs[0] if ok else None

    for conv in nodes:
        if conv.op_type != "Conv" or len([o for o in conv.outputs if o]) != 1 or \
                len(conv.inputs) < 2 or conv.inputs[1] not in constants:
            continue
        chain, residual, act = [conv], "", ("none", 0.0, 0.0)
        y = conv.outputs[0]
        nxt = only_reader(y)
        if nxt is not None and nxt.op_type == "Add" and len(nxt.inputs) == 2 and \
                nxt.inputs.count(y) == 1 and all(nxt.inputs):
            residual = nxt.inputs[1] if nxt.inputs[0] == y else nxt.inputs[0]
            chain.append(nxt)
            y = nxt.outputs[0]
            nxt = only_reader(y)
        if nxt is not None and nxt.op_type in ACTIVATIONS and nxt.inputs[0] == y:
            got = ACTIVATIONS[nxt.op_type](nxt, constants)
            if got is not None:
                act = got
                chain.append(nxt)
        packed = _packed_weight(conv, constants) if kind == "cpu" else None
        if len(chain) == 1 and packed is None:
            continue
        fused = copy.copy(conv)
        fused.op_type = "FusedConv"
        fused.name = "+".join(n.name for n in chain)
        fused.inputs = (conv.inputs + [""] * 3)[:3] + [residual]
        fused.outputs = [chain[-1].outputs[0]]
        fused.index = chain[-1].index
        fused.handler = run_fused_conv
        fused.fused_chain = chain
        fused.epilogue = act
        fused.fused_geometry = {}
        fused.packed_weight = packed
        fused.winograd_packs = {}  # layout -> its kernels, or REFUSED (_winograd_when_it_pays)
        absorbed.update(id(n) for n in chain)
        at[id(chain[-1])] = fused
    if not at:
        return None
    return [at.get(id(n), n) for n in nodes if id(n) not in absorbed or id(n) in at]


def run_fused_conv(n, x, w, b=None, r=None):
    """The handler of a FusedConv node (conv_epilogues). The geometry of each input signature
    is worked out (and checked) once and kept on the node."""
    operands = (x, w, b, r)
    if is_grad_enabled() and any(t is not None and t.requires_grad for t in operands):
        return _run_chain(n, x, w, b, r)  # conv_fused has no gradient
    key = tuple(None if t is None else (t.shape, t.dtype.name) for t in operands)
    cache = n.fused_geometry
    geometry = cache.get(key, _UNKNOWN)
    if geometry is _UNKNOWN:
        geometry = _fused_geometry(n, x, w, b, r)
        if len(cache) < GEOMETRIES:
            cache[key] = geometry
    if geometry is None:  # the absorbed nodes, one after another
        return _run_chain(n, x, w, b, r)
    packed = n.packed_weight if w.dtype.name == "float32" else None
    if packed is WINOGRAD_LATER:
        packed = _winograd_when_it_pays(n, x, w, geometry)
    return F.conv_fused(x, w, b, r, packed=packed, **geometry)


# A 3x3 stride-1 weight's Winograd kernels are made at the first call that takes Winograd,
# not at prepare(): transforming all of ResNet-18's was 0.15 s of its 0.4 s prepare(), and a
# layer with too few 2x2 output tiles never takes them (HL_WINOGRAD_PACKED_MIN_TILES, the
# kernel's own threshold: below it the call takes the unpacked paths).
WINOGRAD_LATER = object()
WINOGRAD_MIN_TILES = _core.WINOGRAD_PACKED_MIN_TILES
# conv_pack's answer for kernels the F(4x4, 3x3) precision guard refused (packed as NaN).
REFUSED = object()


def winograd_layout(n, oh, ow):
    """The Winograd layout a 3x3 stride-1 float32 convolution of n samples with oh x ow
    outputs takes: 'winograd43' (F(4x4, 3x3): 36 products per 4x4 tile), 'winograd'
    (F(2x2, 3x3): 16 per 2x2 tile) or None (too few tiles: the unpacked paths). The packed
    products run strips of WINOGRAD_STRIP_TILES tiles, each costing the same however many of
    its tiles are real, so the choice compares 36 x strips of 4x4 tiles with 16 x strips of
    2x2 ones: ResNet-18's 7x7 layers at batch 1 (4 tiles against 16: one strip each) keep
    F(2x2, 3x3), 2.1 against 4.6 ms; its 14x14 to 56x56 layers, and 7x7 from batch 4, take
    F(4x4, 3x3), 0.66-0.82x F(2x2, 3x3)'s time (docs/performance.md)."""
    t2 = n * ((oh + 1) // 2) * ((ow + 1) // 2)
    if t2 < WINOGRAD_MIN_TILES:
        return None
    t4 = n * ((oh + 3) // 4) * ((ow + 3) // 4)
    strip = _core.WINOGRAD_STRIP_TILES
    return "winograd43" if 36 * -(-t4 // strip) < 16 * -(-t2 // strip) else "winograd"


def _winograd_when_it_pays(n, x, w, geometry):
    pt, pl, pb, pr = geometry["padding"]
    oh, ow = x.shape[2] + pt + pb - 2, x.shape[3] + pl + pr - 2
    layout = winograd_layout(x.shape[0], oh, ow)
    if layout is None:
        return None
    packs = n.winograd_packs  # two threads may both pack: the same values, one is kept
    if layout == "winograd43" and packs.get(layout) is REFUSED:
        layout = "winograd"  # F(2x2, 3x3)'s guard is looser (libcore packed_layouts.h)
    packed = packs.get(layout)
    if packed is None:
        if _core.plan_recording():  # (a plan records the calls, not a packing to keep)
            return None
        packed = ops.conv_pack(w, 1, layout)
        if layout == "winograd43" and w.shape[0] * w.shape[1] and \
                math.isnan(packed[0, 0, 0, 0].item()):
            packs[layout] = REFUSED
            return _winograd_when_it_pays(n, x, w, geometry)
        packs[layout] = packed
    return packed


def _packed_weight(conv, constants):
    """conv's constant weight packed for the CPU kernels (hl.ops.conv_pack): Winograd's
    transformed kernels for a 3x3 stride-1 convolution, the product's panels for a 1x1 one
    and for a 3x3 one with at most 7 input channels (the stem kernel's) and any other stride-2
    one larger than 1x1 (read by phases: ResNet's stem and strided 3x3 layers); None for the
    others: a weight that is no float32 constant, a depthwise convolution (it has a direct
    kernel), more than 2 spatial axes, other kernel sizes."""
    w = constants.get(conv.inputs[1])
    group = conv.attr("group", 1)
    if w is None or w.dtype.name != "float32" or w.ndim not in (3, 4) or \
            not isinstance(group, int) or group < 1 or w.shape[0] % group:
        return None
    if group > 1 and w.shape[1] == 1:
        return None
    strides, dilations = conv.attr("strides", None), conv.attr("dilations", None)
    if w.ndim == 4 and tuple(w.shape[2:]) == (3, 3) and group == 1 and w.shape[1] * 9 <= 64 \
            and all(s in (1, 2) for s in strides or [1]) and \
            all(d == 1 for d in dilations or [1]):
        # an RGB stem (3 -> 32 channels, stride 2): its own kernel on the panels
        # (libcore cpu/conv_stem.c), which builds the columns of 16 outputs at a time in L1
        return ops.conv_pack(w, group)
    if w.ndim == 4 and tuple(w.shape[2:]) == (3, 3) and group == 1 and \
            all(s == 1 for s in strides or [1]) and all(d == 1 for d in dilations or [1]):
        # the kernel takes Winograd where it fits (enough channels and positions) and the
        # unpacked paths elsewhere; packed at the first call that takes it
        return WINOGRAD_LATER
    if all(k == 1 for k in w.shape[2:]):
        return ops.conv_pack(w, group)
    if w.ndim == 4 and w.shape[2] * w.shape[3] > 1 and group == 1 and \
            list(strides or [1]) == [2, 2] and all(d == 1 for d in dilations or [1]):
        # a stride-2 convolution (ResNet's 7x7 stem, its strided 3x3 layers): the product
        # reads its columns from the input split into four phases, no im2col (libcore
        # cpu/conv_phases.c), on hl's thread pool, where OpenBLAS's work items each need a
        # core of their own at once (a busy core stalls them; docs/performance.md)
        return ops.conv_pack(w, group)
    return None


# How many input signatures a FusedConv node keeps the geometry of.
GEOMETRIES = 8
_UNKNOWN = object()


def _fused_geometry(n, x, w, b, r):
    """conv_fused's keyword arguments for these operands, or None where the kernel cannot
    take them (a dtype the core does not compute, more than 2 spatial axes, a residual that
    broadcasts). Raises the Conv's own errors for a bad input."""
    conv = n.fused_chain[0]
    group = conv.attr("group", 1)
    nd = _check_conv(conv, x, w, group)
    if x.dtype.name not in ("float32", "float64") or nd > 2 or \
            any(t is not None and t.dtype != x.dtype for t in (w, b, r)):
        return None
    strides, dil = strides_dilations(conv, nd)
    pads = pads_for(conv, x.shape[2:], w.shape[2:], strides, dil)
    if r is not None:
        spatial = [(size + p0 + p1 - d * (k - 1) - 1) // s + 1 for size, (p0, p1), k, s, d
                   in zip(x.shape[2:], pads, w.shape[2:], strides, dil)]
        if tuple(r.shape) != (x.shape[0], w.shape[0], *spatial):
            return None
    act, alpha, beta = n.epilogue
    padding = tuple(p[0] for p in pads) + tuple(p[1] for p in pads)  # ONNX order
    return dict(stride=strides, padding=padding, dilation=dil, groups=group, act=act,
                alpha=alpha, beta=beta)


def _run_chain(n, x, w, b, r):
    chain = n.fused_chain
    conv = chain[0]
    y = conv.handler(conv, x, w, *([b] if b is not None else []))
    for node in chain[1:]:
        xs = []
        for name in node.inputs:
            if name == "":
                xs.append(None)
            elif name in (conv.outputs[0], *(m.outputs[0] for m in chain[1:])):
                xs.append(y)
            elif name == n.inputs[3]:
                xs.append(r)
            else:  # a constant parameter (Clip's bounds), from the values of the run
                xs.append(n.scope[name])
        y = node.handler(node, *xs)
        if isinstance(y, (tuple, list)):
            y = y[0]
    return y
