"""Element-wise ops (libcore/src/ops.h HL_UNARY_* and HL_BINARY_* rows, and where) against numpy.

The kernel-against-numpy, special-value, gradient and ONNX tests of every unary op come from
its OpCase (tests/opcases/elementwise.py); this file keeps what a table cannot say: integer
and bool semantics, predicates, out= writes, bad dtypes, broadcasting of binaries.

Tolerances (relative, float32 unless said):
  - exact ops (neg, abs, sign, square, relu, floor, ceil, round, trunc, sqrt, reciprocal...):
    rtol 1e-6; the core's result is the correctly rounded float32, so the only difference
    from the float64 reference is the final rounding (<= 6e-8).
  - transcendental functions of libm (exp, log, sin, erf, ...): rtol 2e-6 (a few ulp).
  - composite activations (gelu, mish, selu, softplus, ...): rtol 1e-5 with atol 1e-6: they
    chain several libm calls and some cancel (1 + erf(x) for x << 0), which loses relative
    accuracy on tiny outputs but never absolute accuracy.
  - float64: rtol 1e-12 (exact / transcendental) and 1e-10 with atol 1e-13 (composite).
Inputs are drawn inside each function's domain; special values (0, -0, inf, -inf, nan) are
checked against numpy wherever numpy defines the answer, including the sign of zero.

Semantics that differ from numpy on purpose (and are asserted here):
  - integer division and modulo by zero give 0 (numpy gives 0 with a warning);
  - integer powers with negative exponents truncate toward zero (numpy raises);
  - true division of integers and float math on integers compute in float32 (PyTorch);
  - a float Python scalar with an integer tensor gives float32 (numpy: float64);
  - arithmetic on bool tensors raises DTypeError (numpy: logical or / and);
  - float16 and bfloat16 are storage-only on the CPU: computing in them raises DTypeError.
"""
import os
import re

import numpy as np
import pytest

import hl
from hl import errors

from tests.opcases.elementwise import UNARY as OPCASES
from tests.opcases.elementwise import _gelu_tanh

from .harness import LAYOUTS, assert_close, check_guard, check_op
from .shapes import broadcast_shapes, fixed_cases, random_shape

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
FLOATS = (np.float32, np.float64)
INTS = (np.int32, np.int64, np.uint8)
COMPUTE = FLOATS + INTS + (np.bool_,)


def _op_rows(macro):
    """The op names of one X-macro list in libcore/src/ops.h."""
    text = open(os.path.join(ROOT, "libcore", "src", "ops.h")).read()
    block = re.search(r"#define %s\(X\)(.*?)\n\n" % macro, text, re.S).group(1)
    return re.findall(r"X\(\w+, (\w+),", block)


PREDICATES = {"isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite,
              "logical_not": np.logical_not}


def test_every_unary_op_has_an_opcase():
    # the kernel, special-value, gradient and ONNX tests of each are derived from its OpCase
    core = set()
    for macro in ("HL_UNARY_FLOAT_OPS", "HL_UNARY_NUMERIC_OPS", "HL_UNARY_PREDICATE_OPS"):
        core |= set(_op_rows(macro))
    covered = {c.name for c in OPCASES} | set(PREDICATES)
    assert core == covered, core ^ covered


def test_unary_parameters_default_to_onnx_and_pytorch():
    x = np.linspace(-3, 3, 13).astype(np.float32)
    t = hl.tensor(x)
    assert_close(hl.leaky_relu(t), np.where(x >= 0, x, 0.01 * x))
    assert_close(hl.elu(t), np.where(x > 0, x, np.expm1(x)))
    assert_close(hl.hard_sigmoid(t), np.clip(0.2 * x + 0.5, 0, 1))
    assert_close(hl.gelu(t, approximate="tanh"), _gelu_tanh(x.astype(np.float64)),
                 rtol=1e-5, atol=1e-6)
    with pytest.raises(errors.ValueError, match="approximate"):
        hl.gelu(t, approximate="fast")


