"""Bad and odd input, at random: the property every entry point keeps.

Hypothesis draws shapes (0 to 8 axes, size-0 and size-1 axes; 9 and more must raise
ShapeError), dtypes (all 8), axes (out of range too), shapes that do not broadcast, NaN and
Inf data, negative sizes, and feeds them through the Python API. For every draw:
  - numpy's answer is computed (numpy raising counts as an answer: "this input is bad");
  - hl either returns numpy's answer, or raises an hl.errors.HLError whose message names the
    op; any other exception, or a crash, fails.
  - a case marked strict also says when hl must succeed: whenever numpy does and the draw is
    inside what hl supports (e.g. no float16 compute on the CPU, at most 8 dimensions).

The cases are a table (CASES): adding an op is one Case(...) entry: a name, a strategy that
draws the arguments, the hl call, the numpy reference, and the op names an error message
may use; axis_case and tensors_case build the common shapes of entry in one line, e.g.
    axis_case("cumsum", lambda t, ax: hl.cumsum(t, ax), lambda a, ax: np.cumsum(a, ax)),
Where hl deliberately differs from numpy (float -> int casts saturate, integer division by
zero is 0...) the reference encodes hl's documented rule.

Environment: HL_BAD_INPUT_EXAMPLES (default 60) examples per case; HL_BAD_INPUT_RANDOM=1
draws fresh examples each run instead of the same derandomized ones.

tests/core_calls.py does the same for the C entry points directly (NULL pointers, invalid op
and dtype codes), run in a subprocess so that a crash is reported, not fatal.
"""
import os
import subprocess
import sys
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors
from hl._tensor import _wrap

from tests.opcases.elementwise import UNARY as UNARY_CASES
from tests.ops.test_elementwise import PREDICATES

UNARY = {c.name: c for c in UNARY_CASES}  # the element-wise OpCases by name

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(d) for d in ("float32", "float64", "int32", "int64", "uint8", "bool",
                                "float16")] + [BF16]
COMPUTE = {np.dtype(d) for d in ("float32", "float64", "int32", "int64", "uint8", "bool")}
HL = {d: hl.dtype(d) if d != BF16 else hl.bfloat16 for d in DTYPES}
EXAMPLES = int(os.environ.get("HL_BAD_INPUT_EXAMPLES", "60"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None,
                    derandomize=os.environ.get("HL_BAD_INPUT_RANDOM") != "1",
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


class Skip(Exception):
    """Raised by a reference where the comparison means nothing (hl still must not crash)."""


# ---- strategies -----------------------------------------------------------------------------

dtypes = st.sampled_from(DTYPES)
sides = st.sampled_from([0, 1, 1, 2, 3])
shapes = st.lists(sides, min_size=0, max_size=8).map(tuple)
axes = st.integers(-10, 10)
seeds = st.integers(0, 2 ** 32 - 1)
SPECIAL = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0, 0.5])


def make_array(dtype, shape, seed):
    """Values of dtype: normals and special values for floats, small values and the
    extremes for integers."""
    rng = np.random.default_rng(seed)
    if dtype.kind == "b":
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        v = rng.integers(max(info.min, -100), min(info.max, 100), shape, endpoint=True)
        ext = rng.choice(np.array([info.min, info.max, 0], dtype=np.int64), shape)
        return np.where(rng.random(shape) < 0.1, ext, v).astype(dtype)
    v = rng.standard_normal(shape) * 3
    spec = rng.choice(SPECIAL, shape)
    return np.where(rng.random(shape) < 0.25, spec, v).astype(dtype)


@st.composite
def arrays(draw, dtype=dtypes, shape=shapes):
    d = draw(dtype) if isinstance(dtype, st.SearchStrategy) else np.dtype(dtype)
    s = draw(shape) if isinstance(shape, st.SearchStrategy) else shape
    return make_array(d, s, draw(seeds))


