"""Gradients of matmul (1-D, 2-D, batched with broadcast batch axes), dot, inner, outer, gemm
and linear, against finite differences (float64) and PyTorch (float32), plus shape
inference. Tolerances are the harness's unless stated."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer

F = hl.autograd.functional

MATMUL_SHAPES = [
    ((3, 4), (4, 5)),
    ((4,), (4, 5)),
    ((3, 4), (4,)),
    ((4,), (4,)),
    ((2, 3, 4), (4, 5)),        # x @ w: the batch folds into the rows for dw
    ((3, 4), (2, 4, 5)),        # the left operand broadcast over the batch
    ((2, 1, 3, 4), (5, 4, 2)),  # batch axes (2, 1) and (5,) broadcast to (2, 5)
    ((1, 3, 4), (2, 4, 2)),
    ((4,), (2, 4, 3)),
    ((2, 3, 4), (4,)),
    ((2, 3, 0), (0, 2)),        # an empty inner dimension
]


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb):
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    check_grad(lambda x, y: x @ y, [a, b])
    check_torch(lambda x, y: x @ y, lambda x, y: x @ y, [a, b])
    check_infer(lambda x, y: F.matmul(x, y), [a, b])


@pytest.mark.parametrize("ta,tb", [(True, False), (False, True), (True, True)])
def test_matmul_of_transposed_views(ta, tb):
    """Operands that are transposed views (read by BLAS in place, not copied)."""
    a = randn(4, 3, seed=3) if ta else randn(3, 4, seed=3)
    b = randn(5, 4, seed=4) if tb else randn(4, 5, seed=4)

    def f(x, y):
        return (x.T if ta else x) @ (y.T if tb else y)
    check_grad(f, [a, b])
    check_torch(f, f, [a, b])


def test_batched_matmul_of_permuted_views():
    def f(x, y):
        return x.permute(1, 0, 2) @ y.transpose(-1, -2)
    check_grad(f, [randn(3, 2, 4, seed=5), randn(2, 5, 4, seed=6)])
    check_torch(f, f, [randn(3, 2, 4, seed=5), randn(2, 5, 4, seed=6)])


def test_matmul_one_side_needs_grad():
    a = hl.tensor(randn(3, 4), requires_grad=True)
    b = hl.tensor(randn(4, 2))
    (a @ b).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), np.ones((3, 2)) @ b.numpy().T, rtol=1e-12)
    assert b.grad is None


def test_matmul_mixed_dtypes_cast_is_recorded():
    a = hl.tensor(randn(3, 4).astype(np.float32), requires_grad=True)
    b = hl.tensor(randn(4, 2), requires_grad=True)  # float64: a is promoted
    y = a @ b
    assert y.dtype is hl.float64
    y.sum().backward()
    assert a.grad.dtype is hl.float32 and b.grad.dtype is hl.float64


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (4, 2)), ((3, 4), (4,)),
                                   ((2, 3, 4), (5, 4, 2)), ((2, 4), (3, 4, 2)), ((), (3, 2)),
                                   ((3,), ())])
def test_dot(sa, sb):
    a, b = randn(*sa, seed=7), randn(*sb, seed=8)
    check_grad(F.dot, [a, b])
    check_torch(F.dot, lambda x, y: _torch_dot(x, y), [a, b])
    check_infer(F.dot, [a, b])


def _torch_dot(x, y):
    import torch
    if x.ndim == 0 or y.ndim == 0:
        return x * y
    if y.ndim <= 2 or x.ndim == 1 and y.ndim == 1:
        return torch.matmul(x, y)
    return torch.tensordot(x, y, dims=([x.ndim - 1], [y.ndim - 2]))


@pytest.mark.parametrize("sa,sb", [((4,), (4,)), ((3, 4), (2, 4)), ((2, 3, 4), (4,)),
                                   ((), (2, 3))])
def test_inner(sa, sb):
    a, b = randn(*sa, seed=9), randn(*sb, seed=10)
    check_grad(F.inner, [a, b])
    check_torch(F.inner, lambda x, y: __import__("torch").inner(x, y), [a, b])
    check_infer(F.inner, [a, b])


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 2), (3,))])
def test_outer(sa, sb):
    a, b = randn(*sa, seed=11), randn(*sb, seed=12)
    check_grad(F.outer, [a, b])
    check_torch(F.outer, lambda x, y: __import__("torch").outer(x.reshape(-1), y.reshape(-1)),
                [a, b])
    check_infer(F.outer, [a, b])


@pytest.mark.parametrize("ta", [False, True])
@pytest.mark.parametrize("tb", [False, True])
@pytest.mark.parametrize("c_shape", [None, (3, 5), (5,), (3, 1), ()])
@pytest.mark.parametrize("alpha,beta", [(1.0, 1.0), (0.5, -2.0)])
def test_gemm(ta, tb, c_shape, alpha, beta):
    a = randn(*((4, 3) if ta else (3, 4)), seed=13)
    b = randn(*((5, 4) if tb else (4, 5)), seed=14)
    inputs = [a, b] + ([] if c_shape is None else [randn(*c_shape, seed=15)])

    def f(x, y, c=None):
        return F.gemm(x, y, c, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta)

    def t(x, y, c=None):
        r = alpha * ((x.T if ta else x) @ (y.T if tb else y))
        return r if c is None else r + beta * c
    check_grad(f, inputs)
    check_torch(f, t, inputs)
    check_infer(f, inputs)


def test_gemm_of_transposed_views():
    def f(x, y, c):
        return F.gemm(x.T, y, c.T, trans_b=True, alpha=2.0)
    inputs = [randn(4, 3, seed=16), randn(5, 4, seed=17), randn(5, 3, seed=18)]
    check_grad(f, inputs)
    check_torch(f, lambda x, y, c: 2.0 * x.T @ y.T + c.T, inputs)


@pytest.mark.parametrize("sx,bias", [((3, 4), True), ((3, 4), False), ((2, 3, 4), True),
                                     ((4,), True), ((2, 1, 3, 4), False)])
def test_linear(sx, bias):
    inputs = [randn(*sx, seed=19), randn(5, 4, seed=20)] + ([randn(5, seed=21)] if bias else [])
    check_grad(F.linear, inputs)
    check_torch(F.linear, lambda *a: __import__("torch").nn.functional.linear(*a), inputs)
    check_infer(F.linear, inputs)


def test_linear_of_transposed_weight():
    def f(x, w, b):
        return F.linear(x, w.T, b)
    inputs = [randn(3, 4, seed=22), randn(4, 5, seed=23), randn(5, seed=24)]
    check_grad(f, inputs)
    check_torch(f, lambda x, w, b: __import__("torch").nn.functional.linear(x, w.T, b), inputs)


@pytest.mark.parametrize("f,sa,sb,match", [
    (F.matmul, (2, 3), (4, 5), "matmul: shapes"),
    (F.matmul, (2, 3, 4), (3, 4, 5), "matmul"),
    (F.matmul, (), (3,), "at least one dimension"),
    (lambda a, b: F.gemm(a, b), (2, 3), (2, 3), "gemm: a"),
    (F.linear, (2, 3), (4, 2), "gemm: .*inner dimensions 3 and 2 differ"),
])
def test_infer_bad_shapes(f, sa, sb, match):
    with pytest.raises(hl.errors.ShapeError, match=match):
        f(hl.Placeholder(sa), hl.Placeholder(sb))
    with pytest.raises(hl.errors.ShapeError):  # the real op refuses them too
        f(hl.zeros(*sa), hl.zeros(*sb))


def test_placeholder_matmul_operator():
    y = hl.Placeholder((8, 3)) @ hl.zeros(3, 2)
    assert isinstance(y, hl.Placeholder) and y.shape == (8, 2)
