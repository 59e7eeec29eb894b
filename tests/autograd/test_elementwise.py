"""Element-wise ops: float64 finite differences for every unary op with a derivative and every
binary op (with broadcasting and non-contiguous inputs), and PyTorch CPU for the same."""
import numpy as np
import pytest

import hl
from hl.autograd import binary as B
from hl.autograd import elementwise as E
from tests.autograd.harness import check_grad, check_torch, randn

# Inputs inside each op's domain and away from its kinks (finite differences straddling a kink
# would not measure the derivative).
def away_from_zero(shape, seed=0):
    x = randn(*shape, seed=seed)
    return np.where(np.abs(x) < 0.1, 0.3, x)


DOMAIN = {
    "log": lambda s: np.abs(randn(*s)) + 0.5, "sqrt": lambda s: np.abs(randn(*s)) + 0.5,
    "rsqrt": lambda s: np.abs(randn(*s)) + 0.5, "reciprocal": lambda s: away_from_zero(s) * 2,
    "asin": lambda s: np.tanh(randn(*s)) * 0.8, "acos": lambda s: np.tanh(randn(*s)) * 0.8,
    "acosh": lambda s: np.abs(randn(*s)) + 1.5, "atanh": lambda s: np.tanh(randn(*s)) * 0.8,
    "log1p": lambda s: np.abs(randn(*s)), "tan": lambda s: np.tanh(randn(*s)),
}
KINKED = {"abs", "relu", "leaky_relu", "elu", "celu", "selu", "hard_sigmoid", "hard_swish"}
SHAPES = [(7,), (3, 4), (2, 3, 2)]


def inputs_for(name, shape):
    if name in DOMAIN:
        return DOMAIN[name](shape)
    if name in KINKED:
        x = away_from_zero(shape)
        return np.where(np.abs(np.abs(x) - 3.0) < 0.1, 2.5, x)  # hard_* kinks at +-3 too
    return randn(*shape)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(E.DERIVATIVES))
def test_unary_gradient(name, shape):
    x = inputs_for(name, shape)
    check_grad(lambda t: E.unary(name, t), [x], rtol=1e-5, atol=1e-6)


TORCH_UNARY = {
    "neg": "neg", "abs": "abs", "square": "square", "exp": "exp", "expm1": "expm1",
    "log": "log", "log1p": "log1p", "sqrt": "sqrt", "rsqrt": "rsqrt",
    "reciprocal": "reciprocal", "sin": "sin", "cos": "cos", "tan": "tan", "asin": "asin",
    "acos": "acos", "atan": "atan", "sinh": "sinh", "cosh": "cosh", "tanh": "tanh",
    "asinh": "asinh", "acosh": "acosh", "atanh": "atanh", "erf": "erf", "sigmoid": "sigmoid",
    "relu": "relu",
}


@pytest.mark.parametrize("name", sorted(TORCH_UNARY))
def test_unary_against_torch(name):
    torch = pytest.importorskip("torch")
    f = getattr(torch, TORCH_UNARY[name])
    check_torch(lambda t: getattr(hl, name)(t), f, [inputs_for(name, (4, 5))])


@pytest.mark.parametrize("name,hl_f,torch_name,kw", [
    ("leaky_relu", lambda t: hl.leaky_relu(t, 0.1), "leaky_relu", {"negative_slope": 0.1}),
    ("elu", lambda t: hl.elu(t, 0.7), "elu", {"alpha": 0.7}),
    ("celu", lambda t: hl.celu(t, 0.7), "celu", {"alpha": 0.7}),
    ("selu", hl.selu, "selu", {}),
    ("gelu", hl.gelu, "gelu", {}),
    ("gelu_tanh", lambda t: hl.gelu(t, approximate="tanh"), "gelu", {"approximate": "tanh"}),
    ("softplus", hl.softplus, "softplus", {}),
    ("softsign", hl.softsign, "softsign", {}),
    ("hard_swish", hl.hard_swish, "hardswish", {}),
    ("mish", hl.mish, "mish", {}),
    ("hard_sigmoid", lambda t: hl.hard_sigmoid(t, 1 / 6, 0.5), "hardsigmoid", {}),
])
def test_activations_against_torch(name, hl_f, torch_name, kw):
    torch = pytest.importorskip("torch")
    f = getattr(torch.nn.functional, torch_name)
    check_torch(hl_f, lambda t: f(t, **kw), [inputs_for(name, (4, 5))])


@pytest.mark.parametrize("name", ["sign", "floor", "ceil", "round", "trunc"])
def test_piecewise_constant_ops_give_zero_gradients(name):
    a = hl.tensor(randn(5) + 0.25, requires_grad=True)
    (getattr(hl, name)(a) * 3.0 + a).sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones(5))


BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 4), (4,)), ((2, 1, 4), (3, 1)), ((), (2, 3))]


@pytest.mark.parametrize("shapes", BINARY_SHAPES)
@pytest.mark.parametrize("name", ["add", "sub", "mul", "div", "maximum", "minimum", "pow",
                                  "mod", "fmod"])
def test_binary_gradient_with_broadcasting(name, shapes):
    sa, sb = shapes
    a, b = randn(*sa, seed=1), randn(*sb, seed=2)
    if name == "pow":
        a = np.abs(a) + 0.5
    if name in ("div", "mod", "fmod"):
        b = away_from_zero(sb, seed=2) * 3
    if name in ("mod", "fmod"):  # keep a / b away from the integers where they jump
        q = a / b
        a = np.where(np.abs(q - np.round(q)) < 0.05, a + 0.2 * b, a)
    check_grad(lambda x, y: B.binary(name, x, y), [a, b])


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
