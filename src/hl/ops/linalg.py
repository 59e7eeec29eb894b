"""The linear-algebra kernels: matmul_forward (numpy.matmul semantics, batch axes broadcast)
and gemm_forward (ONNX Gemm). The ops users call (matmul, gemm, linear, dot, inner, outer) are
defined once, with their gradients, in hl.autograd.linalg.

float32 and float64 run through OpenBLAS, reading transposed views and strided rows in place;
int32 and int64 run a plain loop. Operands of different dtypes promote as numpy does.
"""
from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into, operands

__all__ = ["matmul_forward", "gemm_forward"]


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