def test_round_is_half_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 3.5000002], dtype=np.float32)
    assert_close(hl.round(hl.tensor(x)), np.rint(x), rtol=0)


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", ["neg", "abs", "sign", "square"])
def test_unary_integer(name, dtype, rng):
    info = np.iinfo(dtype)
    extremes = np.array([info.min, info.max, 0, 1], dtype=dtype)
    x = np.concatenate([rng.integers(max(info.min, -1000), min(info.max, 1000), 40,
                                     dtype=dtype), extremes])
    ref = {"neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square}[name]
    with np.errstate(all="ignore"):
        check_op(getattr(hl, name), ref, [x.reshape(4, 11)])


@pytest.mark.parametrize("dtype", INTS + (np.bool_,), ids=lambda d: np.dtype(d).name)
def test_float_unary_on_integers_computes_in_float32(dtype):
    x = np.array([0, 1, 2, 3], dtype=dtype)
    got = hl.exp(hl.tensor(x))
    assert got.dtype is hl.float32
    assert_close(got, np.exp(x.astype(np.float32)))
    assert hl.floor(hl.tensor(x)).dtype.np == x.dtype   # rounding is the identity on integers


@pytest.mark.parametrize("dtype", COMPUTE, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(PREDICATES))
def test_unary_predicates(name, dtype, rng):
    if np.dtype(dtype).kind == "f":
        x = np.array([0, -0.0, 1.5, np.inf, -np.inf, np.nan, -2], dtype=dtype)
    elif dtype is np.bool_:
        x = np.array([True, False, True])
    else:
        x = np.array([0, 1, 2, np.iinfo(dtype).max, np.iinfo(dtype).min], dtype=dtype)
    check_op(getattr(hl, name), PREDICATES[name], [x])
    check_op(getattr(hl, name), PREDICATES[name], [rng.integers(0, 3, (3, 4)).astype(dtype)])


@pytest.mark.parametrize("dtype", [hl.float16, hl.bfloat16], ids=str)
def test_half_types_do_not_compute_on_cpu(dtype):
    t = hl.tensor([1.0, 2.0]).astype(dtype)
    with pytest.raises(errors.DTypeError, match="exp.*cast.*float32"):
        hl.exp(t)
    with pytest.raises(errors.DTypeError, match="isnan"):
        hl.isnan(t)
    with pytest.raises(errors.DTypeError, match="add"):
        t + t


def test_unary_rejects_wrong_dtypes():
    with pytest.raises(errors.DTypeError, match="neg.*bool"):
        hl.neg(hl.tensor([True, False]))
    with pytest.raises(errors.DTypeError, match="sqrt"):
        hl._core.unary(hl._core.OPS["sqrt"], hl.tensor([1, 2])._h)


@pytest.mark.parametrize("name", ["exp", "neg", "isnan"])
def test_unary_out_writes_only_the_output(name, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    odt = hl.bool if name == "isnan" else hl.float32
    out = check_guard(lambda o: getattr(hl, name)(hl.tensor(x), out=o), (3, 5), dtype=odt)
    assert_close(out, PREDICATES[name](x) if name in PREDICATES else getattr(np, {
        "neg": "negative"}.get(name, name))(x))


@pytest.mark.parametrize("view", ["T", "reversed", "strided"])
def test_out_may_be_a_non_contiguous_view(view, rng):
    """Outputs given as views of any layout are written element by element in place; nothing
    outside the view changes."""
    make = {"T": lambda o: o.reshape(4, 3).T, "reversed": lambda o: o.reshape(3, 4).flip(1),
            "strided": lambda o: o.reshape(6, 4)[::2]}[view]
    n = 24 if view == "strided" else 12
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4,)).astype(np.float32)
    for f, ref in ((lambda o: hl.exp(LAYOUTS["transposed"](a), out=make(o)), np.exp(a)),
                   (lambda o: hl.add(LAYOUTS["transposed"](a), hl.tensor(b), out=make(o)), a + b),
                   (lambda o: hl.where(hl.tensor(a > 0), 1.0, hl.tensor(a), out=make(o)),
                    np.where(a > 0, 1, a))):
        out = check_guard(f, (n,))
        assert_close(make(out), ref, rtol=2e-6)


def test_unary_out_may_be_the_input():
    x = hl.tensor([1.0, -2.0, 3.0])
    y = hl.neg(x, out=x)
    assert y.shares_memory(x)
    assert_close(x, [-1.0, 2.0, -3.0])


def test_unary_out_of_the_wrong_shape_or_dtype_is_refused():
    x = hl.tensor([1.0, 2.0])
    with pytest.raises(errors.ShapeError, match="exp.*output"):
        hl.exp(x, out=hl.empty(3))
    with pytest.raises(errors.DTypeError, match="exp.*output"):
        hl.exp(x, out=hl.empty(2, dtype=hl.float64))
    t = hl.tensor([1, 2])
    with pytest.raises(errors.DTypeError, match="add.*int64.*float32"):
        t += 1.5


