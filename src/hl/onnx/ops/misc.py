"""Control flow (If, Loop, Scan); attention and the newest transformer ops (Attention,
FlexAttention, LinearAttention, RMSNormalization, RotaryEmbedding, SwiGLU, TensorScatter,
CausalConvWithState); random generators; Optional of a tensor; and the signal ops (window
functions, DFT, STFT).

A subgraph (If's branches, Loop's and Scan's body) arrives as a Graph in ``n.attrs``. It runs
with run_nodes over a scope that layers its inputs over its initializers over the enclosing
graph's values, so it reads outer names and gradients flow through it like any other op.
"""
import math
import weakref
from collections import ChainMap

import numpy as np

from ... import errors
from ...devices import get_default_device
from ..program import run_nodes
from . import onnx_op
from ._util import HALF as _HALF, F, axis_of, check_shape, const, np_dtype_of_onnx, via_float32


# ---- half precision on the CPU ------------------------------------------------------------------



# ---- running a subgraph ---------------------------------------------------------------------

def _device(n, tensors=()):
    for t in tensors:
        if t is not None and hasattr(t, "device"):
            return t.device
    return n.device or get_default_device()


class _Body:
    """A subgraph ready to run many times: its initializers made tensors once."""

    def __init__(self, n, graph, device):
        self.n, self.graph = n, graph
        self.consts = {name: const(a, device=device) for name, a in graph.initializers.items()}
        self.input_names = [v.name for v in graph.inputs]
        self.output_names = [v.name for v in graph.outputs]

    def run(self, inputs):
        """The body's outputs for ``inputs`` (a list in the body's input order)."""
        if len(inputs) != len(self.input_names):
            raise self.n.error(f"its body takes {len(self.input_names)} inputs "
                               f"({self.input_names}), the node gives {len(inputs)}",
                               errors.ONNXError)
        feeds = dict(zip(self.input_names, inputs))
        values = ChainMap(feeds, self.consts, self.n.scope)
        run_nodes(self.graph.nodes, values, self.n.training, folded=())
        return [values[name] for name in self.output_names]


def _bool(n, t, what):
    v = n.scalar(t)
    if not isinstance(v, (bool, int, np.bool_)):
        raise n.error(f"{what} must be a bool, got {t.dtype.name}", errors.DTypeError)
    return bool(v)


@onnx_op("If")
def if_(n, cond):
    branch = n.attr("then_branch") if _bool(n, cond, "the condition") else n.attr("else_branch")
    outs = _Body(n, branch, _device(n, [cond])).run([])
    if len(outs) != n.noutputs:
        raise n.error(f"the branch taken gives {len(outs)} outputs, the node has "
                      f"{n.noutputs}", errors.ONNXError)
    return tuple(outs)


@onnx_op("Loop")
def loop(n, trip_count, cond, *carried):
    """for i in range(M) while cond: carried, scans = body(i, cond, carried)."""
    if trip_count is None and cond is None:
        raise n.error("has neither a trip count nor a condition: it would never end",
                      errors.ONNXError)
    limit = None if trip_count is None else int(n.scalar(trip_count))
    going = True if cond is None else _bool(n, cond, "the condition")
    device = _device(n, [trip_count, cond, *carried])
    body = _Body(n, n.attr("body"), device)
    nc = len(carried)
    nscan = len(body.output_names) - 1 - nc
    if nscan < 0:
        raise n.error(f"its body gives {len(body.output_names)} outputs, fewer than the "
                      f"condition and {nc} loop-carried values", errors.ONNXError)
    carried = list(carried)
    scans = [[] for _ in range(nscan)]
    i = 0
    going_t = const(np.array(going), device=device)
    while going and (limit is None or i < limit):
        outs = body.run([const(np.array(i, dtype=np.int64), device=device), going_t, *carried])
        going_t = outs[0]
        if cond is not None:  # without an initial condition, the body's one is ignored
            going = _bool(n, going_t, "the body's condition output")
        carried = outs[1:1 + nc]
        for k, t in enumerate(outs[1 + nc:]):
            scans[k].append(t)
        i += 1
    return (*carried, *(_stack_scan(n, s, body.graph.outputs[1 + nc + k], device)
                        for k, s in enumerate(scans)))


def _stack_scan(n, parts, spec, device, axis=0):
    """The per-iteration values of a scan output stacked along ``axis``; with no iteration,
    an empty tensor shaped as the body declares (unknown dimensions 0)."""
    if parts:
        return F.stack(parts, axis)
    dims = [d if isinstance(d, int) else 0 for d in (spec.shape or ())]
    dtype = spec.dtype or "float32"
    return F.zeros(0, *dims, dtype=dtype, device=device)


@onnx_op("Scan", since=9)
def scan(n, *inputs):
    m = n.attr("num_scan_inputs")
    if m is None or not 0 < m <= len(inputs):
        raise n.error(f"num_scan_inputs {m} must be between 1 and its {len(inputs)} inputs",
                      errors.ONNXError)
    states, xs = list(inputs[:len(inputs) - m]), list(inputs[len(inputs) - m:])
    in_axes = n.attr("scan_input_axes", [0] * m)
    in_dirs = n.attr("scan_input_directions", [0] * m)
    body = _Body(n, n.attr("body"), _device(n, inputs))
    nscan = len(body.output_names) - len(states)
    out_axes = n.attr("scan_output_axes", [0] * nscan)
    out_dirs = n.attr("scan_output_directions", [0] * nscan)
    return _scan(n, body, states, xs, in_axes, in_dirs, out_axes, out_dirs)


