"""Matrix products (Gemm, MatMul, MatMulInteger) and Det: import handlers and the export
rules of hl's MatMul, Gemm and Linear Functions.
"""

import numpy as np

from ... import errors
from ..._tensor import tensor as _tensor
from ...autograd.linalg import Gemm, Linear, MatMul
from ..registry import exports, onnx_op
from ._checks import checked_via_float32, expect, scalar_like
from ._util import F, via_float32


# ---- Det -----------------------------------------------------------------------------------

@onnx_op("Det")
@checked_via_float32
def det(n, a):
    expect(n, "float", a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise n.error(f"takes square matrices (..., M, M), got shape {tuple(a.shape)}",
                      errors.ShapeError)
    # hl's core has no LU factorization: Gaussian elimination with partial pivoting, one
    # column at a time over the whole batch, from tensor ops so that gradients flow.
    m = a.shape[-1]
    rows = F.arange(m, device=a.device)
    det = F.broadcast_to(scalar_like(1, a), *a.shape[:-2])
    every = slice(None)
    for k in range(m):
        # The pivot: the largest |value| in column k on or below the diagonal.
        col = F.getitem(a, (Ellipsis, every, k))
        p = F.argmax(F.where(F.ge(rows, k), F.abs(col), scalar_like(-1, a)), axis=-1)
        # Swap rows k and p as a rank-one update (a no-op where p == k): the difference
        # of their one-hot vectors times the difference of the rows.
        e_p = F.one_hot(p, m, dtype=a.dtype)
        e_k = _tensor(np.eye(m, dtype=a.dtype.np)[k], device=a.device)
        row_p = F.squeeze(F.matmul(F.unsqueeze(e_p, -2), a), -2)
        row_k = F.getitem(a, (Ellipsis, k, every))
        a = F.add(a, F.mul(F.unsqueeze(F.sub(e_k, e_p), -1),
                           F.unsqueeze(F.sub(row_p, row_k), -2)))
        det = F.mul(det, F.where(F.eq(p, k), scalar_like(1, a), scalar_like(-1, a)))
        pivot = F.getitem(a, (Ellipsis, k, k))
        det = F.mul(det, pivot)
        # Eliminate below the pivot. A zero pivot has only zeros below it (it is the
        # largest): the determinant is already 0, and dividing by 1 keeps NaNs out.
        safe = F.where(F.eq(pivot, 0), scalar_like(1, a), pivot)
        col = F.getitem(a, (Ellipsis, every, k))
        factors = F.where(F.gt(rows, k), F.div(col, F.unsqueeze(safe, -1)), scalar_like(0, a))
        row_k = F.getitem(a, (Ellipsis, k, every))
        a = F.sub(a, F.mul(F.unsqueeze(factors, -1), F.unsqueeze(row_k, -2)))
    return det


# ---- Gemm, MatMul ------------------------------------------------------------------------

@onnx_op("Gemm")
@via_float32
def gemm(n, a, b, c=None):
    if a.ndim != 2 or b.ndim != 2:
        raise n.error(f"A {a.shape} and B {b.shape} must be matrices", errors.ShapeError)
    return F.gemm(a, b, c, trans_a=bool(n.attr("transA", 0)), trans_b=bool(n.attr("transB", 0)),
                  alpha=n.attr("alpha", 1.0), beta=n.attr("beta", 1.0))


@onnx_op("MatMul")
@via_float32
def matmul(n, a, b):
    return F.matmul(a, b)


@onnx_op("MatMulInteger", since=10)
def matmul_integer(n, a, b, a_zero_point=None, b_zero_point=None):
    # int32 holds the exact products and sums of 8-bit values
    def shifted(t, zp, axis):
        t32 = F.cast(t, "int32")
        if zp is None:
            return t32
        z = F.cast(zp, "int32")
        if z.size > 1:  # one zero point per row of A / column of B
            if t.ndim < 2 or z.shape[-1] != t.shape[axis]:
                raise n.error(f"zero point of shape {zp.shape} does not fit {t.shape}",
                              errors.ShapeError)
            z = F.reshape(z, -1, 1) if axis == t.ndim - 2 else z
        return F.sub(t32, z)
    return F.matmul(shifted(a, a_zero_point, a.ndim - 2), shifted(b, b_zero_point, b.ndim - 1))


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- linear algebra ----------------------------------------------------------------------

@exports(MatMul)
def export_matmul(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op("MatMul", [a.name, b.name], out=y.name)


@exports(Gemm)
def export_gemm(g, f, xs, ys):
    a, b = xs[:2]
    c = xs[2] if len(xs) > 2 else None
    g.op("Gemm", [a.name, b.name] + ([c.name] if c is not None else []), out=ys[0].name,
         alpha=float(f.alpha), beta=float(f.beta), transA=int(f.ta), transB=int(f.tb))


@exports(Linear)
def export_linear(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    y = ys[0]
    if x.ndim == 2 and (b is None or b.ndim <= 1):
        return g.op("Gemm", [x.name, w.name] + ([b.name] if b is not None else []),
                    out=y.name, transB=1)
    wt = g.op("Transpose", [w.name], perm=[1, 0])
    if b is None:
        return g.op("MatMul", [x.name, wt], out=y.name)
    g.op("Add", [g.op("MatMul", [x.name, wt]), b.name], out=y.name)
