"""Linear algebra: matmul (numpy.matmul semantics, batch axes broadcast), dot, outer, gemm
(ONNX Gemm) and linear (x @ w.T + b, as torch.nn.functional.linear).

float32 and float64 run through OpenBLAS, reading transposed views and strided rows in place;
int32 and int64 run a plain loop. Operands of different dtypes promote as numpy does.
"""
from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into, operands

__all__ = ["matmul", "dot", "outer", "gemm", "linear", "inner"]


def matmul(a, b, out=None):
    """a @ b. 1-D operands are promoted to matrices ((K,) -> (1, K) on the left, (K, 1) on the
    right) and the added axis is removed from the result; leading (batch) axes broadcast."""
    a, b = operands(a, b)
    if out is None and a.ndim > 2 and b.ndim <= 2:
        rows = _rows(a)
        if rows is not None:
            y = _wrap(_core.matmul(rows._h, b._h, None), a._dtype)
            from .shape import reshape
            return reshape(y, *a.shape[:-1], *b.shape[1:])
    return _wrap(_core.matmul(a._h, b._h, into(out)), a._dtype)


def _rows(a):
    """a (..., M, K) viewed as one (rows, K) matrix, or None when its strides do not allow
    a view. Then (..., M, K) @ (K, N) is one BLAS call rather than one per batch entry, which
    is faster, above all when BLAS threads start and stop for every small product."""
    from .shape import view
    rows = 1
    for d in a.shape[:-1]:
        rows *= d
    try:
        return view(a, rows, a.shape[-1])
    except errors.ValueError:
        return None


def dot(a, b, out=None):
    """numpy.dot: the inner product of 1-D tensors, matmul of 2-D ones, a scaled tensor when
    either is 0-d, and for N-D tensors the sum over the last axis of a and the second-to-last
    of b."""
    a, b = operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        from .elementwise import binary
        return binary("mul", a, b, out=out)
    if a.ndim <= 2 and b.ndim <= 2:
        return matmul(a, b, out=out)
    if b.ndim == 1:
        return matmul(a, b, out=out)
    from .shape import permute, reshape
    # b (..., K, N) -> (K, prod(...) * N); a (..., K) -> (prod(...), K)
    k = b.shape[-2]
    if a.shape[-1] != k:
        raise errors.ShapeError(f"dot: shapes {a.shape} and {b.shape} are not aligned: "
                                f"{a.shape[-1]} (last axis of a) != {k} (second-to-last of b)")
    perm = (b.ndim - 2,) + tuple(range(b.ndim - 2)) + (b.ndim - 1,)
    b2 = reshape(permute(b, *perm), k, -1)
    r = matmul(reshape(a, -1, k), b2)
    r = reshape(r, *a.shape[:-1], *b.shape[:-2], b.shape[-1])
    if out is not None:
        out.copy_(r)
        return out
    return r


def inner(a, b):
    """Sum over the last axes of a and b (numpy.inner); 1-D tensors give their dot product."""
    a, b = operands(a, b)
    if a.ndim == 0 or b.ndim == 0:
        from .elementwise import binary
        return binary("mul", a, b)
    from .shape import reshape
    if a.shape[-1] != b.shape[-1]:
        raise errors.ShapeError(f"inner: the last axes of {a.shape} and {b.shape} differ")
    k = a.shape[-1]
    r = gemm(reshape(a, -1, k), reshape(b, -1, k), trans_b=True)
    return reshape(r, *a.shape[:-1], *b.shape[:-1])


def outer(a, b):
    """The outer product of two vectors (flattened first, as numpy.outer): out[i, j] =
    a[i] * b[j]."""
    from .elementwise import binary
    from .shape import reshape
    a, b = operands(a, b)
    return binary("mul", reshape(a, -1, 1), reshape(b, 1, -1))


def gemm(a, b, c=None, trans_a=False, trans_b=False, alpha=1.0, beta=1.0, out=None):
    """alpha * op(a) @ op(b) + beta * c (ONNX Gemm), op transposing when asked; a and b are
    2-D, c (optional) broadcasts to the (M, N) result."""
    a, b = operands(a, b)
    if c is not None:
        c = c if isinstance(c, Tensor) else as_tensor(c, dtype=a.dtype, device=a.device)
        if c.dtype is not a.dtype:
            c = c.astype(a.dtype)
    return _wrap(_core.call("gemm", a._h, b._h, None if c is None else c._h, int(bool(trans_a)),
                            int(bool(trans_b)), float(alpha), float(beta), _core.out(into(out))))


def linear(x, w, b=None):
    """x @ w.T + b, with w of shape (out_features, in_features) and x of shape
    (..., in_features) (torch.nn.functional.linear)."""
    x, w = operands(x, w)
    if x.ndim == 2 and w.ndim == 2:
        return gemm(x, w, b, trans_b=True)
    if x.ndim < 1 or w.ndim != 2:
        raise errors.ShapeError(f"linear: expected x (..., in) and w (out, in), got {x.shape} "
                                f"and {w.shape}")
    from .shape import reshape
    lead = x.shape[:-1]
    y = gemm(reshape(x, -1, x.shape[-1]), w, b, trans_b=True)
    return reshape(y, *lead, w.shape[0])