# ---- binary ------------------------------------------------------------------------------

def _int_pow(a, b):
    """numpy's power for b >= 0; for b < 0, what hl gives: 1 ** b = 1, (-1) ** b = +-1, 0
    otherwise (truncation toward zero; 0 ** negative is also 0)."""
    a64, b64 = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
    with np.errstate(all="ignore"):
        pos = np.power(a64, np.where(b64 >= 0, b64, 0))
    neg = np.where(a64 == 1, 1, np.where(a64 == -1, np.where(b64 % 2 == 1, -1, 1), 0))
    return np.where(b64 >= 0, pos, neg).astype(np.result_type(a, b))


def _int_div(a, b):
    with np.errstate(all="ignore"):
        return np.where(b == 0, 0, np.floor_divide(a, np.where(b == 0, 1, b))).astype(
            np.result_type(a, b))


def _int_mod(f):
    def ref(a, b):
        with np.errstate(all="ignore"):
            return np.where(b == 0, 0, f(a, np.where(b == 0, 1, b))).astype(np.result_type(a, b))
    return ref


# name: (hl function, numpy reference for floats, for integers)
ARITH = {
    "add": (hl.add, np.add, np.add),
    "sub": (hl.sub, np.subtract, np.subtract),
    "mul": (hl.mul, np.multiply, np.multiply),
    "div": (hl.floor_divide, None, _int_div),      # the core's div on integers floors
    "true_divide": (hl.true_divide, np.true_divide, None),
    "pow": (hl.pow, np.power, _int_pow),
    "maximum": (hl.maximum, np.maximum, np.maximum),
    "minimum": (hl.minimum, np.minimum, np.minimum),
    "mod": (hl.mod, np.mod, _int_mod(np.mod)),
    "fmod": (hl.fmod, np.fmod, _int_mod(np.fmod)),
    "relu_grad": (hl.ops.relu_grad, lambda a, b: np.where(b > 0, a, 0).astype(a.dtype),
                  lambda a, b: np.where(b > 0, a, 0).astype(np.result_type(a, b))),
}
COMPARE = {"eq": np.equal, "ne": np.not_equal, "lt": np.less, "le": np.less_equal,
           "gt": np.greater, "ge": np.greater_equal, "logical_and": np.logical_and,
           "logical_or": np.logical_or, "logical_xor": np.logical_xor}


def test_every_binary_op_is_covered():
    core = set(_op_rows("HL_BINARY_ARITH_OPS")) | set(_op_rows("HL_BINARY_BOOL_OPS"))
    assert core == (set(ARITH) - {"true_divide"}) | set(COMPARE)


def _values(rng, dtype, shape, nonzero=False, small=False):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        v = rng.uniform(-5, 5, size=shape)
        if nonzero:
            v = np.where(np.abs(v) < 0.25, 1.0, v)
        return v.astype(dtype)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    hi = 4 if small else 50
    lo = 0 if dtype.kind == "u" else -hi
    return rng.integers(lo, hi, size=shape).astype(dtype)


def _pairs(rng, count=6):
    return fixed_cases() + [tuple(broadcast_shapes(rng)) for _ in range(count)]


ARITH_PARAMS = [(n, d) for n in sorted(ARITH) for d in FLOATS + INTS
                if ARITH[n][1 if np.dtype(d).kind == "f" else 2] is not None]


@pytest.mark.parametrize("name,dtype", ARITH_PARAMS,
                         ids=[f"{n}-{np.dtype(d).name}" for n, d in ARITH_PARAMS])
def test_binary_arith(name, dtype, rng):
    f, fref, iref = ARITH[name]
    ref = fref if np.dtype(dtype).kind == "f" else iref
    rtol = 2e-6 if name == "pow" and dtype is np.float32 else 1e-6
    for sa, sb in _pairs(rng):
        a = _values(rng, dtype, sa, small=name == "pow")
        b = _values(rng, dtype, sb, nonzero=name in ("true_divide", "mod", "fmod"),
                    small=name == "pow")
        if name == "pow" and np.dtype(dtype).kind == "f":
            a = np.abs(a)   # real powers of negative bases are nan in both; keep it numeric
        with np.errstate(all="ignore"):
            check_op(f, ref, [a, b], rtol=rtol, atol=1e-6)


