"""Linear algebra with gradients: matmul, gemm and linear as Functions; dot, inner and outer
composed from recorded ops.

The backward of a product is two more products with one operand transposed. The core reads
a transposed view (or gemm's trans flags) in place, so no gradient copies an operand: for
y = a @ b, da = dy @ b.T and db = a.T @ dy run straight on views. Batch axes that
broadcasting added or stretched are summed back (``sum_to``); the common x (..., K) @ w (K, N)
case instead folds the batch into the rows, so dw is one product rather than a batched one
and a sum.
"""
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor
from .binary import _broadcast_shape, _recorded_operands, mul
from .autocast import state as _amp
from .function import Function, sum_to
from .mode import no_grad
from .mode import state as _grad
from .placeholder import Placeholder
from .shape import permute, reshape


def _mT(x):
    """x with its last two axes swapped (a view)."""
    n = x.ndim
    return ops.permute_forward(x, *range(n - 2), n - 1, n - 2)


def _count(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def _desc(x):
    return f"{tuple(x.shape)} {x.dtype.name}"


def _plain(*xs):
    """True when nothing needs recording: plain tensors, none requiring a gradient (or grad
    mode off), so the plain op can run without a Function. Never inside autocast: the
    Function's call chooses the dtype there."""
    if _amp.active:
        return False
    for x in xs:
        if x is None:
            continue
        if x.__class__ is not Tensor or (x.requires_grad and _grad.enabled):
            return False
    return True


class MatMul(Function):
    """numpy.matmul: 1-D operands become matrices for the product, batch axes broadcast."""
    autocast = "half"  # hl.amp (autograd/autocast.py)

    def forward(self, a, b):
        if self.needs:
            self.a, self.b = a, b
        return ops.matmul_forward(a, b)

    def backward(self, dy):
        a, b = self.a, self.b
        na, nb = self.needs
        # Matrices everywhere: (K,) -> (1, K) on the left, (K, 1) on the right, and dy gets
        # the axis the result lost.
        a2 = ops.unsqueeze_forward(a, 0) if a.ndim == 1 else a
        b2 = ops.unsqueeze_forward(b, 1) if b.ndim == 1 else b
        if a.ndim == 1:
            dy = ops.unsqueeze_forward(dy, dy.ndim - 1 if b.ndim > 1 else dy.ndim)
        if b.ndim == 1:
            dy = ops.unsqueeze_forward(dy, dy.ndim)
        da = db = None
        if na:
            da = ops.matmul_forward(dy, _mT(b2))
            da = ops.reshape_forward(sum_to(da, a2.shape), *a.shape)
        if nb:
            if b2.ndim == 2 and a2.ndim > 2:
                # x (..., M, K) @ w (K, N): dw = x_rows.T @ dy_rows, one product over all rows
                k, n = b2.shape
                rows = _count(a2.shape[:-1])
                db = ops.matmul_forward(_mT(ops.reshape_forward(a2, rows, k)),
                                        ops.reshape_forward(dy, rows, n),
                                        out=self.into(1, dy) if b.ndim == 2 else None)
            elif a2.ndim == 2 and b.ndim == 2:  # plain matrices: nothing to sum back
                db = ops.matmul_forward(_mT(a2), dy, out=self.into(1, dy))
            else:
                db = sum_to(ops.matmul_forward(_mT(a2), dy), b2.shape)
            db = ops.reshape_forward(db, *b.shape)
        return da, db


def matmul(a, b, out=None):
    """a @ b. 1-D operands are promoted to matrices ((K,) -> (1, K) on the left, (K, 1) on the
    right) and the added axis is removed from the result; leading (batch) axes broadcast."""
    if out is not None:
        return ops.matmul_forward(a, b, out=out)
    a, b = _recorded_operands(a, b)
    if _plain(a, b):
        return ops.matmul_forward(a, b)
    return MatMul()(a, b)


class Gemm(Function):
    """alpha * op(a) @ op(b) + beta * c (ONNX Gemm)."""
    autocast = "half"  # hl.amp (autograd/autocast.py)

    def __init__(self, trans_a, trans_b, alpha, beta):
        self.ta, self.tb = bool(trans_a), bool(trans_b)
        self.alpha, self.beta = float(alpha), float(beta)

    def forward(self, a, b, c=None):
        if self.needs:
            self.a, self.b = a, b
            self.c_shape = None if c is None else c.shape
        return ops.gemm_forward(a, b, c, self.ta, self.tb, self.alpha, self.beta)

    def backward(self, dy):
        a, b, ta, tb, alpha = self.a, self.b, self.ta, self.tb, self.alpha
        na, nb = self.needs[:2]
        nc = len(self.needs) > 2 and self.needs[2]
        da = db = dc = None
        if na:  # d op(a) = alpha * dy @ op(b).T; transposed back when a was read transposed
            da = (ops.gemm_forward(b, dy, trans_a=tb, trans_b=True, alpha=alpha) if ta else
                  ops.gemm_forward(dy, b, trans_b=not tb, alpha=alpha))
        if nb:  # d op(b) = alpha * op(a).T @ dy
            out = self.into(1, dy)
            db = (ops.gemm_forward(dy, a, trans_a=True, trans_b=ta, alpha=alpha, out=out) if tb
                  else ops.gemm_forward(a, dy, trans_a=not ta, alpha=alpha, out=out))
        if nc:
            dc = sum_to(dy if self.beta == 1.0 else dy * self.beta, self.c_shape,
                        out=self.into(2, dy))
        return (da, db, dc) if len(self.needs) > 2 else (da, db)


def gemm(a, b, c=None, trans_a=False, trans_b=False, alpha=1.0, beta=1.0, out=None):
    """alpha * op(a) @ op(b) + beta * c (ONNX Gemm), op transposing when asked; a and b are
    2-D, c (optional) broadcasts to the (M, N) result."""
    if out is not None:
        return ops.gemm_forward(a, b, c, trans_a, trans_b, alpha, beta, out=out)
    a, b = _recorded_operands(a, b)
    if c is not None:
        c = _like(c, a)
    if _plain(a, b, c):
        return ops.gemm_forward(a, b, c, trans_a, trans_b, alpha, beta)
    f = Gemm(trans_a, trans_b, alpha, beta)
    return f(a, b) if c is None else f(a, b, c)


def _like(c, a):
    """c as a tensor of a's dtype (the cast recorded, so its gradient flows back)."""
    if not isinstance(c, (Tensor, Placeholder)):
        return as_tensor(c, dtype=a.dtype, device=a.device)
    if c.dtype is not a.dtype:
        from .binary import cast
        c = cast(c, a.dtype)
    return c


def _linear(x, w, b):
    """linear's forward: one gemm, the batch axes of x folded into its rows."""
    if x.ndim == 2 and w.ndim == 2:
        return ops.gemm_forward(x, w, b, trans_b=True)
    if x.ndim < 1 or w.ndim != 2:
        raise errors.ShapeError(f"linear: expected x (..., in) and w (out, in), got {x.shape} "
                                f"and {w.shape}")
    y = ops.gemm_forward(ops.reshape_forward(x, -1, x.shape[-1]), w, b, trans_b=True)
    return ops.reshape_forward(y, *x.shape[:-1], w.shape[0])


class Linear(Function):
    """x @ w.T + b with w (out, in) and x (..., in) (torch.nn.functional.linear)."""
    autocast = "half"  # hl.amp (autograd/autocast.py)

    def forward(self, x, w, b=None):
        if self.needs:
            self.x, self.w = x, w
            self.b_shape = None if b is None else b.shape
        return _linear(x, w, b)

    def backward(self, dy):
        x, w = self.x, self.w
        nx, nw = self.needs[:2]
        nb = len(self.needs) > 2 and self.needs[2]
        n_out, n_in = w.shape
        rows = _count(x.shape[:-1])
        dy2 = ops.reshape_forward(dy, rows, n_out)  # the batch axes folded into rows
        dx = dw = db = None
        if nx:
            dx = ops.reshape_forward(ops.gemm_forward(dy2, w), *x.shape)
        if nw:
            dw = ops.gemm_forward(dy2, ops.reshape_forward(x, rows, n_in), trans_a=True,
                                  out=self.into(1, dy))
        if nb:
            db = sum_to(dy, self.b_shape, out=self.into(2, dy))
        return (dx, dw, db) if len(self.needs) > 2 else (dx, dw)


def linear(x, w, b=None):
    """x @ w.T + b, with w of shape (out_features, in_features) and x of shape
    (..., in_features) (torch.nn.functional.linear)."""
    x, w = _recorded_operands(x, w)
    if b is not None:
        b = _like(b, x)
    if _plain(x, w, b):
        return _linear(x, w, b)
    return Linear()(x, w) if b is None else Linear()(x, w, b)


# ---- compositions: their gradients come from the recorded pieces --------------------------

def dot(a, b, out=None):
    """numpy.dot: the inner product of 1-D tensors, matmul of 2-D ones, a scaled tensor when
    either is 0-d, and for N-D tensors the sum over the last axis of a and the second-to-last
    of b."""
    a, b = _recorded_operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b, out=out)
    if (a.ndim <= 2 and b.ndim <= 2) or b.ndim == 1:
        return matmul(a, b, out=out)
    if out is not None:  # (out= records nothing, as in PyTorch)
        with no_grad():
            return out.copy_(dot(a, b))
    k = b.shape[-2]
    if a.shape[-1] != k:
        raise errors.ShapeError(f"dot: shapes {a.shape} and {b.shape} are not aligned: "
                                f"{a.shape[-1]} (last axis of a) != {k} (second-to-last of b)")
    # b (..., K, N) -> (K, prod(...) * N); a (..., K) -> (prod(...), K)
    perm = (b.ndim - 2,) + tuple(range(b.ndim - 2)) + (b.ndim - 1,)
    r = matmul(reshape(a, -1, k), reshape(permute(b, *perm), k, -1))
    return reshape(r, *a.shape[:-1], *b.shape[:-2], b.shape[-1])