@st.composite
def shape_pairs(draw, n=2):
    """Shapes that broadcast together (mostly), or random ones (which mostly do not)."""
    if draw(st.booleans()):
        full = draw(st.lists(sides, max_size=6))
        out = []
        for _ in range(n):
            drop = draw(st.integers(0, len(full)))
            out.append(tuple(1 if draw(st.integers(0, 3)) == 0 else s for s in full[drop:]))
        return out
    return [draw(st.lists(sides, max_size=6).map(tuple)) for _ in range(n)]


def tensor(a):
    return hl.tensor(a) if a.dtype != BF16 else hl.tensor(a, dtype=hl.bfloat16)


# ---- comparing ---------------------------------------------------------------------------------

def assert_same(got, want, rtol=1e-4, atol=1e-5):
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, rtol, atol)
        return
    g = got.numpy() if isinstance(got, hl.Tensor) else np.asarray(got)
    w = np.asarray(want)
    assert g.shape == w.shape, f"shape {g.shape}, numpy's {w.shape}"
    if w.dtype.kind in "biu" and g.dtype.kind in "biu":
        np.testing.assert_array_equal(g, w)
    else:
        with np.errstate(invalid="ignore"):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol,
                                       atol=atol, equal_nan=True)


@dataclass
class Case:
    """One op's property test.

    draw: a strategy giving the arguments (a tuple); run: hl's call on them; ref: numpy's
    answer on them (raising = "bad input"; raising Skip = no comparison); names: fragments,
    one of which an hl error message must contain; strict: a predicate on the arguments saying
    hl must succeed whenever numpy does."""
    name: str
    draw: st.SearchStrategy
    run: callable
    ref: callable
    names: tuple = ()
    strict: callable = None
    compare: callable = assert_same
    examples: int = field(default=EXAMPLES)


def check(case, args):
    try:
        with np.errstate(all="ignore"):
            want, numpy_ok = case.ref(*args), True
    except Skip:
        want, numpy_ok = None, None
    except Exception:                          # noqa: BLE001 - numpy refusing is an answer
        want, numpy_ok = None, False
    try:
        got = case.run(*args)
    except errors.HLError as e:
        names = case.names or (case.name,)
        assert any(n in str(e) for n in names), f"{case.name}: message {str(e)!r} names " \
                                                 f"none of {names}"
        if numpy_ok and case.strict is not None and case.strict(*args):
            raise AssertionError(f"{case.name}: numpy accepts {args!r} but hl raised "
                                 f"{type(e).__name__}: {e}") from e
        return
    assert numpy_ok is not False, f"{case.name}: numpy refuses {args!r}, hl returned {got!r}"
    if numpy_ok:
        case.compare(got, want)


# ---- the references ------------------------------------------------------------------------------

def unary_ref(name, a):
    if a.dtype.kind == "b" and name in ("neg", "abs", "sign", "square"):
        raise TypeError("no arithmetic on bool")
    if name in PREDICATES:
        return PREDICATES[name](a)
    if a.dtype.kind in "iub" and name in ("floor", "ceil", "round", "trunc"):
        return a
    if a.dtype.kind in "iu" and name in ("neg", "abs", "sign", "square"):
        return {"neg": np.negative, "abs": np.abs, "sign": np.sign, "square": np.square}[name](a)
    d = np.dtype(np.float32) if a.dtype.kind in "iub" else a.dtype
    return UNARY[name].reference(a.astype(d).astype(np.float64)).astype(d)


def unary_run(name, a):
    f = UNARY[name].call if name in UNARY else getattr(hl, name)
    return f(tensor(a))


def _half(*arrays):
    return any(a.dtype not in COMPUTE for a in arrays)


BINARY = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "maximum": np.maximum,
          "minimum": np.minimum, "eq": np.equal, "ne": np.not_equal, "lt": np.less,
          "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
          "logical_and": np.logical_and, "logical_or": np.logical_or,
          "logical_xor": np.logical_xor, "true_divide": np.true_divide,
          "floor_divide": np.floor_divide, "mod": np.mod, "fmod": np.fmod, "pow": np.power}
ARITH = {"add", "sub", "mul", "maximum", "minimum", "true_divide", "floor_divide", "mod",
         "fmod", "pow"}