@pytest.mark.parametrize("dtype", COMPUTE, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_binary_compare_and_logic(name, dtype, rng):
    for sa, sb in _pairs(rng, 3):
        a = _values(rng, dtype, sa, small=True)
        b = _values(rng, dtype, sb, small=True)
        check_op(getattr(hl, name), COMPARE[name], [a, b])


def test_comparisons_with_nan():
    a = np.array([np.nan, 1.0, np.nan], dtype=np.float32)
    b = np.array([np.nan, np.nan, 2.0], dtype=np.float32)
    for name, ref in COMPARE.items():
        check_op(getattr(hl, name), ref, [a, b], layouts=("contiguous",))


@pytest.mark.parametrize("dtype", INTS, ids=lambda d: np.dtype(d).name)
def test_integer_division_and_modulo_by_zero_give_zero(dtype):
    """hl defines x // 0, x % 0 and fmod(x, 0) as 0 for integers: the kernel never traps
    (numpy also gives 0, with a RuntimeWarning)."""
    a = hl.tensor(np.array([7, 0, 3], dtype=dtype))
    z = hl.tensor(np.array([0, 0, 0], dtype=dtype))
    for f in (hl.floor_divide, hl.mod, hl.fmod):
        np.testing.assert_array_equal(f(a, z).numpy(), [0, 0, 0])
    np.testing.assert_array_equal((a // 0).numpy(), [0, 0, 0])


def test_integer_floor_division_and_modulo_signs():
    a = np.array([7, -7, 7, -7, 0, -1], dtype=np.int64)
    b = np.array([2, 2, -2, -2, 3, 5], dtype=np.int64)
    np.testing.assert_array_equal(hl.floor_divide(hl.tensor(a), hl.tensor(b)).numpy(), a // b)
    np.testing.assert_array_equal(hl.mod(hl.tensor(a), hl.tensor(b)).numpy(), a % b)
    np.testing.assert_array_equal(hl.fmod(hl.tensor(a), hl.tensor(b)).numpy(), np.fmod(a, b))


@pytest.mark.parametrize("dtype", (np.int32, np.int64), ids=lambda d: np.dtype(d).name)
def test_integer_extremes_wrap_like_numpy(dtype):
    info = np.iinfo(dtype)
    a = np.array([info.min, info.max, info.min, info.max, info.min], dtype=dtype)
    b = np.array([-1, 1, -1, 2, 1], dtype=dtype)
    with np.errstate(all="ignore"):
        for f, ref in ((hl.add, np.add), (hl.sub, np.subtract), (hl.mul, np.multiply)):
            np.testing.assert_array_equal(f(hl.tensor(a), hl.tensor(b)).numpy(), ref(a, b))
    # INT_MIN // -1 overflows: hl wraps to INT_MIN (numpy: the same, with a warning)
    q = hl.floor_divide(hl.tensor(a[:1]), hl.tensor(b[:1])).numpy()
    assert q[0] == info.min
    assert hl.mod(hl.tensor(a[:1]), hl.tensor(b[:1])).numpy()[0] == 0


def test_integer_pow_with_negative_exponents_truncates():
    a = hl.tensor(np.array([2, 1, -1, -1, 0, 5, -3], dtype=np.int64))
    b = hl.tensor(np.array([-1, -5, -3, -2, -1, 0, 3], dtype=np.int64))
    np.testing.assert_array_equal(hl.pow(a, b).numpy(), [0, 1, -1, 1, 0, 1, -27])


def test_maximum_minimum_propagate_nan():
    a = np.array([1.0, np.nan, 3.0, np.nan, -np.inf], dtype=np.float64)
    b = np.array([np.nan, 2.0, 1.0, np.nan, np.inf], dtype=np.float64)
    check_op(hl.maximum, np.maximum, [a, b])
    check_op(hl.minimum, np.minimum, [a, b])


def test_true_divide_of_integers_is_float32():
    a = np.array([7, -7, 1], dtype=np.int32)
    b = np.array([2, 2, 0], dtype=np.int32)
    got = hl.tensor(a) / hl.tensor(b)
    assert got.dtype is hl.float32
    with np.errstate(all="ignore"):
        assert_close(got, (a / b).astype(np.float32))


def test_float_floor_divide_is_floor_of_the_quotient():
    a = np.array([7.5, -7.5, 1.0, 0.0], dtype=np.float32)
    b = np.array([2.0, 2.0, 0.0, 3.0], dtype=np.float32)
    with np.errstate(all="ignore"):
        assert_close(hl.tensor(a) // hl.tensor(b), np.floor(a / b))


@pytest.mark.parametrize("name", ["add", "sub", "mul", "pow", "maximum", "minimum", "mod"])
def test_arithmetic_on_bool_tensors_is_refused(name):
    t = hl.tensor([True, False])
    with pytest.raises(errors.DTypeError, match=f"{name}.*bool"):
        getattr(hl, name)(t, t)


# ---- promotion ---------------------------------------------------------------------------

MIXED = (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_)


@pytest.mark.parametrize("da", MIXED, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("db", MIXED, ids=lambda d: np.dtype(d).name)
def test_mixed_dtype_tensors_promote_like_numpy(da, db, rng):
    a = _values(rng, da, (3, 4), small=True)
    b = _values(rng, db, (4,), small=True)
    check_op(hl.lt, np.less, [a, b])
    if da is np.bool_ and db is np.bool_:
        return
    check_op(hl.add, np.add, [a, b], layouts=("contiguous", "strided"))
    check_op(hl.maximum, np.maximum, [a, b], layouts=("contiguous",))


# (tensor dtype, scalar) -> the result dtype hl gives; numpy's (NEP 50) agrees except where
# marked: a float scalar with an integer or bool tensor gives float32, PyTorch's default.
SCALARS = [
    (np.float32, 2, np.float32), (np.float32, 2.5, np.float32), (np.float64, 3, np.float64),
    (np.float64, 0.5, np.float64), (np.int32, 3, np.int32), (np.int64, -4, np.int64),
    (np.uint8, 7, np.uint8), (np.int32, 1.5, np.float32), (np.uint8, 0.5, np.float32),
    (np.bool_, 2, np.int64), (np.bool_, 1.5, np.float32), (np.bool_, True, np.bool_),
    (np.int32, True, np.int32),
]


@pytest.mark.parametrize("dtype,scalar,result", SCALARS,
                         ids=[f"{np.dtype(d).name}-{s!r}" for d, s, _ in SCALARS])
def test_python_scalars_are_weak(dtype, scalar, result, rng):
    x = _values(rng, dtype, (2, 3), small=True)
    t = hl.tensor(x)
    tx = x.astype(result)
    sc = np.asarray(scalar).astype(result)
    ops = [(lambda u, s: u * s, np.multiply), (lambda u, s: s - u, lambda u, s: s - u),
           (lambda u, s: hl.maximum(u, s), np.maximum)]
    if np.dtype(result).kind == "b":
        ops = [(lambda u, s: hl.logical_or(u, s), np.logical_or)]
    for f, ref in ops:
        got = f(t, scalar)
        assert got.dtype.np == np.dtype(result), (got.dtype, result)
        assert_close(got, ref(tx, sc))
    assert (t < scalar).dtype is hl.bool
    np.testing.assert_array_equal((t < scalar).numpy(), x < scalar)


def test_integer_scalars_are_exact_and_range_checked():
    # an int64 scalar keeps all its 64 bits (it does not go through a double)
    big = 2 ** 53 + 1
    np.testing.assert_array_equal((hl.tensor([0]) + big).numpy(), [big])
    np.testing.assert_array_equal((hl.tensor([0]) - (2 ** 63 - 1)).numpy(), [-(2 ** 63 - 1)])
    # a scalar the tensor's dtype cannot hold is refused, as numpy does (NEP 50)
    u8 = hl.tensor(np.array([1, 2], dtype=np.uint8))
    with pytest.raises(errors.ValueError, match="300.*uint8"):
        u8 + 300
    with pytest.raises(errors.ValueError, match="uint8"):
        u8 * -1
    with pytest.raises(errors.ValueError, match="int64"):
        hl.tensor([1]) + 2 ** 64
    np.testing.assert_array_equal((u8 + 255).numpy(), np.array([1, 2], np.uint8) + 255)


def test_reflected_operators_with_scalars():
    x = np.array([1.0, 2.0, 4.0], dtype=np.float32)
    t = hl.tensor(x)
    assert_close(2 - t, 2 - x)
    assert_close(2 / t, 2 / x)
    assert_close(2 ** t, 2 ** x)
    assert_close(3 % t, 3 % x)
    assert_close(7 // t, 7 // x)
    np.testing.assert_array_equal((1 < t).numpy(), 1 < x)


def test_numpy_arrays_as_operands():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = hl.tensor(x)
    got = t + x
    assert isinstance(got, hl.Tensor)
    assert_close(got, x + x)
    got = x * t        # __array_priority__ hands the operator to hl
    assert isinstance(got, hl.Tensor)
    assert_close(got, x * x)


def test_in_place_operators_keep_the_storage():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = hl.tensor(x)
    keep = t
    t += 1
    t *= hl.tensor([1.0, 2.0, 3.0])
    t -= 0.5
    t /= 2
    assert t is keep
    assert_close(t, ((x + 1) * [1, 2, 3] - 0.5) / 2)


def test_binary_incompatible_shapes():
    with pytest.raises(errors.ShapeError, match=r"add: shapes \(2, 3\) and \(4,\)"):
        hl.tensor(np.zeros((2, 3))) + hl.tensor(np.zeros(4))


@pytest.mark.parametrize("name", ["add", "lt"])
def test_binary_out_writes_only_the_output(name, rng):
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3,)).astype(np.float32)
    odt = hl.bool if name == "lt" else hl.float32
    out = check_guard(lambda o: getattr(hl, name)(hl.tensor(a), hl.tensor(b), out=o), (4, 3),
                      dtype=odt)
    assert_close(out, {"add": np.add, "lt": np.less}[name](a, b))


def test_binary_out_overlapping_an_input_is_refused():
    x = hl.tensor(np.arange(6, dtype=np.float32))
    with pytest.raises(errors.ValueError, match="add.*overlaps"):
        hl.add(x[:5], x[:5], out=x[1:])
    hl.add(x, x, out=x)   # the identical view is fine: each element reads before it writes
    assert_close(x, 2 * np.arange(6))


# ---- where -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", COMPUTE + (np.float16,), ids=lambda d: np.dtype(d).name)
def test_where(dtype, rng):
    for _ in range(6):
        sc, sa, sb = broadcast_shapes(rng, 3)
        c = rng.random(sc) < 0.5
        a = _values(rng, dtype, sa) if dtype is not np.float16 else rng.random(sa).astype(dtype)
        b = _values(rng, dtype, sb) if dtype is not np.float16 else rng.random(sb).astype(dtype)
        check_op(hl.where, np.where, [c, a, b])


def test_where_conditions_and_scalars():
    x = np.array([[1.0, -2.0], [3.0, -4.0]], dtype=np.float32)
    t = hl.tensor(x)
    assert_close(hl.where(t > 0, t, 0.0), np.where(x > 0, x, 0))
    assert_close(hl.where(t > 0, 1.0, t), np.where(x > 0, 1, x))
    # a uint8 condition is taken as is, other dtypes are tested against zero
    assert_close(hl.where(hl.tensor(np.array([1, 0], np.uint8)), t, -t), np.where([1, 0], x, -x))
    assert_close(hl.where(hl.tensor([2.0, 0.0]), t, -t), np.where([2.0, 0.0], x, -x))
    assert_close(hl.where([True, False], t, -t), np.where([True, False], x, -x))


def test_where_errors():
    t = hl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(errors.ShapeError, match="where"):
        hl.where(hl.tensor([True, False]), t, t)
    with pytest.raises(errors.DTypeError, match="where.*condition"):
        hl._core.call("where", hl.tensor([1, 0])._h, t._h, t._h, hl._core.OUT)


def test_where_out_writes_only_the_output(rng):
    c = rng.random((2, 5)) < 0.5
    a = rng.standard_normal((2, 5)).astype(np.float32)
    out = check_guard(lambda o: hl.where(hl.tensor(c), hl.tensor(a), 0.0, out=o), (2, 5))
    assert_close(out, np.where(c, a, 0))


# ---- every layout, many shapes: a broad sweep -----------------------------------------------

@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_eight_dimensional_broadcasting(layout, rng):
    a = rng.standard_normal((1, 2, 1, 2, 1, 2, 1, 2)).astype(np.float32)
    b = rng.standard_normal((2, 1, 2, 1, 2, 1, 2, 1)).astype(np.float32)
    got = hl.add(LAYOUTS[layout](a), LAYOUTS[layout](b))
    assert_close(got, a + b)
