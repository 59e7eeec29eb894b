"""Gradients of the reductions: max/min (ties), prod (zeros), logsumexp, vector_norm, var, std,
cumsum, against finite differences (float64) and PyTorch (float32), plus shape inference.
Tolerances are the harness's unless stated."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer_check import check_infer

F = hl.autograd.functional
INF = float("inf")

# (shape, axis, keepdims); the last reads a transposed (non-contiguous) input
CASES = [((5,), None, False), ((3, 4), 1, False), ((3, 4), 0, True), ((2, 3, 4), (0, 2), False),
         ((2, 3, 4), -1, True), ((2, 3, 4), None, True)]


def _dim(axis, ndim):
    return tuple(range(ndim)) if axis is None else axis


def _distinct(*shape, seed=0):
    """Values at least 0.1 apart, so a max or a norm's kink is never within eps."""
    n = int(np.prod(shape))
    return (np.random.default_rng(seed).permutation(n).reshape(shape) - (n - 1) / 2) * 0.1


@pytest.mark.parametrize("op", ["max", "min", "amax", "amin"])
@pytest.mark.parametrize("shape,axis,keep", CASES)
def test_max_min(op, shape, axis, keep):
    x = _distinct(*shape)
    check_grad(lambda a: getattr(F, op)(a, axis, keep), [x])
    tf = {"max": "amax", "min": "amin"}.get(op, op)
    check_torch(lambda a: getattr(F, op)(a, axis, keep),
                lambda a: getattr(a, tf)(dim=_dim(axis, a.ndim), keepdim=keep), [x])
    check_infer(lambda a: getattr(F, op)(a, axis, keep), [x])


def test_max_ties_share_equally():
    x = np.array([[1.0, 3.0, 3.0, 0.0], [2.0, 2.0, 2.0, 2.0]])
    g = hl.tensor(x, requires_grad=True)
    g.max(axis=1).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), [[0, 0.5, 0.5, 0], [0.25] * 4])
    check_torch(lambda a: a.max(axis=1), lambda a: a.amax(dim=1), [x])
    check_torch(lambda a: a.min(), lambda a: a.amin(), [x])


def test_max_of_transposed_input():
    x = _distinct(4, 3, seed=2)
    check_grad(lambda a: a.T.max(axis=0), [x])
    check_torch(lambda a: a.T.max(axis=1, keepdims=True), lambda a: a.T.amax(1, keepdim=True), [x])


@pytest.mark.parametrize("shape,axis,keep", CASES)
def test_prod(shape, axis, keep):
    x = randn(*shape, seed=3)
    check_grad(lambda a: a.prod(axis, keep), [x])
    check_torch(lambda a: a.prod(axis, keep),
                lambda a: _torch_prod(a, _dim(axis, a.ndim), keep), [x])
    check_infer(lambda a: a.prod(axis, keep), [x])


def _torch_prod(a, dims, keep):
    for d in sorted(np.atleast_1d(dims) % a.ndim, reverse=True):
        a = a.prod(dim=int(d), keepdim=keep)
    return a


@pytest.mark.parametrize("zeros", [[(0, 1)], [(0, 1), (1, 2)], [(0, 1), (0, 3), (2, 0)]])
def test_prod_with_zeros(zeros):
    """One zero in a row: only it gets a gradient; two zeros: the whole row gets 0."""
    x = randn(3, 4, seed=4) + 2.0
    for i, j in zeros:
        x[i, j] = 0.0
    for axis in (1, None):
        check_grad(lambda a: a.prod(axis=axis), [x])
        check_torch(lambda a: a.prod(axis=axis),
                    lambda a: a.prod(dim=axis) if axis is not None else a.prod(), [x])
    t = hl.tensor(x, requires_grad=True)
    t.prod(axis=1).sum().backward()
    assert np.isfinite(t.grad.numpy()).all()


@pytest.mark.parametrize("shape,axis,keep", CASES)
def test_logsumexp(shape, axis, keep):
    x = randn(*shape, seed=5) * 3
    check_grad(lambda a: a.logsumexp(axis, keep), [x])
    check_torch(lambda a: a.logsumexp(axis, keep),
                lambda a: a.logsumexp(dim=_dim(axis, a.ndim), keepdim=keep), [x])
    check_infer(lambda a: a.logsumexp(axis, keep), [x])