def binary_ref(name, a, b):
    d = hl.dtypes.promote(HL[a.dtype], HL[b.dtype]).np
    if name == "true_divide" and d.kind in "iub":
        d = np.dtype(np.float32)        # integers and bools divide in float32 (PyTorch)
    if name in ARITH and d.kind == "b":
        raise TypeError("hl: no arithmetic on bool")
    x, y = np.asarray(a).astype(d), np.asarray(b).astype(d)
    np.broadcast_shapes(x.shape, y.shape)
    if name in ("floor_divide", "mod", "pow") and d.kind == "f":
        raise Skip  # float floor(a / b) and mod round differently near integers; pow on nan
    if name in ("floor_divide", "mod", "fmod") and d.kind in "iu":
        safe = np.where(y == 0, 1, y)
        return np.where(y == 0, 0, BINARY[name](x, safe))
    if name == "pow" and d.kind in "iu":
        raise Skip  # negative exponents truncate (tests/ops/test_elementwise.py)
    return BINARY[name](x, y)


def binary_strict(name, a, b):
    d = hl.dtypes.promote(HL[a.dtype], HL[b.dtype]).np
    if name == "true_divide" and d.kind in "iub":
        return True
    return d in COMPUTE and not (name in ARITH and d.kind == "b")


def sat_cast(a, dtype):
    """hl's cast: numpy's, except float -> integer truncates, saturates and sends NaN to 0."""
    if a.dtype.kind == "f" or a.dtype == BF16:
        if dtype.kind in "iu":
            info = np.iinfo(dtype)
            v = a.astype(np.float64)
            out = np.zeros(v.shape, dtype=dtype)
            out[v >= info.max] = info.max
            out[v <= info.min] = info.min
            mid = (v > info.min) & (v < info.max)
            out[mid] = np.trunc(v[mid]).astype(dtype)
            return out
    if dtype == BF16:
        return a.astype(np.float64).astype(np.float32).astype(BF16)
    return a.astype(dtype)


def cast_compare(got, want):
    g = got.numpy()
    assert g.dtype == want.dtype and g.shape == want.shape
    with np.errstate(invalid="ignore"):
        np.testing.assert_array_equal(g.astype(np.float64) if g.dtype == BF16 else g,
                                      want.astype(np.float64) if want.dtype == BF16 else want)


def fill_ref(shape, dtype, value):
    if len(shape) > 8:
        raise ValueError("too many dims")
    if dtype.kind in "iu" and isinstance(value, int) and not isinstance(value, bool):
        info = np.iinfo(dtype)
        if not info.min <= value <= info.max:
            raise OverflowError("out of range")
        return np.full(shape, value, dtype=dtype)
    return sat_cast(np.full(shape, value, dtype=np.float64), dtype)


def _np_expand(a, shape):
    lead = len(shape) - a.ndim
    if any(s == -1 for s in shape[:max(lead, 0)]):
        raise ValueError("-1 on a new axis")
    target = tuple(a.shape[i - lead] if s == -1 and i >= lead else s for i, s in enumerate(shape))
    return np.broadcast_to(a, target)


def _np_split(a, sizes, axis):
    if not -a.ndim <= axis < a.ndim:
        raise IndexError("axis out of range")
    if any(s < 0 for s in sizes) or sum(sizes) != a.shape[axis]:
        raise ValueError("bad sizes")
    return np.split(a, np.cumsum(sizes)[:-1], axis)


@st.composite
def index_keys(draw, shape):
    key = []
    for n in shape[:draw(st.integers(0, len(shape) + 1))]:
        kind = draw(st.integers(0, 3))
        if kind == 0:
            key.append(draw(st.integers(-n - 2, n + 2)))
        elif kind == 1:
            key.append(None)
        else:
            bound = st.one_of(st.none(), st.integers(-n - 3, n + 3))
            key.append(slice(draw(bound), draw(bound), draw(st.sampled_from([None, -3, -1, 1, 2]))))
    if draw(st.booleans()):
        key.insert(draw(st.integers(0, len(key))), Ellipsis)
    return tuple(key)


