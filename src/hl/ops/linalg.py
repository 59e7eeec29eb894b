"""The linear-algebra kernels: matmul_forward (numpy.matmul semantics, batch axes broadcast)
and gemm_forward (ONNX Gemm). The ops users call (matmul, gemm, linear, dot, inner, outer) are
defined once, with their gradients, in hl.autograd.linalg.

float32 and float64 run through OpenBLAS, reading transposed views and strided rows in place;
int32 and int64 run a plain loop. Operands of different dtypes promote as numpy does.
"""
import numpy as np

from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into, operands
from .conv import CONV_ACTIVATIONS

__all__ = ["matmul_forward", "gemm_forward", "gemm_pack_b", "matmul_fused_forward",
           "attention_forward", "PackedMatrix", "FUSED_ACTIVATIONS"]


def matmul_forward(a, b, out=None):
    """a @ b. 1-D operands are promoted to matrices ((K,) -> (1, K) on the left, (K, 1) on the
    right) and the added axis is removed from the result; leading (batch) axes broadcast."""
    a, b = operands(a, b)
    if out is None and a.ndim > 2 and b.ndim <= 2:
        rows = _rows(a)
        if rows is not None:
            y = _wrap(_core.matmul(rows._h, b._h, None), a._dtype)
            from .shape import reshape_forward
            return reshape_forward(y, *a.shape[:-1], *b.shape[1:])
    return _wrap(_core.matmul(a._h, b._h, into(out)), a._dtype)


def _rows(a):
    """a (..., M, K) viewed as one (rows, K) matrix, or None when its strides do not allow
    a view. Then (..., M, K) @ (K, N) is one BLAS call rather than one per batch entry, which
    is faster, above all when BLAS threads start and stop for every small product."""
    from .shape import view_forward
    rows = 1
    for d in a.shape[:-1]:
        rows *= d
    try:
        return view_forward(a, rows, a.shape[-1])
    except errors.ValueError:
        return None


def gemm_forward(a, b, c=None, trans_a=False, trans_b=False, alpha=1.0, beta=1.0, out=None):
    """alpha * op(a) @ op(b) + beta * c (ONNX Gemm), op transposing when asked; a and b are
    2-D, c (optional) broadcasts to the (M, N) result."""
    a, b = operands(a, b)
    if c is not None:
        c = c if isinstance(c, Tensor) else as_tensor(c, dtype=a.dtype, device=a.device)
        if c.dtype is not a.dtype:
            c = c.astype(a.dtype)
    return _wrap(_core.call("gemm", a._h, b._h, None if c is None else c._h, int(bool(trans_a)),
                            int(bool(trans_b)), float(alpha), float(beta), _core.out(into(out))))


# The activations matmul_fused_forward applies (HL_CONV_ACT_* in hl_core.h): conv_fused's,
# and the two GELUs of transformer MLPs.
FUSED_ACTIVATIONS = {**CONV_ACTIVATIONS, "gelu": 5, "gelu_tanh": 6}


class PackedMatrix:
    """A float32 (K, N) matrix packed once (gemm_pack_b) into the layout matmul_fused's kernel
    reads: ``data`` is the (ceil(N / 16), K, 16) tensor, ``shape`` the matrix's (K, N)."""
    __slots__ = ("data", "shape")

    def __init__(self, data, shape):
        self.data, self.shape = data, tuple(shape)

    def __repr__(self):
        return f"PackedMatrix(shape={self.shape})"

    def unpack(self, trans_b=False):
        """The (K, N) matrix again (its (N, K) transpose with trans_b, as gemm_pack_b read
        it), as a new float32 tensor: what an inference program re-derives on the rare call
        that needs the plain weight, so that it need not keep both copies (GPT-2: 500 MB)."""
        k, n = self.shape
        flat = self.data.numpy().reshape(-1)
        panels = self.data.shape[0]
        out = np.empty((k, panels * PACK_NR), np.float32)
        for pc in range(0, k, PACK_KC):  # the KC-row blocks of every panel, block by block
            kc = min(PACK_KC, k - pc)
            block = flat[pc * panels * PACK_NR:(pc + kc) * panels * PACK_NR]
            out[pc:pc + kc] = block.reshape(panels, kc, PACK_NR).transpose(1, 0, 2) \
                .reshape(kc, panels * PACK_NR)
        return as_tensor(np.ascontiguousarray(out[:, :n].T if trans_b else out[:, :n]))


