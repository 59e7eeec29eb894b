"""Gradients of max/avg pooling (1-D, 2-D) and the global pools: float64 finite differences,
PyTorch (float32), shape inference. Random normal inputs make ties in a max window
practically impossible, so the finite differences are well defined."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer


def tf():
    return pytest.importorskip("torch").nn.functional


# (x shape, kernel, stride, padding, dilation, ceil_mode)
MAX2D = [
    ((2, 3, 6, 6), 2, None, 0, 1, False),
    ((1, 2, 7, 6), 3, 2, 1, 1, True),
    ((1, 2, 8, 7), (3, 2), (2, 1), (1, 0), (1, 2), False),
    ((2, 1, 7, 7), 2, 3, 1, 2, True),
]


@pytest.mark.parametrize("xs, k, s, p, d, ceil", MAX2D)
def test_max_pool2d(xs, k, s, p, d, ceil):
    def f(x):
        return hl.max_pool2d(x, k, s, p, d, ceil)
    check_grad(f, [randn(*xs)])
    check_torch(f, lambda x: tf().max_pool2d(x, k, s, p, d, ceil), [randn(*xs)])
    check_infer(f, [randn(*xs)])


@pytest.mark.parametrize("xs, k, s, p, d, ceil", [
    ((2, 3, 8), 2, None, 0, 1, False),
    ((1, 2, 9), 3, 2, 1, 1, True),
    ((2, 2, 10), 2, 3, 1, 3, False),
])
def test_max_pool1d(xs, k, s, p, d, ceil):
    def f(x):
        return hl.max_pool1d(x, k, s, p, d, ceil)
    check_grad(f, [randn(*xs)])
    check_torch(f, lambda x: tf().max_pool1d(x, k, s, p, d, ceil), [randn(*xs)])
    check_infer(f, [randn(*xs)])


# (x shape, kernel, stride, padding, ceil_mode, count_include_pad)
AVG2D = [
    ((2, 3, 6, 6), 2, None, 0, False, True),
    ((1, 2, 7, 6), 3, 2, 1, True, True),
    ((1, 2, 7, 6), 3, 2, 1, True, False),
    ((1, 2, 8, 7), (3, 2), (2, 1), (1, 0), False, False),
]


@pytest.mark.parametrize("xs, k, s, p, ceil, cip", AVG2D)
def test_avg_pool2d(xs, k, s, p, ceil, cip):
    def f(x):
        return hl.avg_pool2d(x, k, s, p, ceil, cip)
    check_grad(f, [randn(*xs)])
    check_torch(f, lambda x: tf().avg_pool2d(x, k, s, p, ceil, cip), [randn(*xs)])
    check_infer(f, [randn(*xs)])


@pytest.mark.parametrize("xs, k, s, p, ceil, cip", [
    ((2, 3, 8), 2, None, 0, False, True),
    ((1, 2, 9), 3, 2, 1, True, False),
    ((1, 2, 9), 4, 3, 2, True, True),
])
def test_avg_pool1d(xs, k, s, p, ceil, cip):
    def f(x):
        return hl.avg_pool1d(x, k, s, p, ceil, cip)
    check_grad(f, [randn(*xs)])
    check_torch(f, lambda x: tf().avg_pool1d(x, k, s, p, ceil, cip), [randn(*xs)])
    check_infer(f, [randn(*xs)])


@pytest.mark.parametrize("xs", [(2, 3, 4, 5), (1, 2, 1, 3)])
def test_global_pools(xs):
    check_grad(hl.global_avg_pool2d, [randn(*xs)])
    check_grad(hl.global_max_pool2d, [randn(*xs)])
    check_torch(hl.global_avg_pool2d, lambda x: tf().adaptive_avg_pool2d(x, 1), [randn(*xs)])
    check_torch(hl.global_max_pool2d, lambda x: tf().adaptive_max_pool2d(x, 1), [randn(*xs)])
    check_infer(hl.global_avg_pool2d, [randn(*xs)])
    check_infer(hl.global_max_pool2d, [randn(*xs)])


def test_return_indices():
    torch = pytest.importorskip("torch")
    a = randn(2, 2, 6, 5).astype(np.float32)
    x = hl.tensor(a, requires_grad=True)
    y, idx = hl.max_pool2d(x, 2, return_indices=True)
    ty, tidx = tf().max_pool2d(torch.tensor(a), 2, return_indices=True)
    np.testing.assert_array_equal(idx.numpy(), tidx.numpy())
    assert idx.dtype is hl.int64
    y.sum().backward()  # the indices do not get in the way of the gradient
    np.testing.assert_array_equal(x.grad.numpy().sum(), y.size)
    check_infer(lambda t: hl.max_pool2d(t, 2, return_indices=True), [a])


def test_non_contiguous_input():
    torch = pytest.importorskip("torch")
    a = randn(2, 3, 6, 7).astype(np.float32)
    x = hl.tensor(a).permute(0, 1, 3, 2)
    x.requires_grad = True
    dy = randn(2, 3, 3, 3).astype(np.float32)
    (hl.max_pool2d(x, 2) * hl.tensor(dy)).sum().backward()
    tx = torch.tensor(a).permute(0, 1, 3, 2).detach().requires_grad_()
    (tf().max_pool2d(tx, 2) * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)


def test_bad_shapes_raise():
    with pytest.raises(hl.errors.ShapeError, match="max_pool2d.*4-D"):
        hl.max_pool2d(hl.Placeholder((2, 3, 4)), 2)
    with pytest.raises(hl.errors.ShapeError, match="avg_pool.*no output"):
        hl.avg_pool1d(hl.Placeholder((2, 3, 2)), 3)
    with pytest.raises(hl.errors.ShapeError, match="global_avg_pool2d"):
        hl.global_avg_pool2d(hl.tensor(np.zeros((2, 3), np.float32)))
