"""Reductions against numpy: sum, mean, max, min, prod, l2 (norm), logsumexp over every set of
axes of random 0-4-D shapes (contiguous, strided and transposed inputs, keepdims, size-0 and
size-1 axes), integer and bool dtypes, NaN, the threaded paths, argmax/argmin, cumsum, and the
compositions (var, std, any, all, count_nonzero). Bad inputs raise hl.errors classes.

Tolerances: the references are computed in float64 and rounded to the input's dtype; float32
results match them to rtol 1e-5 (hl accumulates float32 in float64), float64 to rtol 1e-12.
Integer results are exact.
"""
import itertools
import warnings

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import hl
from hl import _core
from tests.ops.harness import LAYOUTS, assert_close, check_guard, check_op

SHAPES = [(), (5,), (3, 4), (1, 7), (2, 3, 4), (3, 0, 2), (2, 1, 3, 5), (4, 3, 2, 2)]
TOL = {np.float32: (1e-5, 1e-6), np.float64: (1e-12, 1e-14)}


def axis_sets(ndim):
    """Every subset of the axes, as tuples; plus None (all)."""
    out = [None]
    for r in range(ndim + 1):
        out += list(itertools.combinations(range(ndim), r))
    return out


def lse_ref(x, axis=None, keepdims=False):
    x = np.asarray(x, np.float64)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        if x.size == 0 or (axis is not None and any(x.shape[a] == 0 for a in np.atleast_1d(axis))):
            return np.log(np.sum(np.exp(x), axis=axis, keepdims=keepdims))
        m = np.max(x, axis=axis, keepdims=True)
        shift = np.where(np.isfinite(m), m, 0)
        s = np.log(np.sum(np.exp(x - shift), axis=axis, keepdims=True)) + shift
        s = np.where(np.isfinite(m), s, m)
        if not keepdims:
            s = np.squeeze(s, axis=axis) if axis is not None else s.reshape(())
        return s


REFS = {
    "sum": lambda x, a, k: np.sum(x.astype(np.float64), axis=a, keepdims=k),
    "mean": lambda x, a, k: np.mean(x.astype(np.float64), axis=a, keepdims=k),
    "max": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "min": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "prod": lambda x, a, k: np.prod(x.astype(np.float64), axis=a, keepdims=k),
    "norm": lambda x, a, k: np.sqrt(np.sum(x.astype(np.float64) ** 2, axis=a, keepdims=k)),
    "logsumexp": lambda x, a, k: lse_ref(x, a, k),
}


def reduced_count(shape, axis):
    axes = range(len(shape)) if axis is None else axis
    return int(np.prod([shape[a] for a in axes]))


@pytest.mark.parametrize("op", list(REFS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_every_axis_set(op, dtype, rng):
    rtol, atol = TOL[dtype]
    for shape in SHAPES:
        x = rng.standard_normal(shape).astype(dtype)
        for axis in axis_sets(len(shape)):
            if op in ("max", "min") and reduced_count(shape, axis) == 0:
                continue  # numpy raises; tested below
            for keep in (False, True):
                def ref(a, axis=axis, keep=keep):
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore", RuntimeWarning)
                        return np.asarray(REFS[op](a, axis, keep)).astype(dtype)
                check_op(lambda t, axis=axis, keep=keep: getattr(hl, op)(t, axis=axis, keepdims=keep),
                         ref, [x], rtol=rtol, atol=atol)


@pytest.mark.parametrize("op", ["sum", "max", "min", "prod"])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_])
def test_integer_and_bool_dtypes(op, dtype, rng):
    for shape in [(7,), (3, 5), (2, 3, 4), (40, 6)]:
        x = rng.integers(0, 3 if op == "prod" else 100, size=shape).astype(dtype)
        for axis in axis_sets(len(shape)):
            want = getattr(np, op)(x, axis=axis)
            if op in ("sum", "prod") and dtype == np.uint8:
                want = want.astype(np.int64)  # numpy gives uint64, which hl does not have
            check_op(lambda t, axis=axis: getattr(hl, op)(t, axis=axis), lambda a: want, [x])