# The packed layout's panel width and row block (HL_PACK_B_NR and HL_PACK_B_KC of
# libcore/src/packed_layouts.h, which describes the layout; tests/onnx/test_packed_weights.py
# checks that the two agree).
PACK_NR, PACK_KC = 16, 256


def gemm_pack_b(b, trans_b=False):
    """b (K, N), or b (N, K) read as its transpose when trans_b, packed for
    matmul_fused_forward: what an inference program does once with a constant weight, so
    that products with few rows do not pack it again on every call. float32 only."""
    if not isinstance(b, Tensor):
        b = as_tensor(b)
    data = _wrap(_core.call("gemm_pack_b", b._h, int(bool(trans_b)), _core.OUT), b._dtype)
    k, n = (b.shape[1], b.shape[0]) if trans_b else (b.shape[0], b.shape[1])
    return PackedMatrix(data, (k, n))


def matmul_fused_forward(a, b, bias=None, residual=None, act="none", alpha=0.0, beta=0.0,
                         out=None):
    """act(a @ b + bias + residual), each output tile finished while it is in cache: MatMul or
    Gemm, Add of a bias, Add of a residual and an activation as one pass (inference; no
    gradient). a is (..., K); b a 2-D (K, N) tensor or a PackedMatrix (gemm_pack_b); bias
    (N,) and residual (the result's shape) are optional; act is a key of FUSED_ACTIVATIONS,
    with alpha and beta as for conv_fused_forward. Equal to the unfused ops up to the order
    of float sums (and, for gelu_tanh, float32 rounding: the kernel computes the same
    function as x / (1 + exp(-2u)) rather than 0.5 x (1 + tanh(u)))."""
    op = "matmul_fused"
    code = FUSED_ACTIVATIONS.get(act)
    if code is None:
        raise errors.ValueError(f"{op}: act must be one of {sorted(FUSED_ACTIVATIONS)}, got "
                                f"{act!r}")
    if not isinstance(a, Tensor):
        a = as_tensor(a)
    if isinstance(b, PackedMatrix):
        bh, n = b.data._h, b.shape[1]
    else:
        if not isinstance(b, Tensor):
            b = as_tensor(b, dtype=a.dtype)
        bh, n = b._h, -1
    extra = []
    for t, what in ((bias, "bias"), (residual, "residual")):
        if t is not None and not isinstance(t, Tensor):
            t = as_tensor(t, dtype=a.dtype, device=a.device)
        extra.append(None if t is None else t._h)
    return _wrap(_core.call(op, a._h, bh, n, extra[0], extra[1], code, float(alpha),
                            float(beta), _core.out(into(out))), a._dtype)


def attention_forward(q, k, v, mask=None, scale=1.0, nan_to_zero=False, merge_heads=False,
                      out=None):
    """softmax(scale * q @ k^T + mask) @ v for each (batch, head) in one pass, the scores kept
    in cache (inference; no gradient). q (B, H, Sq, D), k (B, H, Sk, D), v (B, H, Sk, Dv),
    float32; views (a head split's permutes) are read in place. mask: None or float32
    broadcastable to (B, H, Sq, Sk), added to the scaled scores. A row whose scores are all
    -inf (or hold NaN or +inf) has NaN probabilities, as softmax gives; nan_to_zero takes
    them as 0 (the IsNaN/Where after PyTorch's exported attention), so its output is 0.
    merge_heads=True returns (B, Sq, H * Dv), the heads merged back; else (B, H, Sq, Dv)."""
    ts = [t if isinstance(t, Tensor) or t is None else as_tensor(t, dtype="float32")
          for t in (q, k, v, mask)]
    q, k, v, mask = ts
    return _wrap(_core.call("attention", q._h, k._h, v._h, None if mask is None else mask._h,
                            float(scale), int(bool(nan_to_zero)), int(bool(merge_heads)),
                            _core.out(into(out))), q._dtype)