@st.composite
def getitem_args(draw):
    a = draw(arrays(st.sampled_from([np.dtype("float32"), np.dtype("int64")]),
                    st.lists(sides, max_size=5).map(tuple)))
    return a, draw(index_keys(a.shape))


def _refuse():
    raise ValueError("numpy would refuse this too")


def _view_run(f):
    """Runs f on a transposed hl tensor (views of views are the interesting case)."""
    def run(a, *rest):
        return f(tensor(np.asarray(a.T, order="C")).T, *rest)
    return run


# ---- shorthands for the common kinds of op ------------------------------------------------

def axis_case(name, run, ref, dtype=dtypes, shape=shapes, names=None, strict=None, **kw):
    """An op of one tensor and one axis (softmax, cumsum, argmax...): run(t, axis) against
    ref(a, axis) on arrays of any dtype and shape, and axes in [-10, 10]. For example
        axis_case("cumsum", lambda t, ax: hl.cumsum(t, ax), lambda a, ax: np.cumsum(a, ax))"""
    return Case(name, st.tuples(arrays(dtype, shape), axes),
                lambda a, ax: run(tensor(a), ax), ref, names=names or (name,), strict=strict, **kw)


def tensors_case(name, n, run, ref, dtype=dtypes, names=None, strict=None, **kw):
    """An op of n tensors whose shapes mostly broadcast together (matmul, concat of a list...):
    run(*tensors) against ref(*arrays)."""
    return Case(name, shape_pairs(n).flatmap(lambda s: st.tuples(
        *[arrays(dtype, st.just(x)) for x in s])),
        lambda *a: run(*[tensor(x) for x in a]), ref, names=names or (name,), strict=strict, **kw)


# ---- the table -----------------------------------------------------------------------------

UNARY_NAMES = sorted(set(UNARY) | set(PREDICATES))
small = st.lists(sides, max_size=4).map(tuple)