def test_integer_sums_wrap_like_numpy():
    x = np.array([2**62, 2**62, 2**62], dtype=np.int64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert hl.sum(hl.tensor(x)).item() == np.sum(x)
        assert hl.prod(hl.tensor(x)).item() == np.prod(x)
    x = np.full(1000, 2**31 - 1, dtype=np.int32)  # int32 sums accumulate in int64
    assert hl.sum(hl.tensor(x)).item() == 1000 * (2**31 - 1)


def test_result_dtypes():
    for d, want in [(hl.int32, hl.int64), (hl.uint8, hl.int64), (hl.bool_, hl.int64),
                    (hl.int64, hl.int64), (hl.float32, hl.float32), (hl.float64, hl.float64)]:
        x = hl.zeros(3, dtype=d)
        assert hl.sum(x).dtype is want and hl.prod(x).dtype is want
        assert hl.max(x).dtype is d and hl.min(x).dtype is d
        assert hl.cumsum(x).dtype is want
    assert hl.mean(hl.zeros(3, dtype=hl.int32)).dtype is hl.float32
    assert hl.argmax(hl.zeros(3)).dtype is hl.int64


def test_float32_sum_is_accurate():
    x = np.full(1 << 22, 0.1, dtype=np.float32)
    got = hl.sum(hl.tensor(x)).item()
    assert abs(got - np.sum(x.astype(np.float64))) <= 1e-6 * abs(got)
    x = np.concatenate([[1e8], np.ones(1 << 16), [-1e8]]).astype(np.float32)
    assert hl.sum(hl.tensor(x)).item() == 1 << 16  # naive float32 accumulation gives 0


@pytest.mark.parametrize("threads", [1, 3])
@pytest.mark.parametrize("shape,axis", [((1 << 17,), None), ((100000, 6), 0), ((6, 100000), 1),
                                        ((300, 300), 0), ((300, 300), 1), ((3, 4000, 10), (0, 1)),
                                        ((3, 4000, 10), (0, 2)), ((40, 50, 60), (1,))])
def test_threaded_paths(shape, axis, threads, rng):
    """Large enough to run in parallel: by output, by column block, and the split paths (few
    outputs, each output's work shared, partial results combined)."""
    old = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        x = rng.standard_normal(shape).astype(np.float32)
        t = hl.tensor(x)
        for op in REFS:
            want = np.asarray(REFS[op](x, axis, False)).astype(np.float32)
            rtol = 1e-4 if op == "prod" else 1e-5
            assert_close(getattr(hl, op)(t, axis=axis), want, rtol, 1e-5, f"{op} {shape} {axis}")
        x[tuple(s // 2 for s in shape)] = np.nan
        t = hl.tensor(x)
        for op in ("max", "min", "sum", "logsumexp"):
            assert_close(getattr(hl, op)(t, axis=axis), REFS[op](x, axis, False).astype(np.float32),
                         1e-5, 1e-5, f"{op} with NaN")
        if axis is None or isinstance(axis, int):
            for op in ("argmax", "argmin"):
                assert_close(getattr(hl, op)(t, axis=axis), getattr(np, op)(x, axis=axis))
    finally:
        hl.set_num_threads(old)


def test_nan_propagates_through_max_min():
    for pos in range(0, 40, 7):
        x = np.arange(40, dtype=np.float32)
        x[pos] = np.nan
        t = hl.tensor(x)
        assert np.isnan(hl.max(t).item()) and np.isnan(hl.min(t).item())
        m = x.reshape(8, 5)
        for axis in (0, 1):
            check_op(lambda a, axis=axis: hl.max(a, axis=axis), lambda a: np.max(a, axis=axis), [m])
            check_op(lambda a, axis=axis: hl.min(a, axis=axis), lambda a: np.min(a, axis=axis), [m])


def test_infinities():
    t = hl.tensor(np.array([[-np.inf, -np.inf], [np.inf, 1.0], [np.nan, 1.0], [-np.inf, 0.0]]))
    assert_close(hl.logsumexp(t, axis=1), [-np.inf, np.inf, np.nan, 0.0])
    assert_close(hl.max(t, axis=1), [-np.inf, np.inf, np.nan, 0.0])
    assert hl.max(hl.tensor([-np.inf] * 3)).item() == -np.inf
    assert hl.min(hl.tensor([np.inf] * 40)).item() == np.inf


def test_empty_reductions():
    x = hl.zeros(0, 3)
    assert_close(hl.sum(x, axis=0), np.zeros(3, np.float32))
    assert_close(hl.prod(x, axis=0), np.ones(3, np.float32))
    assert_close(hl.norm(x, axis=0), np.zeros(3, np.float32))
    assert np.isnan(hl.mean(x, axis=0).numpy()).all()
    assert (hl.logsumexp(x, axis=0).numpy() == -np.inf).all()
    assert hl.max(x, axis=1).shape == (0,)  # nothing reduced over is empty: fine
    for op in ("max", "min"):
        with pytest.raises(hl.errors.ValueError, match=f"zero-size array to reduction operation {op}"):
            getattr(hl, op)(x, axis=0)
        with pytest.raises(ValueError, match="no identity"):
            getattr(hl, op)(hl.zeros(0, 0), axis=1)
        with pytest.raises(ValueError):
            getattr(hl, op)(hl.zeros(0))
    assert hl.sum(hl.zeros(0, dtype=hl.int32)).item() == 0
    assert hl.any(hl.zeros(0, 3), axis=0).numpy().tolist() == [False] * 3
    assert hl.all(hl.zeros(0, 3)).item() is True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_reducing_size_one_axes_is_exact(dtype, rng):
    """Axes of size 1 alone (a bias gradient at batch 1): every op gives each element itself
    exactly (sqrt(x**2) = |x| for norm), NaN and infinities included, wide rows, views and
    both thread counts (the column loop's one-row pass; numpy is the reference)."""
    x = rng.standard_normal((3, 1, 530)).astype(dtype)
    x[0, 0, :4] = [np.nan, np.inf, -np.inf, 0.0]
    views = [(lambda v: v[:1], (0,)), (lambda v: v, (1,)), (lambda v: v[:1], (0, 1)),
             (lambda v: v[:, :, ::2], (1,)), (lambda v: v.transpose(1, 0, 2), (0,))]
    old = hl.get_num_threads()
    try:
        for threads in (1, 2):
            hl.set_num_threads(threads)
            for view, axis in views:
                a, t = view(x), view(hl.tensor(x))
                for op in ("sum", "mean", "max", "min", "prod", "logsumexp", "norm"):
                    want = np.squeeze(np.abs(a) if op == "norm" else a, axis=axis)
                    got = getattr(hl, op)(t, axis=axis).numpy()
                    np.testing.assert_array_equal(got, want, err_msg=f"{op} {a.shape} {axis}")
    finally:
        hl.set_num_threads(old)


def test_reduce_nothing_is_elementwise():
    x = np.array([[-1.5, 2.0], [3.0, -4.0]], np.float32)
    t = hl.tensor(x)
    for op in ("sum", "mean", "max", "min", "prod", "logsumexp"):
        assert_close(getattr(hl, op)(t, axis=()), x)
    assert_close(hl.norm(t, axis=()), np.abs(x))  # sqrt(x**2) over a group of one
    assert hl.sum(hl.tensor(np.array([1, 2], np.int32)), axis=()).dtype is hl.int64


def test_scalar_input():
    t = hl.tensor(np.float32(2.5))
    for op in ("sum", "mean", "max", "min", "prod", "logsumexp"):
        assert getattr(hl, op)(t).item() == 2.5
        assert getattr(hl, op)(t, axis=()).shape == ()


def test_out_argument():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = hl.empty(4)
    r = hl.sum(hl.tensor(x), axis=0, out=out)
    assert r.shares_memory(out)
    assert_close(out, x.sum(0))
    wide = hl.zeros(4, 2)  # a strided output
    hl.max(hl.tensor(x), axis=0, out=wide[:, 1])
    assert_close(wide, np.stack([np.zeros(4), x.max(0)], 1).astype(np.float32))
    check_guard(lambda o: hl.mean(hl.tensor(x), axis=1, out=o), (3,))
    with pytest.raises(hl.errors.ShapeError, match="output"):
        hl.sum(hl.tensor(x), axis=0, out=hl.empty(3))
    with pytest.raises(hl.errors.DTypeError, match="int64"):
        hl.sum(hl.tensor(x.astype(np.int32)), axis=0, out=hl.empty(4, dtype=hl.int32))
    t = hl.tensor(x)
    with pytest.raises(hl.errors.ValueError, match="overlaps"):
        hl.sum(t, axis=1, out=t[:, 0])


def test_bad_axes_and_dtypes():
    t = hl.zeros(2, 3)
    with pytest.raises(hl.errors.IndexError, match="axis 2"):
        hl.sum(t, axis=2)
    with pytest.raises(hl.errors.IndexError):
        hl.max(t, axis=(0, -3))
    with pytest.raises(hl.errors.ValueError, match="repeated"):
        hl.sum(t, axis=(1, -1))
    with pytest.raises(hl.errors.IndexError):
        hl.argmax(t, axis=5)
    with pytest.raises(hl.errors.IndexError):
        hl.cumsum(t, axis=-3)
    # the core checks on its own, whatever the binding sends
    sum_code = _core.op_code("sum")
    with pytest.raises(hl.errors.ValueError, match="repeated"):
        _core.call("reduce", sum_code, t._h, 2, [0, -2], 0, _core.OUT)
    with pytest.raises(hl.errors.IndexError, match="out of range"):
        _core.call("reduce", sum_code, t._h, 1, [7], 0, _core.OUT)
    with pytest.raises(hl.errors.ValueError, match="axes"):
        _core.call("reduce", sum_code, t._h, 3, [0, 1, 0], 0, _core.OUT)
    with pytest.raises(hl.errors.ValueError, match="axes"):
        _core.call("reduce", sum_code, t._h, -1, None, 0, _core.OUT)
    with pytest.raises(hl.errors.ValueError, match="not a reduction"):
        _core.call("reduce", _core.op_code("add"), t._h, 0, None, 0, _core.OUT)
    with pytest.raises(hl.errors.DTypeError, match="floating-point"):
        _core.call("reduce", _core.op_code("mean"), hl.zeros(3, dtype=hl.int32)._h, 0, None, 0,
                   _core.OUT)
    with pytest.raises(hl.errors.DTypeError, match="float16"):
        hl.sum(hl.zeros(3, dtype=hl.float16))
    with pytest.raises(hl.errors.ValueError, match="argmax or argmin"):
        _core.call("arg_reduce", sum_code, t._h, 0, 0, 0, _core.OUT)


# ---- argmax / argmin ----

def arg_ref(op, x, axis, select_last=False):
    """numpy's argmax/argmin; select_last takes the last extreme (NaN counts as the extreme)."""
    f = getattr(np, op)
    if not select_last:
        return f(x, axis=axis)
    flipped = np.flip(x, axis=axis)
    return x.shape[axis] - 1 - f(flipped, axis=axis)


@pytest.mark.parametrize("op", ["argmax", "argmin"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_arg_reduce(op, dtype, rng):
    for shape in [(6,), (3, 5), (2, 3, 4), (1, 4, 1), (30, 9), (5, 0)]:
        x = rng.integers(0, 4, size=shape).astype(dtype)  # small range: many ties
        for axis in range(len(shape)):
            if shape[axis] == 0:
                continue
            for keep in (False, True):
                for last in (False, True):
                    want = arg_ref(op, x, axis, last)
                    if keep:
                        want = np.expand_dims(want, axis)
                    check_op(lambda t, axis=axis, keep=keep, last=last:
                             getattr(hl, op)(t, axis=axis, keepdims=keep, select_last=last),
                             lambda a, want=want: want, [x])
        if x.size:
            assert getattr(hl, op)(hl.tensor(x)).item() == getattr(np, op)(x)
            assert getattr(hl, op)(hl.tensor(x), keepdims=True).shape == (1,) * x.ndim


def test_arg_reduce_nan():
    x = np.array([[1, np.nan, 3, np.nan, 5], [2, 2, 1, 2, 0], [np.nan, 9, 9, 9, 9]] * 3)
    for op in ("argmax", "argmin"):
        for t in (LAYOUTS["contiguous"](x), LAYOUTS["transposed"](x)):
            assert getattr(hl, op)(t, axis=1).numpy().tolist() == getattr(np, op)(x, axis=1).tolist()
            assert getattr(hl, op)(t, axis=0).numpy().tolist() == getattr(np, op)(x, axis=0).tolist()
        assert getattr(hl, op)(hl.tensor(x), axis=1, select_last=True).numpy().tolist()[:3] == \
            [3, 3 if op == "argmax" else 4, 0]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_arg_reduce_long_rows(dtype, rng):
    """Rows long enough for the two-pass path (find the extreme, then its first or last
    position), with ties, NaNs and infinities, contiguous and strided."""
    x = rng.integers(0, 50, size=(4, 3000)).astype(dtype)
    x[1, [7, 2900]] = np.nan
    x[2, :] = -np.inf
    x[3, [5, 2999]] = np.inf
    for op in ("argmax", "argmin"):
        for last in (False, True):
            want = arg_ref(op, x, 1, last)
            for layout in ("contiguous", "strided", "transposed"):
                got = getattr(hl, op)(LAYOUTS[layout](x), axis=1, select_last=last)
                assert got.numpy().tolist() == want.tolist(), (op, last, layout)
            flat = x.reshape(-1)
            assert getattr(hl, op)(hl.tensor(flat), select_last=last).item() == \
                arg_ref(op, flat, 0, last)


def test_arg_reduce_empty_axis():
    with pytest.raises(hl.errors.ValueError, match="empty sequence"):
        hl.argmax(hl.zeros(0, 3), axis=0)
    with pytest.raises(hl.errors.ValueError, match="empty sequence"):
        hl.argmin(hl.zeros(0))
    assert hl.argmax(hl.zeros(3, 0), axis=0).shape == (0,)


# ---- cumsum ----

def cumsum_ref(x, axis, exclusive, reverse):
    dt = np.float64 if x.dtype.kind == "f" else np.int64
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y.astype(dt), axis=axis)
    if exclusive and c.shape[axis]:  # shifted by one along the axis, starting from 0
        c = np.concatenate([np.zeros_like(np.take(c, [0], axis=axis)),
                            np.take(c, range(c.shape[axis] - 1), axis=axis)], axis=axis)
    c = np.flip(c, axis) if reverse else c
    return c.astype(x.dtype if x.dtype.kind == "f" else np.int64)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_])
def test_cumsum(dtype, rng):
    for shape in [(7,), (3, 5), (2, 3, 4), (0, 3), (300, 4), (2, 600)]:
        x = (rng.standard_normal(shape) * 10).astype(dtype)
        for axis in range(len(shape)):
            for excl, rev in itertools.product((False, True), repeat=2):
                check_op(lambda t, axis=axis, excl=excl, rev=rev:
                         hl.cumsum(t, axis=axis, exclusive=excl, reverse=rev),
                         lambda a, axis=axis, excl=excl, rev=rev: cumsum_ref(a, axis, excl, rev),
                         [x], rtol=1e-5, atol=1e-4)
    x = rng.standard_normal((3, 4)).astype(dtype)
    assert_close(hl.cumsum(hl.tensor(x)), cumsum_ref(x.reshape(-1), 0, False, False), 1e-5, 1e-4)


def test_cumsum_into_strided_out_and_in_place():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    buf = hl.zeros(4, 3)
    hl.cumsum(hl.tensor(x), axis=1, out=buf.T)
    assert_close(buf.T, np.cumsum(x, 1))
    t = hl.tensor(x)
    hl.cumsum(t, axis=0, out=t)
    assert_close(t, np.cumsum(x, 0))
    t = hl.tensor(x)
    hl.cumsum(t, axis=1, exclusive=True, reverse=True, out=t)
    assert_close(t, cumsum_ref(x, 1, True, True))


# ---- compositions and method spellings ----

def test_compositions(rng):
    x = rng.standard_normal((4, 5, 3)).astype(np.float64)
    t = hl.tensor(x)
    for axis in (None, 0, (1, 2), -1):
        for ddof in (0, 1):
            assert_close(hl.var(t, axis=axis, ddof=ddof), np.var(x, axis=axis, ddof=ddof), 1e-12)
            assert_close(hl.std(t, axis=axis, ddof=ddof), np.std(x, axis=axis, ddof=ddof), 1e-12)
        xb = x > 0.5
        assert_close(hl.any(hl.tensor(xb), axis=axis), np.any(xb, axis=axis))
        assert_close(hl.all(hl.tensor(xb), axis=axis), np.all(xb, axis=axis))
        assert_close(hl.count_nonzero(hl.tensor(xb), axis=axis), np.count_nonzero(xb, axis=axis))
        for ord_ in (None, 1, 2, 3, np.inf, -np.inf, 0):
            want = np.linalg.norm(x.reshape(-1) if axis is None else x, ord=ord_,
                                  axis=None if axis is None else axis) \
                if isinstance(axis, int) or axis is None else None
            if want is not None:
                assert_close(hl.norm(t, ord=ord_, axis=axis), want, 1e-12, 1e-12, f"ord {ord_}")
    assert_close(hl.any(hl.tensor([0.0, np.nan])), True)  # NaN is non-zero
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        assert_close(hl.var(hl.tensor([1.0]), ddof=1), np.var([1.0], ddof=1))
    with pytest.raises(hl.errors.ValueError, match="ord"):
        hl.norm(t, ord="nuc")


def test_tensor_methods_and_torch_spellings():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    t = hl.tensor(x)
    assert_close(t.sum(axis=1), x.sum(1))
    assert_close(t.sum(dim=1, keepdim=True), x.sum(1, keepdims=True))
    assert_close(t.mean((0, 2)), x.mean((0, 2)))
    assert_close(t.max(), x.max())
    assert_close(t.argmax(dim=-1), x.argmax(-1))
    assert_close(t.logsumexp(1), lse_ref(x, 1).astype(np.float32))
    assert_close(t.cumsum(dim=2), np.cumsum(x, 2))
    with pytest.raises(hl.errors.ValueError, match="not both"):
        t.sum(axis=1, dim=1)


# ---- properties: numpy's answer or an hl error, never a crash ----

OPS = ["sum", "mean", "max", "min", "prod", "logsumexp", "argmax", "argmin", "cumsum"]


@settings(max_examples=150, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=4),
       axis=st.one_of(st.none(), st.integers(-6, 6),
                      st.lists(st.integers(-5, 5), min_size=0, max_size=4).map(tuple)),
       op=st.sampled_from(OPS), keep=st.booleans())
def test_property_numpy_or_hl_error(shape, axis, op, keep):
    x = np.asarray(np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) % 5 - 2)
    if op in ("argmax", "argmin", "cumsum") and isinstance(axis, tuple):
        axis = axis[0] if axis else None
    # numpy takes axis 0 or -1 of a 0-d array for sum but not for mean; hl always does
    assume(not (shape == [] and isinstance(axis, int)))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            if op == "logsumexp":
                want = lse_ref(x, axis, keep)
            elif op == "cumsum":
                want = np.cumsum(x, axis=axis)
            else:
                want = getattr(np, op)(x, axis=axis, keepdims=keep)
    except (ValueError, IndexError, TypeError):
        want = None
    try:
        if op == "cumsum":
            got = hl.cumsum(hl.tensor(x), axis=axis)
        else:
            got = getattr(hl, op)(hl.tensor(x), axis=axis, keepdims=keep)
    except hl.errors.HLError:
        assert want is None, f"hl raised where numpy gave {want!r}"
        return
    assert want is not None, "numpy raised but hl answered"
    assert_close(got, np.asarray(want), 1e-12, 1e-12)