def inner(a, b):
    """Sum over the last axes of a and b (numpy.inner); 1-D tensors give their dot product."""
    a, b = _recorded_operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        return mul(a, b)
    if a.shape[-1] != b.shape[-1]:
        raise errors.ShapeError(f"inner: the last axes of {a.shape} and {b.shape} differ")
    k = a.shape[-1]
    r = gemm(reshape(a, -1, k), reshape(b, -1, k), trans_b=True)
    return reshape(r, *a.shape[:-1], *b.shape[:-1])


def outer(a, b):
    """The outer product of two vectors (flattened first, as numpy.outer): out[i, j] =
    a[i] * b[j]."""
    a, b = _recorded_operands(a, b)
    return mul(reshape(a, -1, 1), reshape(b, 1, -1))


def gemm_pack_b(b, trans_b=False):
    """hl.ops.gemm_pack_b (a constant weight packed once for matmul_fused, inference). The
    packed copy has no gradient: a b that requires one is refused, not silently cut off."""
    if _grad.enabled and getattr(b, "requires_grad", False):
        raise errors.UnsupportedError(
            "gemm_pack_b: packs a constant weight for inference, and b requires a gradient; "
            "use matmul (or linear), or hl.no_grad()")
    return ops.gemm_pack_b(b, trans_b=trans_b)