def _scan(n, body, states, xs, in_axes, in_dirs, out_axes, out_dirs):
    nscan = len(body.output_names) - len(states)
    if nscan < 0:
        raise n.error(f"its body gives {len(body.output_names)} outputs, fewer than its "
                      f"{len(states)} state values", errors.ONNXError)
    axes = [axis_of(n, a, x.ndim, "scan_input_axes entry") for a, x in zip(in_axes, xs)]
    lengths = {x.shape[a] for x, a in zip(xs, axes)}
    if len(lengths) != 1:
        raise n.error(f"its scan inputs (shapes {[x.shape for x in xs]}) differ in length "
                      f"along their scan axes {axes}", errors.ShapeError)
    steps = lengths.pop()
    # Each scan input as a list of its slices, in the order the body sees them.
    slices = []
    for x, a, d in zip(xs, axes, in_dirs):
        parts = [F.getitem(x, (slice(None),) * a + (t,)) for t in range(steps)]
        slices.append(parts[::-1] if d else parts)
    scans = [[] for _ in range(nscan)]
    for t in range(steps):
        outs = body.run([*states, *(s[t] for s in slices)])
        states = outs[:len(states)]
        for k, y in enumerate(outs[len(states):]):
            scans[k].append(y)
    results = []
    for k, parts in enumerate(scans):
        if out_dirs[k] if k < len(out_dirs) else 0:
            parts = parts[::-1]
        spec = body.graph.outputs[len(states) + k]
        ndim = (parts[0].ndim if parts else len(spec.shape or ())) + 1
        axis = axis_of(n, out_axes[k] if k < len(out_axes) else 0, ndim,
                       "scan_output_axes entry")
        results.append(_stack_scan(n, parts, spec, _device(n, xs), axis))
    return (*states, *results)


@onnx_op("Scan", since=8)
def scan8(n, seq_lens, *inputs):
    """Opset 8's Scan: a leading batch axis on every input (scanned one entry at a time),
    the scan axis next, and per-entry sequence lengths (shorter outputs padded with 0)."""
    m = n.attr("num_scan_inputs")
    if m is None or not 0 < m <= len(inputs):
        raise n.error(f"num_scan_inputs {m} must be between 1 and its {len(inputs)} inputs",
                      errors.ONNXError)
    body = _Body(n, n.attr("body"), _device(n, inputs))
    ns = len(inputs) - m
    batch = inputs[0].shape[0]
    full = inputs[ns].shape[1] if inputs[ns].ndim > 1 else 0
    lens = n.ints(seq_lens, "sequence_lens") if seq_lens is not None else [full] * batch
    if len(lens) != batch or any(not 0 <= v <= full for v in lens):
        raise n.error(f"sequence_lens {lens} must give {batch} lengths in [0, {full}]",
                      errors.ValueError)
    dirs = n.attr("directions", [0] * m)
    per_entry = []
    for b in range(batch):
        states = [s[b] for s in inputs[:ns]]
        xs = [x[b, :lens[b]] for x in inputs[ns:]]
        outs = _scan(n, body, states, xs, [0] * m, dirs, [], [])
        outs = list(outs)
        for k in range(ns, len(outs)):  # pad short sequences' scan outputs to full length
            pad = full - outs[k].shape[0]
            if pad:
                outs[k] = F.pad(outs[k], [(0, pad)] + [(0, 0)] * (outs[k].ndim - 1))
        per_entry.append(outs)
    return tuple(F.stack([e[k] for e in per_entry], 0) for k in range(len(per_entry[0])))


# ---- attention and the newest transformer ops ------------------------------------------------

