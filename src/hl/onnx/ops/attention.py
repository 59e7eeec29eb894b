"""Attention and the newest transformer ops (Attention, RMSNormalization, RotaryEmbedding,
SwiGLU, TensorScatter, CausalConvWithState, LinearAttention). FlexAttention, whose modifiers
are subgraphs, is in hl/onnx/control.py.
"""

import math

import numpy as np

from ... import errors
from ..registry import onnx_op
from ._util import axis_of, const, F, HALF, np_dtype_of_onnx, via_float32


# ---- attention and the newest transformer ops ------------------------------------------------

def _split_heads(n, t, heads, what):
    """[batch, seq, heads * size] -> [batch, heads, seq, size]."""
    if not heads or t.shape[2] % heads:
        raise n.error(f"{what} of shape {t.shape} does not split into {heads} heads "
                      f"(3-D inputs need q_num_heads and kv_num_heads)", errors.ShapeError)
    b, s, hidden = t.shape
    return F.permute(F.reshape(t, b, s, heads, hidden // heads), 0, 2, 1, 3)


def repeat_heads(t, reps):
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
    qk = F.matmul(q * root, F.transpose(repeat_heads(k, reps) * root, 0, 1, 3, 2))
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
    y = F.matmul(p, repeat_heads(v, reps))
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
    wide = n.attr("stash_type", 1) == 1 and x.dtype.name in HALF
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
        read = F.matmul(F.unsqueeze(q[:, :, t], 2), repeat_heads(state, hq // hkv))
        ys.append(F.squeeze(read, 2) * scale)                        # [b, hq, dv]
    y = F.reshape(F.stack(ys, 1), batch, steps, hq * dv)
    return y, state