def matmul_fused(a, b, bias=None, residual=None, act="none", alpha=0.0, beta=0.0):
    """hl.ops.matmul_fused_forward (act(a @ b + bias + residual) in one pass, for inference;
    b may be a PackedMatrix from hl.gemm_pack_b). It has no gradient: where one would be
    recorded it refuses, rather than drop it silently."""
    if _grad.enabled and any(getattr(t, "requires_grad", False)
                             for t in (a, b, bias, residual)):
        raise errors.UnsupportedError(
            "matmul_fused: an inference kernel without a gradient, called on tensors that "
            "require one; use matmul (or linear), add and the activation, or hl.no_grad()")
    return ops.matmul_fused_forward(a, b, bias, residual, act=act, alpha=alpha, beta=beta)


def attention(q, k, v, mask=None, scale=1.0, nan_to_zero=False, merge_heads=False):
    """hl.ops.attention_forward (softmax(scale q k^T + mask) v in one pass, for inference).
    It has no gradient: where one would be recorded it refuses, rather than drop it."""
    if _grad.enabled and any(getattr(t, "requires_grad", False) for t in (q, k, v, mask)):
        raise errors.UnsupportedError(
            "attention: an inference kernel without a gradient, called on tensors that "
            "require one; use matmul, softmax and matmul, or hl.no_grad()")
    return ops.attention_forward(q, k, v, mask, scale=scale, nan_to_zero=nan_to_zero,
                                 merge_heads=merge_heads)


__all__ = ["matmul", "dot", "inner", "outer", "gemm", "linear", "gemm_pack_b", "matmul_fused",
           "attention"]
