"""Element-wise gradients beyond the OpCases (tests/opcases derives a float64 finite-difference
check for every unary and binary op, with broadcasting): operators on non-contiguous inputs
and reflected scalars, ties, where/clip/cast, against PyTorch CPU and finite differences."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn

# Inputs inside each op's domain and away from its kinks (finite differences straddling a kink
# would not measure the derivative).
def away_from_zero(shape, seed=0):
    x = randn(*shape, seed=seed)
    return np.where(np.abs(x) < 0.1, 0.3, x)


@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "round", "trunc"])
def test_piecewise_constant_ops_give_zero_gradients(name):
    a = hl.tensor(randn(5) + 0.25, requires_grad=True)
    (getattr(hl, name)(a) * 3.0 + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(5))


@pytest.mark.parametrize("name,op", [("add", "__add__"), ("sub", "__sub__"), ("mul", "__mul__"),
                                     ("div", "__truediv__"), ("pow", "__pow__")])
def test_operators_against_torch_with_non_contiguous_input(name, op):
    pytest.importorskip("torch")
    a, b = np.abs(randn(5, 3)) + 0.5, randn(5, 1) + 3.0
    # a transposed view on both sides: hl's kernels read the strided layout directly
    check_torch(lambda x, y: getattr(x.T.T, op)(y), lambda x, y: getattr(x.T.T, op)(y), [a, b])
    check_torch(lambda x, y: getattr(x, op)(2.5), lambda x, y: getattr(x, op)(2.5) + 0 * y,
                [a, b], grad_of=(0,))


def test_reflected_scalar_operators():
    check_grad(lambda x: 2.0 - x + 3.0 / x + 2.0 ** x + 5.0 * x, [away_from_zero((4,)) * 2])


def test_maximum_ties_split_the_gradient_like_torch():
    torch = pytest.importorskip("torch")
    a = np.array([1.0, 2.0, 3.0])
    b = np.array([1.0, 5.0, 0.0])
    check_torch(hl.maximum, torch.maximum, [a, b])
    check_torch(hl.minimum, torch.minimum, [a, b])


def test_where_and_clip():
    torch = pytest.importorskip("torch")
    cond = randn(3, 4) > 0
    check_grad(lambda a, b: hl.where(hl.tensor(cond), a, b), [randn(3, 4), randn(4)])
    check_torch(lambda a, b: hl.where(hl.tensor(cond), a, b),
                lambda a, b: torch.where(torch.tensor(cond), a, b), [randn(3, 4), randn(4)])
    x = randn(20)
    x = np.where(np.abs(np.abs(x) - 0.5) < 0.05, 0.0, x)
    check_grad(lambda t: hl.clip(t, -0.5, 0.5), [x])
    # the boundaries themselves pass the gradient, as torch.clamp does
    check_torch(lambda t: hl.clip(t, -0.5, 0.5), lambda t: torch.clamp(t, -0.5, 0.5),
                [np.array([-0.5, 0.5, 0.0, 2.0])])
    check_torch(lambda t: hl.clip(t, min=0.0), lambda t: torch.clamp(t, min=0.0), [randn(6)])


def test_cast_round_trip_and_integer_cast_blocks_gradient():
    # float64 -> float32 -> float64: the gradient comes back in float64 (finite differences
    # through a float32 rounding would measure the rounding, so the check is exact instead)
    a = hl.tensor(randn(4), requires_grad=True)
    dy = randn(4)
    (hl.cast(hl.cast(a, "float32"), "float64") * hl.tensor(dy)).sum().backward()
    assert a.grad.dtype == hl.float64
    np.testing.assert_allclose(a.grad.numpy(), dy.astype(np.float32), rtol=1e-7)
    a = hl.tensor(randn(4), requires_grad=True)
    (a.astype("int64").astype("float64") + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(4))


def test_placeholder_inference_matches_real_output():
    x = randn(2, 3, 1)
    y = randn(4)
    for f in [lambda a, b: a * b, lambda a, b: (a / b).relu(), lambda a, b: hl.where(a > 0, a, b),
              lambda a, b: hl.maximum(a, b).tanh(), lambda a, b: hl.clip(a, 0, 1) + b,
              lambda a, b: a.astype("float32") * 2]:
        real = f(hl.tensor(x), hl.tensor(y))
        fake = f(hl.Placeholder(x.shape, "float64"), hl.Placeholder(y.shape, "float64"))
        assert fake.shape == real.shape and fake.dtype == real.dtype, f