@pytest.mark.parametrize("ord", [None, 2, 1, INF, -INF, 3, 0.5])
@pytest.mark.parametrize("shape,axis,keep", CASES[:4])
def test_vector_norm(ord, shape, axis, keep):
    x = _distinct(*shape, seed=6)
    x[x == 0] = 0.35  # 1-norm's kink is at 0
    check_grad(lambda a: F.vector_norm(a, ord, axis, keep), [x], rtol=1e-5, atol=1e-6)
    check_torch(lambda a: F.vector_norm(a, ord, axis, keep),
                lambda a: _torch().linalg.vector_norm(a, 2 if ord is None else ord,
                                                      dim=_dim(axis, a.ndim), keepdim=keep),
                [x])
    check_infer(lambda a: F.vector_norm(a, ord, axis, keep), [x])


def _torch():
    return pytest.importorskip("torch")


@pytest.mark.parametrize("ord", [None, 2, 3])
def test_norm_of_zero_vector_has_zero_gradient(ord):
    x = np.zeros((2, 3))
    x[1] = [1.0, -2.0, 2.0]
    t = hl.tensor(x, requires_grad=True)
    F.norm(t, ord, axis=1).sum().backward()
    g = t.grad.numpy()
    assert np.isfinite(g).all()
    np.testing.assert_array_equal(g[0], 0.0)
    p = 2 if ord is None else ord
    want = np.sign(x[1]) * np.abs(x[1]) ** (p - 1) / np.linalg.norm(x[1], p) ** (p - 1)
    np.testing.assert_allclose(g[1], want, rtol=1e-12)


def test_norm_ord_zero_has_zero_gradient():
    t = hl.tensor(randn(3, 4), requires_grad=True)
    F.norm(t, 0).backward()
    np.testing.assert_array_equal(t.grad.numpy(), 0.0)


def test_norm_bad_ord():
    with pytest.raises(hl.errors.ValueError, match="norm: unsupported ord"):
        F.norm(hl.Placeholder((3,)), -1)


@pytest.mark.parametrize("op", ["var", "std"])
@pytest.mark.parametrize("ddof", [0, 1])
@pytest.mark.parametrize("shape,axis,keep", CASES)
def test_var_std(op, ddof, shape, axis, keep):
    if ddof and np.prod([shape[a] for a in np.atleast_1d(_dim(axis, len(shape)))]) < 2:
        pytest.skip("n - ddof would be 0")
    x = randn(*shape, seed=7)
    f = lambda a: getattr(a, op)(axis, keep, ddof=ddof)  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: getattr(a, op)(dim=_dim(axis, a.ndim), keepdim=keep,
                                           correction=ddof), [x])
    check_torch(lambda a: getattr(a, op)(axis, keep, correction=ddof), lambda a: getattr(a, op)(
        dim=_dim(axis, a.ndim), keepdim=keep, correction=ddof), [x])
    check_infer(f, [x])


def test_std_of_constant_has_zero_gradient():
    t = hl.tensor(np.full((2, 3), 1.5), requires_grad=True)
    t.std(axis=1).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), 0.0)


def test_var_of_transposed_input():
    x = randn(4, 3, seed=8)
    check_grad(lambda a: a.T.var(axis=1, ddof=1), [x])


@pytest.mark.parametrize("exclusive", [False, True])
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("shape,axis", [((5,), 0), ((3, 4), 1), ((3, 4), -2), ((2, 3, 2), None),
                                        ((), None), ((2, 3), None)])
def test_cumsum(shape, axis, exclusive, reverse):
    x = randn(*shape, seed=9)
    f = lambda a: a.cumsum(axis, exclusive=exclusive, reverse=reverse)  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: _torch_cumsum(a, axis, exclusive, reverse), [x])
    check_infer(f, [x])


def _torch_cumsum(a, axis, exclusive, reverse):
    if axis is None:
        a, axis = a.reshape(-1), 0
    s = a.flip(axis).cumsum(axis).flip(axis) if reverse else a.cumsum(axis)
    return s - a if exclusive else s


def test_cumsum_of_transposed_input():
    check_grad(lambda a: a.T.cumsum(1, reverse=True), [randn(4, 3, seed=10)])


@pytest.mark.parametrize("op,args", [("argmax", ()), ("argmax", (1,)), ("argmin", (-1, True)),
                                     ("argmin", (None, True)), ("any", ()), ("all", (0,)),
                                     ("count_nonzero", ((0, 2), True))])
def test_shape_only_reductions_infer(op, args):
    x = randn(2, 3, 4, seed=11)
    check_infer(lambda a: getattr(F, op)(a, *args), [x])


def test_non_differentiable_reductions_stay_plain():
    t = hl.tensor(randn(3, 4), requires_grad=True)
    assert not t.argmax(axis=1).requires_grad
    assert not t.any().requires_grad


def test_infer_bad_axis():
    with pytest.raises(hl.errors.IndexError, match="max: axis 3"):
        F.max(hl.Placeholder((2, 3)), axis=3)