def _split_heads(n, t, heads, what):
    """[batch, seq, heads * size] -> [batch, heads, seq, size]."""
    if not heads or t.shape[2] % heads:
        raise n.error(f"{what} of shape {t.shape} does not split into {heads} heads "
                      f"(3-D inputs need q_num_heads and kv_num_heads)", errors.ShapeError)
    b, s, hidden = t.shape
    return F.permute(F.reshape(t, b, s, heads, hidden // heads), 0, 2, 1, 3)


def _repeat_heads(t, reps):
    """Each head of t ([batch, heads, seq, size]) repeated reps times in place:
    [h0, h0, h1, h1, ...], as grouped-query attention shares a key head."""
    if reps == 1:
        return t
    b, h, s, d = t.shape
    t = F.expand(F.reshape(t, b, h, 1, s, d), b, h, reps, s, d)
    return F.reshape(t, b, h * reps, s, d)


def _allowed(sq, skv, offset, causal, left, right, lens):
    """The positions the causal, sliding-window and key-padding rules leave visible, as a
    numpy bool array ([q, kv], or [batch, 1, q, kv] when they differ per batch entry), or
    None when no rule applies. A query at in-block index i sits at absolute position
    i + offset (the keys before its block: past keys, or a padded cache's valid length
    minus the query length)."""
    if not (causal or left >= 0 or right >= 0 or lens is not None):
        return None
    i = np.arange(sq)[:, None]
    j = np.arange(skv)[None, :]
    pos = i + (np.asarray(offset).reshape(-1, 1, 1, 1) if np.ndim(offset) else offset)
    ok = np.ones(np.broadcast(pos, j).shape, dtype=bool)
    if causal:
        ok &= j <= pos
    if left >= 0:
        ok &= pos - j <= left
    if right >= 0:
        ok &= j - pos <= right
    if lens is not None:
        ok &= j < np.asarray(lens).reshape(-1, 1, 1, 1)
    return ok


@onnx_op("Attention", since=23)
@via_float32
def attention(n, q, k, v, mask=None, past_k=None, past_v=None, nonpad=None):
    """softmax(Q K^T * scale + mask) V over heads, with grouped-query heads, a KV cache
    (past -> present), causal and sliding-window masks, softcap and the qk output modes."""
    if not (q.ndim == k.ndim == v.ndim and q.ndim in (3, 4)):
        raise n.error(f"Q, K and V must all be 3-D or all 4-D, got shapes {q.shape}, "
                      f"{k.shape} and {v.shape}", errors.ShapeError)
    if q.ndim == 3:
        q = _split_heads(n, q, n.attr("q_num_heads"), "Q")
        k = _split_heads(n, k, n.attr("kv_num_heads"), "K")
        v = _split_heads(n, v, n.attr("kv_num_heads"), "V")
        three_d = True
    else:
        three_d = False
    batch, hq, sq, dq = q.shape
    if k.shape[0] != batch or v.shape[:3] != k.shape[:3] or k.shape[3] != dq:
        raise n.error(f"Q [batch, heads, seq, size] {q.shape}, K {k.shape} and V {v.shape} "
                      f"disagree (K and V share batch, heads and length; Q and K the head "
                      f"size)", errors.ShapeError)
    if (past_k is None) != (past_v is None):
        raise n.error("past_key and past_value come together", errors.ONNXError)
    if past_k is not None:
        if nonpad is not None:
            raise n.error("nonpad_kv_seqlen cannot be combined with past_key/past_value",
                          errors.ONNXError)
        if past_k.shape[:2] != k.shape[:2] or past_k.shape[3] != dq or \
                past_v.shape[:3] != past_k.shape[:3] or past_v.shape[3] != v.shape[3]:
            raise n.error(f"past_key {past_k.shape} and past_value {past_v.shape} do not fit "
                          f"K {k.shape} and V {v.shape}", errors.ShapeError)
        k = F.concat([past_k, k], 2)
        v = F.concat([past_v, v], 2)
    present_k, present_v = k, v
    hkv, skv = k.shape[1], k.shape[2]
    if hq % hkv:
        raise n.error(f"{hq} query heads cannot share {hkv} key/value heads",
                      errors.ShapeError)

    # The additive bias: the caller's mask (bool: False hides) and the rule-made masks.
    bias = None
    if mask is not None:
        if mask.shape[-1] > skv or mask.ndim > 4:
            raise n.error(f"attn_mask of shape {mask.shape} does not fit {skv} keys",
                          errors.ShapeError)
        if mask.dtype.name == "bool":
            bias = F.where(mask, 0.0, float("-inf"))
        else:
            bias = mask
        bias = F.cast(bias, q.dtype.name) if bias.dtype != q.dtype else bias
        if mask.shape[-1] < skv:  # keys past the mask's end are hidden
            bias = F.pad(bias, [(0, 0)] * (bias.ndim - 1) + [(0, skv - mask.shape[-1])],
                         value=float("-inf"))
    lens = None
    offset = 0 if past_k is None else past_k.shape[2]
    if nonpad is not None:
        lens = np.asarray(n.ints(nonpad, "nonpad_kv_seqlen"))
        if lens.shape != (batch,):
            raise n.error(f"nonpad_kv_seqlen must have shape ({batch},), got {lens.shape}",
                          errors.ShapeError)
        offset = lens - sq
    ok = _allowed(sq, skv, offset, bool(n.attr("is_causal", 0)),
                  n.attr("left_window_size", -1), n.attr("right_window_size", -1), lens)
    if ok is not None:
        rule = const(np.where(ok, 0.0, -np.inf).astype(q.dtype.np), like=q)
        bias = rule if bias is None else bias + rule

    scale = n.attr("scale")
    scale = 1.0 / math.sqrt(dq) if scale is None else float(scale)
    # Q and K each take the square root of the scale, as ONNX's function body does: the
    # same rounding in low precision, and less risk of overflow in Q K^T.
    root = math.sqrt(scale)
    reps = hq // hkv
    qk = F.matmul(q * root, F.transpose(_repeat_heads(k, reps) * root, 0, 1, 3, 2))
    softcap = float(n.attr("softcap", 0.0))
    if softcap > 0:  # before the mask, so hidden positions stay -inf
        qk = F.tanh(qk * (1.0 / softcap)) * softcap
    mode = n.attr("qk_matmul_output_mode", 0)
    if mode not in (0, 1, 2, 3):
        raise n.error(f"qk_matmul_output_mode must be 0..3, got {mode}", errors.ValueError)
    logits = qk if bias is None else qk + bias
    qk_out = logits if mode == 2 else qk
    precision = n.attr("softmax_precision")
    if precision is not None:
        logits = F.cast(logits, np_dtype_of_onnx(n, precision))
    if bias is not None:
        # A query that sees no key at all gets zero weights (and output), not NaN: its row
        # of logits is replaced by zeros before the softmax and its weights zeroed after.
        hidden = F.eq(F.max(bias, axis=-1, keepdims=True), float("-inf"))
        hidden = F.broadcast_to(hidden, *logits.shape[:-1], 1)
        p = F.softmax(F.where(hidden, 0.0, logits), -1)
        p = F.where(hidden, 0.0, p)
    else:
        p = F.softmax(logits, -1)
    p = F.cast(p, q.dtype.name) if p.dtype != q.dtype else p
    if mode == 3:
        qk_out = p
    y = F.matmul(p, _repeat_heads(v, reps))
    if three_d:
        y = F.permute(y, 0, 2, 1, 3)
        y = F.reshape(y, batch, sq, -1)
    return y, present_k, present_v, qk_out


@onnx_op("RMSNormalization", since=23)
@via_float32
def rms_normalization(n, x, scale):
    """x / sqrt(mean(x^2 over the axes from ``axis`` on) + epsilon) * scale."""
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    if not x.dtype.is_floating:
        raise n.error(f"X must be a float tensor, got {x.dtype.name}", errors.DTypeError)
    axes = tuple(range(axis, x.ndim))
    # stash_type 1 (the default): the statistics in float32 even for half-precision input.
    wide = n.attr("stash_type", 1) == 1 and x.dtype.name in _HALF
    xs = F.cast(x, "float32") if wide else x
    y = xs * F.rsqrt(F.mean(xs * xs, axis=axes, keepdims=True) + float(n.attr("epsilon", 1e-5)))
    y = F.cast(y, x.dtype.name) if wide else y
    try:
        return y * scale
    except errors.ShapeError:
        raise n.error(f"scale of shape {scale.shape} does not broadcast to the normalized "
                      f"shape {x.shape[axis:]}", errors.ShapeError) from None


@onnx_op("RotaryEmbedding", since=23)
@via_float32
def rotary_embedding(n, x, cos, sin, position_ids=None):
    """Rotates pairs of each head's first rotary_embedding_dim features by the angles of
    the cos/sin caches (the halves of those features, or interleaved neighbours)."""
    shape = x.shape
    if x.ndim == 4:  # [batch, heads, seq, size] -> [batch, seq, heads, size]
        x = F.permute(x, 0, 2, 1, 3)
    elif x.ndim == 3:
        heads = n.attr("num_heads")
        if not heads or shape[2] % heads:
            raise n.error(f"a 3-D input {shape} needs num_heads dividing its last dimension, "
                          f"got num_heads={heads}", errors.ShapeError)
        x = F.reshape(x, shape[0], shape[1], heads, shape[2] // heads)
    else:
        raise n.error(f"input must be 3-D or 4-D, got shape {shape}", errors.ShapeError)
    size = x.shape[3]
    rot = n.attr("rotary_embedding_dim", 0) or size
    if rot % 2 or rot > size:
        raise n.error(f"rotary_embedding_dim {rot} must be even and at most the head size "
                      f"{size}", errors.ShapeError)
    if position_ids is not None:
        cos, sin = F.gather(cos, position_ids, 0), F.gather(sin, position_ids, 0)
    if cos.shape[-1] != rot // 2 or sin.shape != cos.shape:
        raise n.error(f"cos/sin caches {cos.shape} and {sin.shape} must end in "
                      f"rotary_embedding_dim / 2 = {rot // 2}", errors.ShapeError)
    cos, sin = F.unsqueeze(cos, -2), F.unsqueeze(sin, -2)  # one angle for every head
    x_rot, x_pass = x[..., :rot], x[..., rot:]
    interleaved = bool(n.attr("interleaved", 0))
    if interleaved:
        x1, x2 = x_rot[..., 0::2], x_rot[..., 1::2]
    else:
        x1, x2 = x_rot[..., :rot // 2], x_rot[..., rot // 2:]
    real = cos * x1 - sin * x2
    imag = sin * x1 + cos * x2
    if interleaved:
        rotated = F.reshape(F.stack([real, imag], -1), *x_rot.shape)
    else:
        rotated = F.concat([real, imag], -1)
    y = F.concat([rotated, x_pass], -1) if rot < size else rotated
    if len(shape) == 4:
        return F.permute(y, 0, 2, 1, 3)
    return F.reshape(y, *shape)


@onnx_op("SwiGLU", since=28)
@via_float32
def swiglu(n, a, b):
    """a * sigmoid(alpha * a) * b, for a and b of one shape."""
    if a.shape != b.shape:
        raise n.error(f"A {a.shape} and B {b.shape} must have the same shape",
                      errors.ShapeError)
    alpha = float(n.attr("alpha", 1.0))
    return a * F.sigmoid(a * alpha if alpha != 1.0 else a) * b


@onnx_op("FlexAttention", domain="ai.onnx.preview")
@via_float32
def flex_attention(n, q, k, v):
    """Attention over 4-D heads whose scores and probabilities pass through the model's own
    subgraphs (score_mod before the softmax, prob_mod after it)."""
    if not (q.ndim == k.ndim == v.ndim == 4) or k.shape[:3] != v.shape[:3] or \
            k.shape[3] != q.shape[3] or k.shape[0] != q.shape[0] or q.shape[1] % k.shape[1]:
        raise n.error(f"Q {q.shape}, K {k.shape} and V {v.shape} must be 4-D [batch, heads, "
                      f"seq, size] that fit together", errors.ShapeError)
    scale = n.attr("scale")
    root = math.sqrt(1.0 / math.sqrt(q.shape[3]) if scale is None else float(scale))
    reps = q.shape[1] // k.shape[1]
    scores = F.matmul(q * root, F.transpose(_repeat_heads(k, reps) * root, 0, 1, 3, 2))
    precision = n.attr("softmax_precision")
    if precision is not None:
        scores = F.cast(scores, np_dtype_of_onnx(n, precision))
    device = _device(n, [q])
    for name in ("score_mod", "prob_mod"):
        if name == "prob_mod":
            scores = F.softmax(scores, -1)
        if n.attr(name) is not None:
            outs = _Body(n, n.attr(name), device).run([scores])
            if len(outs) != 1 or tuple(outs[0].shape) != tuple(scores.shape):
                raise n.error(f"{name} must give one tensor of the scores' shape "
                              f"{scores.shape}", errors.ShapeError)
            scores = outs[0]
    vv = _repeat_heads(v, reps)
    y = F.matmul(F.cast(scores, vv.dtype.name) if scores.dtype != vv.dtype else scores, vv)
    return y


@onnx_op("TensorScatter", since=24)
def tensor_scatter(n, past, update, write_indices=None):
    """A KV-cache write: past with update's steps written along ``axis`` from each batch
    entry's write index on (wrapping around in circular mode)."""
    axis = axis_of(n, n.attr("axis", -2), past.ndim)
    mode = n.attr("mode", "linear")
    if axis == 0 or mode not in ("linear", "circular"):
        raise n.error(f"axis must not be the batch axis and mode linear or circular, got axis "
                      f"{axis} and mode {mode!r}", errors.ValueError)
    if update.ndim != past.ndim or any(u != p for i, (u, p) in
                                       enumerate(zip(update.shape, past.shape)) if i != axis) \
            or update.shape[axis] > past.shape[axis]:
        raise n.error(f"update {update.shape} does not fit the cache {past.shape} along axis "
                      f"{axis}", errors.ShapeError)
    batch, size, steps = past.shape[0], past.shape[axis], update.shape[axis]
    starts = n.ints(write_indices, "write_indices") if write_indices is not None \
        else [0] * batch
    if len(starts) != batch:
        raise n.error(f"write_indices must have {batch} entries, got {len(starts)}",
                      errors.ShapeError)
    # source[b, j]: the update step written at cache position j of entry b, -1 for none.
    source = np.full((batch, size), -1, dtype=np.int64)
    for b, start in enumerate(starts):
        pos = start + np.arange(steps)
        if mode == "circular":
            pos %= size
        elif steps and (start < 0 or pos[-1] >= size):
            raise n.error(f"writing {steps} steps from index {start} overruns the cache of "
                          f"{size} (mode linear)", errors.IndexError)
        source[b, pos] = np.arange(steps)
    if steps == 0:
        return past
    view = [batch] + [1] * (past.ndim - 1)
    view[axis] = size
    source = np.broadcast_to(source.reshape(view), past.shape)
    picked = F.gather_elements(update, const(np.maximum(source, 0), like=past), axis)
    return F.where(const(source >= 0, like=past), picked, past)


@onnx_op("CausalConvWithState", since=27)
@via_float32
def causal_conv_with_state(n, x, w, b=None, past=None):
    """A depthwise causal 1-D convolution that carries its last k - 1 inputs as state."""
    if x.ndim != 3 or w.ndim != 3 or w.shape[:2] != (x.shape[1], 1):
        raise n.error(f"input [batch, channels, length] {x.shape} needs a weight [channels, "
                      f"1, k], got {w.shape}", errors.ShapeError)
    batch, channels, _ = x.shape
    k = w.shape[2]
    if past is None:
        past = F.zeros(batch, channels, k - 1, dtype=x.dtype.name, device=x.device)
    elif tuple(past.shape) != (batch, channels, k - 1):
        raise n.error(f"past_state must have shape {(batch, channels, k - 1)}, got "
                      f"{past.shape}", errors.ShapeError)
    padded = F.concat([past, x], 2) if k > 1 else x
    y = F.conv1d(padded, w, b, groups=channels)
    act = n.attr("activation", "none")
    if act in ("silu", "swish"):
        y = y * F.sigmoid(y)
    elif act != "none":
        raise n.error(f"activation must be none, silu or swish, got {act!r}", errors.ValueError)
    return y, padded[:, :, padded.shape[2] - (k - 1):]


@onnx_op("LinearAttention", since=27)
@via_float32
def linear_attention(n, q, k, v, past=None, decay=None, beta=None):
    """Attention with a [key size, value size] state per head instead of a softmax over
    keys: each step decays the state (gated), corrects it towards the value (delta), adds
    k v^T, and reads it with q."""
    rule = n.attr("update_rule", "gated_delta")
    if rule not in ("linear", "gated", "delta", "gated_delta"):
        raise n.error(f"update_rule {rule!r} is not linear, gated, delta or gated_delta",
                      errors.ValueError)
    gated, delta = rule in ("gated", "gated_delta"), rule in ("delta", "gated_delta")
    if gated != (decay is not None) or delta != (beta is not None):
        raise n.error(f"update_rule {rule} takes {'a' if gated else 'no'} decay input and "
                      f"{'a' if delta else 'no'} beta input", errors.ONNXError)
    hq, hkv = n.attr("q_num_heads"), n.attr("kv_num_heads")
    if not (q.ndim == k.ndim == v.ndim == 3):
        raise n.error(f"query, key and value must be 3-D [batch, seq, heads * size], got "
                      f"{q.shape}, {k.shape} and {v.shape}", errors.ShapeError)
    if not hq or not hkv or hq % hkv:
        raise n.error(f"q_num_heads {hq} must be a multiple of kv_num_heads {hkv}",
                      errors.ShapeError)
    q, k, v = _split_heads(n, q, hq, "query"), _split_heads(n, k, hkv, "key"), \
        _split_heads(n, v, hkv, "value")
    batch, _, steps, dk = q.shape
    dv = v.shape[3]
    if k.shape[:3] != (batch, hkv, steps) or k.shape[3] != dk or v.shape[2] != steps:
        raise n.error(f"key {k.shape} and value {v.shape} (as [batch, heads, seq, size]) do "
                      f"not fit query {q.shape}", errors.ShapeError)
    if decay is not None:  # per head, or per head and key feature
        if decay.ndim != 3 or decay.shape[2] not in (hkv, hkv * dk):
            raise n.error(f"decay {decay.shape} must end in kv_num_heads or kv_num_heads * "
                          f"key size", errors.ShapeError)
        decay = F.exp(_split_heads(n, decay, hkv, "decay"))        # [b, hkv, seq, 1 or dk]
    if beta is not None:
        if beta.ndim != 3 or beta.shape[2] not in (hkv, 1):
            raise n.error(f"beta {beta.shape} must end in kv_num_heads or 1",
                          errors.ShapeError)
        beta = _split_heads(n, beta, beta.shape[2], "beta")          # [b, hkv or 1, seq, 1]
    if past is None:
        state = F.zeros(batch, hkv, dk, dv, dtype=q.dtype.name, device=q.device)
    elif tuple(past.shape) != (batch, hkv, dk, dv):
        raise n.error(f"past_state must have shape {(batch, hkv, dk, dv)}, got {past.shape}",
                      errors.ShapeError)
    else:
        state = past
    scale = n.attr("scale", 0.0) or 1.0 / math.sqrt(dk)
    ys = []
    for t in range(steps):
        kt, vt = k[:, :, t], v[:, :, t]                               # [b, hkv, dk or dv]
        if decay is not None:
            state = state * F.unsqueeze(decay[:, :, t], -1)
        if beta is not None:  # move the value read at k_t towards v_t
            seen = F.squeeze(F.matmul(F.unsqueeze(kt, 2), state), 2)
            vt = beta[:, :, t] * (vt - seen)
        state = state + F.unsqueeze(kt, -1) * F.unsqueeze(vt, 2)
        read = F.matmul(F.unsqueeze(q[:, :, t], 2), _repeat_heads(state, hq // hkv))
        ys.append(F.squeeze(read, 2) * scale)                        # [b, hq, dv]
    y = F.reshape(F.stack(ys, 1), batch, steps, hq * dv)
    return y, state


# ---- random generators -----------------------------------------------------------------------
# Without a seed attribute they draw from hl's default generator (hl.random.manual_seed sets
# it); a node with a seed owns a generator of its own, seeded once, so a run of the model
# repeats the draws of the run before it only if the model is prepared anew.

_GENERATORS = weakref.WeakKeyDictionary()  # node -> its seeded generator


def _generator(n):
    if not n.has("seed"):
        return None
    if n not in _GENERATORS:
        from ...ops.random import Generator
        # The float seed's bits, so that seeds 1.0 and 1.5 differ.
        _GENERATORS[n] = Generator(int(np.float64(n.attr("seed")).view(np.int64)))
    return _GENERATORS[n]


def _float_dtype(n, elem_type, default):
    """The output dtype: the dtype attribute's float type, or ``default``."""
    name = default if elem_type is None else np_dtype_of_onnx(n, elem_type)
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise n.error(f"draws floats; dtype {name} is not a float type", errors.DTypeError)
    return name


def _draw(n, kind, shape, dtype, device, a, b):
    """``shape`` values from normal(mean=a, std=b) or uniform[a, b), in ``dtype``; hl's
    generators draw float32 and float64, so half types are drawn in float32 and cast."""
    shape = check_shape(n, shape)
    wide = dtype if dtype in ("float32", "float64") else "float32"
    if kind == "normal":
        if b < 0:
            raise n.error(f"scale must be >= 0, got {b}", errors.ValueError)
        t = F.normal(*shape, mean=a, std=b, dtype=wide, device=device,
                     generator=_generator(n))
    else:
        if not a <= b:
            raise n.error(f"low {a} must not exceed high {b}", errors.ValueError)
        t = F.uniform(*shape, low=a, high=b, dtype=wide, device=device,
                      generator=_generator(n))
    return t if wide == dtype else F.cast(t, dtype)


@onnx_op("RandomNormal")
def random_normal(n):
    return _draw(n, "normal", n.attr("shape", []), _float_dtype(n, n.attr("dtype"), "float32"),
                 _device(n), float(n.attr("mean", 0.0)), float(n.attr("scale", 1.0)))


@onnx_op("RandomUniform")
def random_uniform(n):
    return _draw(n, "uniform", n.attr("shape", []),
                 _float_dtype(n, n.attr("dtype"), "float32"), _device(n),
                 float(n.attr("low", 0.0)), float(n.attr("high", 1.0)))


@onnx_op("RandomNormalLike")
def random_normal_like(n, x):
    dtype = _float_dtype(n, n.attr("dtype"), x.dtype.name)
    return _draw(n, "normal", x.shape, dtype, x.device, float(n.attr("mean", 0.0)),
                 float(n.attr("scale", 1.0)))


@onnx_op("RandomUniformLike")
def random_uniform_like(n, x):
    dtype = _float_dtype(n, n.attr("dtype"), x.dtype.name)
    return _draw(n, "uniform", x.shape, dtype, x.device, float(n.attr("low", 0.0)),
                 float(n.attr("high", 1.0)))


@onnx_op("Bernoulli")
def bernoulli(n, p):
    """1 where a uniform draw falls below the element's probability, else 0."""
    if not p.dtype.is_floating:
        raise n.error(f"takes float probabilities, got {p.dtype.name}", errors.DTypeError)
    dtype = p.dtype.name if n.attr("dtype") is None else np_dtype_of_onnx(n, n.attr("dtype"))
    u = _draw(n, "uniform", p.shape, "float32", p.device, 0.0, 1.0)
    hit = F.lt(u, F.cast(p, "float32") if p.dtype.name != "float32" else p)
    return F.cast(hit, dtype)


@onnx_op("Multinomial")
def multinomial(n, logits):
    """sample_size class indices per row of unnormalized log-probabilities, [batch,
    classes], by inverse transform sampling: the index is the count of cumulative
    probabilities at or below a uniform draw."""
    if logits.ndim != 2 or not logits.dtype.is_floating:
        raise n.error(f"takes float log-probabilities [batch, classes], got "
                      f"{logits.dtype.name} {logits.shape}", errors.ShapeError)
    dtype = np_dtype_of_onnx(n, n.attr("dtype", 6))
    if dtype not in ("int32", "int64"):
        raise n.error(f"dtype must be int32 or int64, got {dtype}", errors.DTypeError)
    batch, classes = logits.shape
    samples = int(n.attr("sample_size", 1))
    x = F.cast(logits, "float64") if logits.dtype.name != "float64" else logits
    cdf = F.cumsum(F.softmax(x, -1), axis=-1)                       # [batch, classes]
    u = _draw(n, "uniform", (batch, samples, 1), "float64", logits.device, 0.0, 1.0)
    below = F.le(F.unsqueeze(cdf, 1), u)                            # [batch, samples, classes]
    idx = F.sum(F.cast(below, "int64"), axis=-1)
    return F.cast(F.minimum(idx, classes - 1), dtype)  # rounding can leave cdf[-1] < u


# ---- Optional (of a tensor) ------------------------------------------------------------------

@onnx_op("OptionalHasElement")
def optional_has_element(n, x=None):
    return const(np.array(x is not None), device=_device(n, [x]))


@onnx_op("OptionalGetElement")
def optional_get_element(n, x):
    if x is None:
        raise n.error("the optional input is empty", errors.ValueError)
    return x


@onnx_op("Optional")
def optional(n, x=None):
    if x is None:
        raise n.error("an empty Optional is not supported by hl (only optional tensors that "
                      "hold a value)", errors.UnsupportedError)
    return x


# ---- signal processing: window functions, DFT, STFT -----------------------------------------

def _window(n, size, formula):
    """A window of ``size`` (a scalar input) values, formula(k, N) for k = 0..size-1, where
    N is size (periodic, the default) or size - 1 (symmetric)."""
    length = n.scalar(size)
    if not isinstance(length, (int, np.integer)) or length < 0:
        raise n.error(f"size must be a non-negative integer, got {length!r}",
                      errors.ValueError)
    check_shape(n, [length])
    k = np.arange(length, dtype=np.float64)
    denom = length if n.attr("periodic", 1) else length - 1
    dtype = np_dtype_of_onnx(n, n.attr("output_datatype", 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = formula(k, denom) if denom else np.ones(length)
    return F.cast(const(w, like=size), dtype)


@onnx_op("HannWindow")
def hann_window(n, size):
    return _window(n, size, lambda k, N: np.sin(np.pi * k / N) ** 2)


@onnx_op("HammingWindow")
def hamming_window(n, size):
    alpha = 25.0 / 46.0
    return _window(n, size, lambda k, N: alpha - (1 - alpha) * np.cos(2 * np.pi * k / N))


@onnx_op("BlackmanWindow")
def blackman_window(n, size):
    return _window(n, size, lambda k, N: 0.42 - 0.5 * np.cos(2 * np.pi * k / N)
                   + 0.08 * np.cos(4 * np.pi * k / N))


def _dft_last(re, im, length, inverse, onesided):
    """The DFT of re + i*im along their last axis as (re, im), by matmul with cos/sin
    matrices built on the host (O(n^2), fine for the lengths ONNX models use; the
    gradient flows like any matmul). ``length`` pads with zeros or truncates first.
    inverse: the normalized inverse; with onesided, the real inverse of a one-sided
    spectrum (numpy's irfft: re only, im None)."""
    def fit(t, size):
        if t is None:
            return None
        have = t.shape[-1]
        if have > size:
            return t[..., :size]
        if have < size:
            return F.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, size - have)])
        return t
    like = re
    if inverse and onesided:
        bins = length // 2 + 1
        re, im = fit(re, bins), fit(im, bins)
        k = np.arange(bins)[:, None]
        t = np.arange(length)[None, :]
        # Hermitian symmetry: each bin but 0 (and length/2 when even) stands for two.
        weight = np.where((k == 0) | (2 * k == length), 1.0, 2.0) / length
        c = const((np.cos(2 * np.pi * k * t / length) * weight).astype(like.dtype.np), like=like)
        s = const((np.sin(2 * np.pi * k * t / length) * weight).astype(like.dtype.np), like=like)
        out = F.matmul(re, c)
        return (out - F.matmul(im, s) if im is not None else out), None
    re, im = fit(re, length), fit(im, length)
    bins = length // 2 + 1 if onesided else length
    t = np.arange(length)[:, None]
    k = np.arange(bins)[None, :]
    scale = 1.0 / length if inverse else 1.0
    c = const((np.cos(2 * np.pi * t * k / length) * scale).astype(like.dtype.np), like=like)
    s = const((np.sin(2 * np.pi * t * k / length) * scale).astype(like.dtype.np), like=like)
    sign = 1.0 if inverse else -1.0  # e^{-i..} forward, e^{+i..} inverse
    out_re = F.matmul(re, c)
    out_im = F.matmul(re, s) * sign
    if im is not None:
        out_re = out_re - F.matmul(im, s) * sign
        out_im = out_im + F.matmul(im, c)
    return out_re, out_im


def _dft(n, x, length, axis):
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise n.error(f"the signal must end in a dimension of 1 (real) or 2 (complex), got "
                      f"shape {x.shape}", errors.ShapeError)
    if not x.dtype.is_floating:
        raise n.error(f"the signal must be float, got {x.dtype.name}", errors.DTypeError)
    axis = axis_of(n, axis, x.ndim)
    if axis == x.ndim - 1:
        raise n.error("axis cannot be the last (real/imaginary) dimension",
                      errors.IndexError)
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    if length < 1:
        raise n.error(f"dft_length must be positive, got {length}", errors.ValueError)
    # Move the transformed axis last, then back.
    perm = [d for d in range(x.ndim - 1) if d != axis] + [axis]
    back = list(np.argsort(perm))
    re = F.permute(x[..., 0], *perm)
    im = F.permute(x[..., 1], *perm) if x.shape[-1] == 2 else None
    re, im = _dft_last(re, im, length, inverse, onesided)
    parts = [re] if im is None else [re, im]
    return F.stack([F.permute(p, *back) for p in parts], -1)


@onnx_op("DFT", since=20)
@via_float32
def dft(n, x, dft_length=None, axis=None):
    length = n.scalar(dft_length)
    return _dft(n, x, None if length is None else int(length), int(n.scalar(axis, -2)))


@onnx_op("DFT", since=17)
@via_float32
def dft17(n, x, dft_length=None):
    length = n.scalar(dft_length)
    return _dft(n, x, None if length is None else int(length), n.attr("axis", 1))


@onnx_op("STFT", since=17)
@via_float32
def stft(n, x, frame_step, window=None, frame_length=None):
    """Frames of the signal [batch, length, 1 or 2], each weighted by the window, through
    the DFT: [batch, frames, bins, 2]."""
    if x.ndim != 3 or x.shape[-1] not in (1, 2):
        raise n.error(f"the signal must be [batch, length, 1 or 2], got shape {x.shape}",
                      errors.ShapeError)
    step = int(n.scalar(frame_step))
    length = n.scalar(frame_length)
    if length is None:
        length = window.shape[0] if window is not None else x.shape[1]
    length = int(length)
    if window is not None and tuple(window.shape) != (length,):
        raise n.error(f"window of shape {window.shape} must have frame_length {length} "
                      f"values", errors.ShapeError)
    if step < 1 or not 0 < length <= x.shape[1]:
        raise n.error(f"frame_step {step} must be positive and frame_length {length} in "
                      f"[1, {x.shape[1]}]", errors.ValueError)
    frames = 1 + (x.shape[1] - length) // step
    idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    framed = F.gather(x, const(idx.astype(np.int64), like=x), 1)
    if window is not None:  # [batch, frames, length, 1 or 2] times [length, 1]
        framed = framed * F.reshape(F.cast(window, x.dtype.name), length, 1)
    re = framed[..., 0]
    im = framed[..., 1] if x.shape[-1] == 2 else None
    re, im = _dft_last(re, im, length, False, bool(n.attr("onesided", 1)))
    return F.stack([re, im], -1)