CASES = [
    Case("unary", st.tuples(st.sampled_from(UNARY_NAMES), arrays(shape=small)),
         unary_run, unary_ref, names=tuple(UNARY_NAMES),
         strict=lambda n, a: a.dtype in COMPUTE and not (a.dtype.kind == "b" and n in (
             "neg", "abs", "sign", "square"))),
    Case("binary", shape_pairs().flatmap(lambda s: st.tuples(
        st.sampled_from(sorted(BINARY)), arrays(shape=st.just(s[0])), arrays(shape=st.just(s[1])))),
         lambda n, a, b: getattr(hl, n)(tensor(a), tensor(b)), binary_ref,
         names=tuple(BINARY) + ("div", "cast"), strict=binary_strict),
    Case("binary scalar", st.tuples(st.sampled_from(["add", "mul", "lt", "maximum"]),
                                    arrays(shape=small),
                                    st.sampled_from([0, 3, -1, 2.5, float("nan"), float("inf"),
                                                     True, 300, -(2 ** 40), 2 ** 70])),
         lambda n, a, s: getattr(hl, n)(tensor(a), s),
         lambda n, a, s: _scalar_ref(n, a, s), names=("add", "mul", "lt", "maximum", "range"),
         strict=lambda n, a, s: a.dtype in COMPUTE and not (n in ARITH and a.dtype.kind == "b"
                                                             and isinstance(s, bool))),
    Case("where", shape_pairs(3).flatmap(lambda s: st.tuples(
        arrays(st.sampled_from([np.dtype("bool"), np.dtype("uint8"), np.dtype("float32")]),
               st.just(s[0])),
        arrays(shape=st.just(s[1])), arrays(shape=st.just(s[2])))),
         lambda c, a, b: hl.where(tensor(c), tensor(a), tensor(b)),
         lambda c, a, b: np.where(c, *(x.astype(hl.dtypes.promote(HL[a.dtype], HL[b.dtype]).np)
                                       for x in (a, b))),
         names=("where",), strict=lambda c, a, b: True),
    Case("cast", st.tuples(arrays(shape=small), dtypes),
         lambda a, d: tensor(a).astype(HL[d]), sat_cast, names=("cast",),
         strict=lambda a, d: True, compare=cast_compare),
    Case("fill", st.tuples(st.lists(st.integers(-1, 3), max_size=10).map(tuple), dtypes,
                           st.sampled_from([0, 1, -3, 255, 256, 2 ** 40, -(2 ** 63), 2 ** 64, 0.5,
                                            -2.5, 1e300, float("nan"), float("inf"),
                                            -float("inf"), True])),
         lambda s, d, v: hl.full(s, v, dtype=HL[d]), fill_ref,
         names=("full", "tensor_empty", "negative size", "dimensions"),
         strict=lambda s, d, v: len(s) <= 8, compare=cast_compare),
    Case("zeros", st.tuples(st.lists(st.integers(-2, 3), max_size=11).map(tuple)),
         lambda s: hl.zeros(*s), lambda s: np.zeros(s, np.float32),
         names=("tensor_empty",), strict=lambda s: len(s) <= 8),
    Case("reshape", st.tuples(arrays(shape=shapes), st.lists(st.integers(-2, 6), max_size=10)),
         _view_run(lambda t, s: t.reshape(*s)), lambda a, s: np.reshape(a, s),
         names=("reshape",), strict=lambda a, s: len(s) <= 8 and min(s, default=0) >= -1),
    Case("view", st.tuples(arrays(shape=shapes), st.lists(st.integers(-1, 6), max_size=8)),
         _view_run(lambda t, s: t.view(*s)), lambda a, s: np.reshape(a.T.copy().T, s, copy=False),
         names=("reshape",), strict=lambda a, s: True),
    Case("permute", st.tuples(arrays(shape=shapes), st.lists(axes, max_size=9)),
         _view_run(lambda t, p: t.permute(*p)), lambda a, p: np.transpose(a, p),
         names=("permute",), strict=lambda a, p: True),
    Case("getitem", getitem_args(), lambda a, k: tensor(a)[k], lambda a, k: a[k],
         names=("index", "slice", "select", "ellipsis"), strict=lambda a, k: np.ndim(a[k]) <= 8),
    Case("select", st.tuples(arrays(shape=shapes), axes, st.integers(-5, 5)),
         lambda a, ax, i: _select(tensor(a), ax, i),
         lambda a, ax, i: np.take(a, i, axis=ax) if a.ndim and -a.shape[ax] <= i < a.shape[ax]
         else _refuse(),
         names=("select",), strict=lambda a, ax, i: True),
    Case("expand", st.tuples(arrays(shape=st.lists(sides, max_size=4).map(tuple)),
                             st.lists(st.integers(-2, 3), max_size=10)),
         _view_run(lambda t, s: t.expand(*s)), _np_expand, names=("expand",),
         strict=lambda a, s: len(s) <= 8),
    axis_case("unsqueeze", lambda t, ax: t.unsqueeze(ax), np.expand_dims,
              strict=lambda a, ax: a.ndim < 8),
    tensors_case("where (one dtype)", 3, lambda c, a, b: hl.where(c, a, b), np.where,
                 dtype=st.just(np.dtype("float64")), names=("where",),
                 strict=lambda c, a, b: True),
    Case("squeeze", st.tuples(arrays(shape=shapes), st.lists(axes, max_size=3)),
         _view_run(lambda t, ax: t.squeeze(ax)), lambda a, ax: np.squeeze(a, tuple(ax)),
         names=("squeeze",), strict=lambda a, ax: True),
    Case("unsqueeze of a view", st.tuples(arrays(shape=shapes), axes),
         _view_run(lambda t, ax: t.unsqueeze(ax)), np.expand_dims, names=("unsqueeze",),
         strict=lambda a, ax: a.ndim < 8),
    Case("split", st.tuples(arrays(shape=st.lists(sides, max_size=4).map(tuple)),
                            st.lists(st.integers(-1, 4), min_size=1, max_size=4), axes),
         _view_run(lambda t, s, ax: hl.split(t, s, ax)), _np_split, names=("split",),
         strict=lambda a, s, ax: True),
    Case("flip", st.tuples(arrays(shape=shapes), st.lists(axes, max_size=4)),
         _view_run(lambda t, ax: t.flip(ax)), lambda a, ax: np.flip(a, tuple(ax)),
         names=("flip",), strict=lambda a, ax: True),
    Case("arange", st.tuples(st.one_of(st.integers(-5, 5), st.sampled_from([0.5, float("nan"),
                                                                              float("inf")])),
                             st.integers(-5, 5), st.integers(-3, 3)),
         lambda a, b, s: hl.arange(a, b, s), lambda a, b, s: np.arange(a, b, s),
         names=("arange",), strict=lambda a, b, s: True),
    Case("eye", st.tuples(st.integers(-2, 4), st.integers(-2, 4), st.integers(-6, 6)),
         lambda n, m, k: hl.eye(n, m, k), lambda n, m, k: np.eye(n, m, k, dtype=np.float32),
         names=("eye",), strict=lambda n, m, k: True),
    Case("tril", st.tuples(arrays(shape=st.lists(sides, max_size=4).map(tuple)),
                           st.integers(-4, 4)),
         _view_run(lambda t, k: hl.tril(t, k)), lambda a, k: np.tril(a, k) if a.ndim >= 2
         else _refuse(), names=("triangle",), strict=lambda a, k: True),
]


