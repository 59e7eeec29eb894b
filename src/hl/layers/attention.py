"""MultiHeadAttention with torch.nn.MultiheadAttention's semantics and parameter layout.

Parameters, in PyTorch's (out, in) layout, under hl's W/b names:

    W_in   (3 * E, E)    torch's in_proj_weight (q, k and v stacked), when kdim == vdim == E
    W_q    (E, E), W_k (E, kdim), W_v (E, vdim)   torch's q/k/v_proj_weight, otherwise
    b_in   (3 * E,)      in_proj_bias                              (when bias=True)
    W_out  (E, E), b_out (E,)   out_proj.weight and out_proj.bias

kdim and vdim default to the key's and value's feature sizes, learnt on the first call.
Inputs are (L, N, E) (sequence first) unless ``batch_first=True`` (N, L, E), as in PyTorch;
2-D inputs are one unbatched sequence.
"""
import math

from .. import dtypes as _dt
from .. import errors
from ..autograd import functional as F
from . import _checks
from .layer import Layer


class MultiHeadAttention(Layer):
    """``mha(query, key, value, key_padding_mask=None, need_weights=True, attn_mask=None,
    average_attn_weights=True)`` -> (output, weights or None).

    attn_mask: (L, S) or (N * num_heads, L, S); key_padding_mask: (N, S). Boolean masks mark
    the positions NOT attended to (True = masked); float masks are added to the scores.
    Weights are (N, L, S) averaged over heads, or (N, num_heads, L, S) with
    average_attn_weights=False; in training, dropout applies to them (and they are returned
    after it, as PyTorch does). ``key`` and ``value`` default to ``query`` (self-attention).
    """

    def __init__(self, embed_dim, num_heads, dropout=0.0, bias=True, batch_first=False,
                 kdim=None, vdim=None, name=None):
        super().__init__(name)
        embed_dim = _checks.count(embed_dim, "embed_dim", "MultiHeadAttention")
        num_heads = _checks.count(num_heads, "num_heads", "MultiHeadAttention")
        if embed_dim % num_heads:
            raise errors.ValueError(f"MultiHeadAttention: embed_dim ({embed_dim}) must be a "
                                    f"positive multiple of num_heads ({num_heads})")
        _checks.number(dropout, "dropout", "MultiHeadAttention", 0.0, 1.0, high_open=True)
        self.embed_dim, self.num_heads = embed_dim, num_heads
        self.head_dim = embed_dim // num_heads
        self.dropout = float(dropout)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.kdim, self.vdim = kdim, vdim

    # ---- parameters ---------------------------------------------------------------------

    def initialize(self, query, key=None, value=None, *rest):
        key = query if key is None else key
        value = key if value is None else value
        for what, t, want in (("key", key, self.kdim), ("value", value, self.vdim)):
            if want is not None and t.shape[-1] != want:
                raise errors.ShapeError(
                    f"{self.describe()}: expected {what} with {want} features in the last "
                    f"axis, received shape {tuple(t.shape)}")
        self.kdim, self.vdim = key.shape[-1], value.shape[-1]
        e, dt, dev = self.embed_dim, query.dtype, query.device
        # PyTorch's initialisation: Xavier-uniform projections, zero biases, and the
        # output projection as nn.Linear's U(-1/sqrt(E), 1/sqrt(E)).
        if self.packed:
            self.add_param("W_in", (3 * e, e), "glorot_uniform", dt, dev)
        else:
            self.add_param("W_q", (e, e), "glorot_uniform", dt, dev)
            self.add_param("W_k", (e, self.kdim), "glorot_uniform", dt, dev)
            self.add_param("W_v", (e, self.vdim), "glorot_uniform", dt, dev)
        if self.bias:
            self.add_param("b_in", (3 * e,), "zeros", dt, dev)
        self.add_param("W_out", (e, e), "torch_default", dt, dev)
        if self.bias:
            self.add_param("b_out", (e,), "zeros", dt, dev)

    @property
    def packed(self):
        """Whether q, k and v share one (3E, E) weight (kdim == vdim == embed_dim)."""
        return self.kdim == self.embed_dim and self.vdim == self.embed_dim

    # ---- running ------------------------------------------------------------------------

    def forward(self, query, key=None, value=None, key_padding_mask=None, need_weights=True,
                attn_mask=None, average_attn_weights=True):
        key = query if key is None else key
        value = key if value is None else value
        batched = self._check(query, key, value)
        self_attention = query is key and key is value
        if not batched:  # one sequence: a batch of one, sequence first
            query, key, value = (F.reshape(t, t.shape[0], 1, t.shape[1])
                                 for t in (query, key, value))
        seq_first = not batched or not self.batch_first
        if seq_first:
            (L, N, _), S = query.shape, key.shape[0]
        else:
            (N, L, _), S = query.shape, key.shape[1]
        e, hd = self.embed_dim, self.head_dim

        # each (rows, E), rows in the input's order
        q, k, v = self._project(query, key, value, self_attention)
        q = q * (1.0 / math.sqrt(hd))
        q = self._heads(q, L, N, seq_first)                  # (N, H, L, hd)
        k = self._heads(k, S, N, seq_first, keys_last=True)  # (N, H, hd, S)
        v = self._heads(v, S, N, seq_first)                  # (N, H, S, hd)

        scores = F.matmul(q, k)                             # (N, H, L, S)
        mask = self._mask(attn_mask, key_padding_mask, N, L, S, batched, query.dtype)
        if mask is not None:
            scores = scores + mask
        weights = F.softmax(scores, axis=-1)
        if self.dropout:
            weights = F.dropout(weights, self.dropout, training=self.training)

        out = F.matmul(weights, v)                          # (N, H, L, hd)
        out = F.permute(out, *((2, 0, 1, 3) if seq_first else (0, 2, 1, 3)))
        out = F.gemm(F.reshape(out, L * N, e), self.W_out, self.__dict__.get("b_out"),
                     trans_b=True)
        if not batched:
            out = F.reshape(out, L, e)
        else:
            out = F.reshape(out, *((L, N, e) if seq_first else (N, L, e)))

        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = F.mean(weights, axis=1)               # (N, L, S)
        if not batched:
            weights = F.reshape(weights, *weights.shape[1:])
        return out, weights

    def _project(self, query, key, value, self_attention):
        b = self.__dict__.get("b_in")
        bq = bk = bv = None
        if b is not None:
            bq, bk, bv = F.split(b, 3, axis=0)
        if self.packed:
            if self_attention:  # one matmul for q, k and v: one matmul for q, k and v
                qkv = F.gemm(_rows(query), self.W_in, b, trans_b=True)
                return F.split(qkv, 3, axis=1)
            wq, wk, wv = F.split(self.W_in, 3, axis=0)
        else:
            wq, wk, wv = self.W_q, self.W_k, self.W_v
        return (F.gemm(_rows(query), wq, bq, trans_b=True),
                F.gemm(_rows(key), wk, bk, trans_b=True),
                F.gemm(_rows(value), wv, bv, trans_b=True))

    def _heads(self, t, length, n, seq_first, keys_last=False):
        """(rows, E) -> (N, H, length, hd), or (N, H, hd, length) with keys_last."""
        h, hd = self.num_heads, self.head_dim
        if seq_first:
            t = F.permute(F.reshape(t, length, n, h, hd), 1, 2, 0, 3)
        else:
            t = F.permute(F.reshape(t, n, length, h, hd), 0, 2, 1, 3)
        return F.permute(t, 0, 1, 3, 2) if keys_last else t

    # ---- checks and masks ---------------------------------------------------------------

    def _check(self, query, key, value):
        layout = "(N, L, E)" if self.batch_first else "(L, N, E)"
        if query.ndim not in (2, 3) or key.ndim != query.ndim or value.ndim != query.ndim:
            raise errors.ShapeError(
                f"{self.describe()}: expected query, key and value all {layout} or all "
                f"unbatched (L, E), received {tuple(query.shape)}, {tuple(key.shape)} and "
                f"{tuple(value.shape)}")
        if query.shape[-1] != self.embed_dim:
            raise errors.ShapeError(
                f"{self.describe()}: expected query with embed_dim={self.embed_dim} features "
                f"in the last axis, received shape {tuple(query.shape)}")
        for what, t, want in (("key", key, self.kdim), ("value", value, self.vdim)):
            if t.shape[-1] != want:
                raise errors.ShapeError(
                    f"{self.describe()}: expected {what} with {want} features in the last "
                    f"axis, received shape {tuple(t.shape)}")
        batched = query.ndim == 3
        seq_axis = 1 if (batched and self.batch_first) else 0
        if key.shape[seq_axis] != value.shape[seq_axis]:
            raise errors.ShapeError(f"{self.describe()}: key and value differ in sequence "
                                    f"length: {tuple(key.shape)} and {tuple(value.shape)}")
        if batched and not (query.shape[1 - seq_axis] == key.shape[1 - seq_axis]
                            == value.shape[1 - seq_axis]):
            raise errors.ShapeError(
                f"{self.describe()}: query, key and value differ in batch size: "
                f"{tuple(query.shape)}, {tuple(key.shape)} and {tuple(value.shape)}")
        return batched

    def _mask(self, attn_mask, key_padding_mask, n, length, s, batched, dtype):
        """The additive (float) mask broadcasting to (N, H, L, S), or None."""
        total = None
        if attn_mask is not None:
            m = _additive(attn_mask, "attn_mask", self, dtype)
            h = self.num_heads
            if m.shape == (length, s):
                pass
            elif m.shape == (n * h, length, s):
                m = F.reshape(m, n, h, length, s)
            else:
                raise errors.ShapeError(
                    f"{self.describe()}: expected attn_mask of shape {(length, s)} or "
                    f"{(n * h, length, s)} (N * num_heads, L, S), received {tuple(m.shape)}")
            total = m
        if key_padding_mask is not None:
            m = _additive(key_padding_mask, "key_padding_mask", self, dtype)
            want = (n, s) if batched else (s,)
            if tuple(m.shape) != want:
                raise errors.ShapeError(
                    f"{self.describe()}: expected key_padding_mask of shape {want} "
                    f"({'N, S' if batched else 'S'}), received {tuple(m.shape)}")
            m = F.reshape(m, n, 1, 1, s)
            total = m if total is None else total + m
        return total

    def extra_repr(self):
        return (f"embed_dim={self.embed_dim}, num_heads={self.num_heads}, "
                f"dropout={self.dropout}, bias={self.bias}, batch_first={self.batch_first}")


def _rows(t):
    """(A, B, features) -> (A * B, features): the 2-D operand of a projection."""
    return F.reshape(t, t.shape[0] * t.shape[1], t.shape[2])


def _additive(mask, what, layer, dtype):
    """A boolean mask (True = masked) as 0 / -inf in `dtype`; a float mask as it is."""
    if mask.dtype is _dt.bool_:
        return F.where(mask, float("-inf"), 0.0).astype(dtype)
    if mask.dtype.is_floating:
        return mask
    raise errors.DTypeError(f"{layer.describe()}: {what} must be bool (True = masked) or "
                            f"float (added to the scores), received {mask.dtype.name}")


__all__ = ["MultiHeadAttention"]
