"""The CPU gemm's batch-1 paths (cpu/linalg.c): M == 1 goes to gemv, K == 1 (an outer
product, a Linear's weight gradient at batch 1) to a direct loop. numpy is the reference
(float32 rtol 1e-5, float64 1e-12); every operand layout BLAS takes in place (plain,
transposed views, row-strided), alpha/beta, an output buffer holding NaN (beta 0 clears it),
and sizes over the threaded outer product's threshold (2**15 elements)."""
import numpy as np
import pytest

import hl

TOL = {np.float32: 1e-5, np.float64: 1e-12}


def _layout(rng, shape, how, dtype):
    """A (rows, cols) operand as a plain array, a transposed view or a row-strided view."""
    if how == "T":
        return rng.standard_normal(shape[::-1]).astype(dtype).T
    if how == "strided":
        return rng.standard_normal((shape[0], shape[1] * 2)).astype(dtype)[:, ::2]
    return rng.standard_normal(shape).astype(dtype)


def _hl(a_np, how):
    """The same values in hl with the same layout (a transposed view stays one)."""
    if how == "T":
        return hl.tensor(np.ascontiguousarray(a_np.T)).transpose()
    return hl.tensor(np.ascontiguousarray(a_np))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m,k,n", [(1, 784, 512), (1, 7, 1), (1, 1, 5), (784, 1, 512),
                                   (3, 1, 4), (1, 1, 1)])
@pytest.mark.parametrize("how_a,how_b", [("", ""), ("T", ""), ("", "T"), ("T", "T")])
def test_batch1_matmul_matches_numpy(rng, dtype, m, k, n, how_a, how_b):
    a = _layout(rng, (m, k), how_a, dtype)
    b = _layout(rng, (k, n), how_b, dtype)
    got = hl.matmul(_hl(a, how_a), _hl(b, how_b)).numpy()
    np.testing.assert_allclose(got, a @ b, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("m,k,n", [(1, 50, 30), (40, 1, 30)])
def test_batch1_gemm_alpha_beta_and_a_nan_output_buffer(rng, m, k, n):
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    c = rng.standard_normal((m, n)).astype(np.float32)
    got = hl.gemm(hl.tensor(a), hl.tensor(b), hl.tensor(c), alpha=0.5, beta=2.0).numpy()
    np.testing.assert_allclose(got, 0.5 * (a @ b) + 2.0 * c, rtol=1e-5, atol=1e-5)
    out = hl.tensor(np.full((m, n), np.nan, np.float32))
    hl.matmul(hl.tensor(a), hl.tensor(b), out=out)  # beta 0: NaN in the buffer never shows
    np.testing.assert_allclose(out.numpy(), a @ b, rtol=1e-5, atol=1e-5)


def test_linear_at_batch1_trains_like_torch(rng):
    """A Linear's forward (M == 1) and weight gradient (K == 1) at batch 1 against PyTorch."""
    torch = pytest.importorskip("torch")
    x = rng.standard_normal((1, 300)).astype(np.float32)
    w = rng.standard_normal((300, 200)).astype(np.float32)
    dy = rng.standard_normal((1, 200)).astype(np.float32)
    xt, wt = hl.Tensor(x, requires_grad=True), hl.Tensor(w, requires_grad=True)
    y = hl.matmul(xt, wt)
    (y * hl.tensor(dy)).sum().backward()
    tx = torch.tensor(x, requires_grad=True)
    tw = torch.tensor(w, requires_grad=True)
    ty = tx @ tw
    (ty * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(wt.grad.numpy(), tw.grad.numpy(), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(xt.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-5)