def _select(t, axis, index):
    """x.select(axis, index): the core view behind integer indexing, called directly so that
    any axis can be drawn."""
    return _wrap(hl._core.call("view_select", t._h, axis, index, hl._core.OUT))


def _scalar_ref(name, a, s):
    d = hl.dtypes.promote_scalar(HL[a.dtype], s).np
    if d.kind in "iu" and isinstance(s, int) and not isinstance(s, bool):
        info = np.iinfo(d)
        if not info.min <= s <= info.max:
            raise OverflowError("out of range")
    if name in ARITH and d.kind == "b":
        raise TypeError("no arithmetic on bool")
    x = a.astype(d)
    f = {"add": np.add, "mul": np.multiply, "lt": np.less, "maximum": np.maximum}[name]
    return f(x, np.asarray(s).astype(d) if d.kind != "f" else np.asarray(s, dtype=np.float64)
             .astype(d))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_bad_input_property(case):
    @settings(SETTINGS, max_examples=case.examples)
    @given(case.draw)
    def prop(args):
        check(case, args)
    prop()


def test_every_case_has_a_distinct_name():
    assert len({c.name for c in CASES}) == len(CASES)


# ---- more than 8 dimensions ---------------------------------------------------------------------

NINE = [1] * 9


@pytest.mark.parametrize("make", [
    lambda: hl.zeros(*NINE), lambda: hl.tensor(np.zeros(NINE)),
    lambda: hl.zeros(2).reshape(*NINE[:-1], 2),
    lambda: hl.zeros(2).expand(*NINE[:-1], 2), lambda: hl.zeros(*[1] * 8).unsqueeze(0),
    lambda: hl.zeros(1)[(None,) * 9], lambda: hl.full(NINE, 1.0),
    lambda: hl.eye(2).reshape(2, 2, *[1] * 7)],
    ids=["zeros", "tensor", "reshape", "expand", "unsqueeze", "getitem None", "full", "eye"])
def test_more_than_eight_dimensions_is_a_shape_error(make):
    with pytest.raises(errors.ShapeError, match="8|dimensions"):
        make()


# ---- the C entry points on their own ----------------------------------------------------------

def test_core_entry_points_check_their_arguments():
    """Every call in tests/core_calls.py returns a status with a message naming the op; a
    crash in the subprocess is reported with the call that caused it."""
    from tests import core_calls
    proc = subprocess.run([sys.executable, "-m", "tests.core_calls"], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    lines = proc.stdout.splitlines()
    started = [ln.split(" ", 1)[1] for ln in lines if ln.startswith("start ")]
    if proc.returncode != 0:
        pytest.fail(f"the core crashed (exit {proc.returncode}) in the call "
                    f"{started[-1] if started else '?'}:\n{proc.stderr[-3000:]}")
    bad = [ln for ln in lines if ln.startswith("bad ")]
    assert not bad, "\n".join(bad)
    assert len(started) == len(core_calls.CALLS)
