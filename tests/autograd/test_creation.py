"""tril/triu record with a gradient (float64 finite differences, PyTorch), and a guard that no
function of hl.autograd.functional silently drops gradients: every name there that is still
the plain, non-recording hl.ops function must be listed below with the reason it has none."""
import inspect

import numpy as np
import pytest

import hl
import hl.ops
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer

F = hl.autograd.functional

TRIANGLES = [(3, 4, 0), (4, 3, 1), (2, 3, 5, -1), (2, 4, 4, 2), (3, 3, -5)]


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("case", TRIANGLES, ids=str)
def test_triangle_gradient(case, upper):
    *shape, k = case
    f = (lambda t: F.triu(t, k)) if upper else (lambda t: F.tril(t, k))
    x = randn(*shape, seed=len(shape) + abs(k))
    check_grad(f, [x])
    check_infer(f, [x])
    # a non-contiguous input: the transposed matrix
    check_grad(lambda t: f(t.transpose(-1, -2)), [np.ascontiguousarray(np.swapaxes(x, -1, -2))])


@pytest.mark.parametrize("upper", [False, True])
def test_triangle_against_torch(upper):
    torch = pytest.importorskip("torch")
    name = "triu" if upper else "tril"
    check_torch(lambda t: getattr(hl, name)(t, 1), lambda t: getattr(torch, name)(t, 1),
                [randn(2, 4, 5)])
    assert getattr(hl, name)(hl.randn(3, 3, requires_grad=True)).requires_grad


def test_triangle_needs_a_matrix():
    with pytest.raises(hl.errors.ShapeError, match="triangle: expected at least 2 dim"):
        hl.tril(hl.Placeholder((4,)))
    with pytest.raises(hl.errors.ShapeError):
        hl.triu(hl.randn(4, requires_grad=True))


# Names that stay the plain op, and why: no derivative (integer, boolean or index results),
# data-dependent output size, or they are themselves backward kernels (hl has no higher-order
# gradients; backward runs under no_grad).
NO_GRADIENT = {
    "one_hot", "nonzero", "manual_seed",
    "setitem",  # writes into a tensor; refused on one that records (test_engine)
    # constructors: a new leaf (requires_grad= marks it), nothing to differentiate
    "empty", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like", "full_like",
    "arange", "eye", "uniform", "rand", "normal", "randn", "bernoulli",
}
BACKWARD_KERNELS = {n for n in dir(hl.ops) if n.endswith("_grad") or "_grad_" in n}


def test_every_differentiable_function_records():
    plain = {n for n in F.__all__
             if inspect.isfunction(getattr(F, n)) and getattr(hl.ops, n, None) is getattr(F, n)}
    unexplained = sorted(plain - NO_GRADIENT - BACKWARD_KERNELS)
    assert not unexplained, (f"these hl.autograd.functional names are the plain ops, so they "
                             f"would drop gradients silently: {unexplained}")
