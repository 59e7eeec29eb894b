"""Gradients of gather, take, index_select, gather_elements, scatter_elements and topk against
finite differences (float64) and PyTorch (float32): repeated indices accumulate; indices never
get a gradient; shape inference with placeholders. Tolerances are the harness's."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer_check import check_infer

F = hl.autograd.functional


def _torch():
    return pytest.importorskip("torch")


def _torch_gather(a, idx, axis):
    """numpy.take along axis, in torch."""
    axis %= a.ndim
    return a[(slice(None),) * axis + (idx,)]


GATHERS = [((5,), [1, 1, 4, 0], 0), ((3, 4), [[0, 2], [2, 2]], 1), ((3, 4), [2, 0, 2, 2], 0),
           ((2, 3, 4), 1, -1), ((2, 3, 4), [-1, 0, -1], 1), ((3, 4), [], 1)]


@pytest.mark.parametrize("shape,idx,axis", GATHERS)
def test_gather(shape, idx, axis):
    x, i = randn(*shape, seed=1), np.array(idx, dtype=np.int64)
    check_grad(lambda a, j: F.gather(a, j, axis), [x, i])
    check_torch(lambda a, j: F.gather(a, j, axis),
                lambda a, j: _torch_gather(a, j, axis), [x, i])
    check_infer(lambda a, j: F.gather(a, j, axis), [x, i])
    check_infer(lambda a, j: F.gather(a, j, axis), [x, i], placeholders=[0, 1])


def test_gather_repeats_accumulate():
    t = hl.tensor(np.zeros((3, 2)), requires_grad=True)
    F.gather(t, [2, 2, 0, 2], 0).sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [[1, 1], [0, 0], [3, 3]])


def test_gather_of_transposed_input():
    check_grad(lambda a: F.gather(a.T, [1, 0, 1], 1), [randn(3, 4, seed=2)])


def test_embedding_lookup_with_placeholder_indices():
    """An int placeholder standing for token ids, gathered from a real weight table."""
    w = hl.tensor(randn(10, 4), requires_grad=True)
    y = F.gather(w, hl.Placeholder((8, 5), hl.int64), 0)
    assert isinstance(y, hl.Placeholder) and y.shape == (8, 5, 4) and y.dtype is hl.float64
    with pytest.raises(hl.errors.DTypeError, match="gather: indices must be integers"):
        F.gather(w, hl.Placeholder((8,), hl.float32), 0)


@pytest.mark.parametrize("axis", [None, 0, 1])
def test_take(axis):
    x, i = randn(3, 4, seed=3), np.array([[0, 2], [2, 1]])
    check_grad(lambda a: F.take(a, i, axis), [x])
    ref = (lambda a: a.reshape(-1)[_torch().tensor(i)]) if axis is None else (
        lambda a: _torch_gather(a, _torch().tensor(i), axis))
    check_torch(lambda a: F.take(a, i, axis), ref, [x])
    check_infer(lambda a: F.take(a, i, axis), [x])


@pytest.mark.parametrize("axis,idx", [(0, [2, 0, 0]), (1, [3, 3]), (-1, [0])])
def test_index_select(axis, idx):
    x, i = randn(3, 4, seed=4), np.array(idx, dtype=np.int64)
    check_grad(lambda a, j: F.index_select(a, axis, j), [x, i])
    check_torch(lambda a, j: F.index_select(a, axis, j),
                lambda a, j: _torch().index_select(a, axis % 2, j), [x, i])
    check_infer(lambda a, j: F.index_select(a, axis, j), [x, i])


GATHER_ELEMENTS = [((3, 4), (3, 4), 1), ((3, 4), (2, 6), 1), ((3, 4), (5, 4), 0),
                   ((2, 3, 4), (2, 3, 2), -1), ((2, 3, 4), (1, 5, 4), 1)]


@pytest.mark.parametrize("xs,ishape,axis", GATHER_ELEMENTS)
def test_gather_elements(xs, ishape, axis):
    rng = np.random.default_rng(5)
    x = randn(*xs, seed=5)
    i = rng.integers(0, xs[axis], size=ishape)  # repeats are likely: they must add up
    check_grad(lambda a, j: F.gather_elements(a, j, axis), [x, i])
    check_torch(lambda a, j: F.gather_elements(a, j, axis),
                lambda a, j: _torch().gather(a, axis % a.ndim, j), [x, i])
    check_infer(lambda a, j: F.gather_elements(a, j, axis), [x, i])
    check_infer(lambda a, j: F.gather_elements(a, j, axis), [x, i], placeholders=[0, 1])


def test_gather_elements_of_transposed_input():
    i = np.array([[0, 0], [2, 1], [1, 1], [2, 0]])
    check_grad(lambda a: F.gather_elements(a.T, i, 1), [randn(3, 4, seed=6)])


def _distinct_positions(rng, xs, ishape, axis):
    """Indices with no repeat along axis (so 'none' is not ambiguous)."""
    idx = np.empty(ishape, dtype=np.int64)
    moved = np.moveaxis(idx, axis, -1)
    for pos in np.ndindex(moved.shape[:-1]):
        moved[pos] = rng.permutation(xs[axis])[:ishape[axis]]
    return idx


@pytest.mark.parametrize("xs,ishape,axis", [((3, 4), (3, 2), 1), ((4, 3), (2, 3), 0),
                                            ((2, 3, 4), (2, 2, 4), -2)])
@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements(xs, ishape, axis, reduction):
    rng = np.random.default_rng(7)
    x, u = randn(*xs, seed=7), randn(*ishape, seed=8)
    if reduction == "none":
        i = _distinct_positions(rng, xs, ishape, axis)
    else:
        i = rng.integers(0, xs[axis], size=ishape)
    f = lambda a, j, b: F.scatter_elements(a, j, b, axis, reduction)  # noqa: E731

    def t(a, j, b):
        if reduction == "none":
            return a.scatter(axis % a.ndim, j, b)
        return a.scatter_add(axis % a.ndim, j, b)
    check_grad(f, [x, i, u])
    check_torch(f, t, [x, i, u])
    check_infer(f, [x, i, u])


def test_scatter_none_zeroes_overwritten_gradient():
    x = hl.tensor(np.ones((2, 3)), requires_grad=True)
    u = hl.tensor(np.full((2, 1), 5.0), requires_grad=True)
    y = F.scatter_elements(x, [[2], [0]], u, axis=1)
    (y * hl.tensor(np.arange(6.0).reshape(2, 3))).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0, 1, 0], [0, 4, 5]])
    np.testing.assert_array_equal(u.grad.numpy(), [[2], [3]])


def test_scatter_scalar_update():
    x = randn(2, 3, seed=9)
    check_grad(lambda a: F.scatter_elements(a, [[1], [2]], 0.5, axis=1), [x])


def test_scatter_reduction_without_gradient_says_so():
    x = hl.tensor(np.ones((2, 3)), requires_grad=True)
    with pytest.raises(hl.errors.UnsupportedError, match="reduction 'max' has no gradient"):
        F.scatter_elements(x, [[1], [2]], hl.tensor(np.ones((2, 1))), 1, "max")
    with hl.no_grad():
        F.scatter_elements(x, [[1], [2]], hl.tensor(np.ones((2, 1))), 1, "max")


@pytest.mark.parametrize("shape,k,axis,largest", [((6,), 3, -1, True), ((3, 5), 2, 1, False),
                                                  ((4, 3), 4, 0, True), ((2, 3, 4), 1, 1, True),
                                                  ((3, 4), 0, -1, True)])
def test_topk(shape, k, axis, largest):
    n = int(np.prod(shape))
    x = (np.random.default_rng(10).permutation(n).reshape(shape) - n / 2) * 0.1  # no ties
    f = lambda a: F.topk(a, k, axis, largest)[0]  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: a.topk(k, axis, largest)[0], [x])
    check_infer(lambda a: F.topk(a, k, axis, largest), [x])


def test_topk_indices_are_plain():
    x = hl.tensor(randn(3, 5), requires_grad=True)
    v, i = F.topk(x, 2)
    assert v.requires_grad and not i.requires_grad and i.dtype is hl.int64
    (v * 3.0).sum().backward()
    want = np.zeros((3, 5))
    np.put_along_axis(want, i.numpy(), 3.0, axis=1)
    np.testing.assert_array_equal(x.grad.numpy(), want)


@pytest.mark.parametrize("f,err,match", [
    (lambda p: F.gather(p, [0], 3), hl.errors.IndexError, "gather: axis 3"),
    (lambda p: F.gather_elements(p, np.zeros((3, 3), np.int64), 1), hl.errors.ShapeError,
     "must have the rank"),
    (lambda p: F.gather_elements(p, np.zeros((3, 3, 4), np.int64), 1), hl.errors.ShapeError,
     "is larger than"),
    (lambda p: F.topk(p, 5), hl.errors.ValueError, "topk: k = 5"),
    (lambda p: F.index_select(p, 0, [[0]]), hl.errors.ShapeError, "must be 1-D"),
])
def test_infer_bad_arguments(f, err, match):
    with pytest.raises(err, match=match):
        f(hl.Placeholder((2, 3, 4)))
    with pytest.raises(err, match=match):
        f(hl.tensor(np.zeros((2, 3, 4)), requires_grad=True))
