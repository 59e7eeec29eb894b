"""matmul, gemm, dot, inner, outer and linear against numpy: 1-D promotion, batch broadcasting,
size-0 axes, contiguous / strided / transposed operands (transposed views go to BLAS as
CblasTrans), outputs given by the caller, every gemm combination of trans_a, trans_b, alpha,
beta and c's broadcast shape. Bad inputs raise hl.errors classes.

Tolerances: the reference is numpy in float64. float32 results match to rtol 1e-4 with atol
1e-5 * K (K terms of size ~1 are summed); float64 to rtol 1e-11; integers exactly.
"""
import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hl
from hl import _core
from tests.ops.harness import assert_close, check_guard, check_op

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def tol(dtype, k):
    if dtype == np.float32:
        return 1e-4, 1e-5 * max(k, 1)
    if dtype == np.float64:
        return 1e-11, 1e-12 * max(k, 1)
    return 0, 0


def rand(rng, shape, dtype):
    if np.dtype(dtype).kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return rng.integers(-5, 6, size=shape).astype(dtype)


def ref_matmul(a, b):
    if a.dtype.kind == "f":
        return np.matmul(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)
    return np.matmul(a, b)


MATMUL_SHAPES = [
    ((3,), (3,)), ((3,), (3, 4)), ((2, 3), (3,)), ((2, 3), (3, 4)), ((1, 1), (1, 1)),
    ((4,), (2, 4, 5)), ((2, 3, 4), (4,)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
    ((3, 4), (2, 4, 5)), ((2, 3, 4), (4, 5)), ((1, 3, 4), (6, 4, 1)), ((7, 1, 5), (5, 9)),
    ((0, 3), (3, 4)), ((3, 0), (0, 4)), ((2, 0, 3, 4), (4, 5)), ((0,), (0,)), ((2, 3), (3, 0)),
    ((17, 33), (33, 9)),
]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(sa, sb, dtype, rng):
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype)
    rtol, atol = tol(dtype, sa[-1])
    check_op(hl.matmul, ref_matmul, [a, b], rtol=rtol, atol=atol)
    assert_close(hl.tensor(a) @ hl.tensor(b), ref_matmul(a, b), rtol, atol)


def test_matmul_views_in_place_layouts(rng):
    """Transposed views, row slices (leading dimension > row length), column slices and
    negative strides, alone and batched."""
    big = rng.standard_normal((40, 70)).astype(np.float32)
    t = hl.tensor(big)
    w = rng.standard_normal((30, 20)).astype(np.float32)
    views = {
        "transposed": (t.T[:, :30], big.T[:, :30]),
        "row slice": (t[:, :30], big[:, :30]),
        "every 2nd row": (t[::2, :30], big[::2, :30]),
        "every 2nd column": (t[:, ::2][:, :30], big[:, ::2][:, :30]),
        "flipped": (t.flip(1)[:, :30], big[:, ::-1][:, :30]),
    }
    for name, (tv, nv) in views.items():
        assert_close(tv @ hl.tensor(w), ref_matmul(nv, w), 1e-4, 1e-4, name)
        assert_close(hl.tensor(w.T) @ tv.T, ref_matmul(w.T, nv.T), 1e-4, 1e-4, name + " right")
    x = rng.standard_normal((4, 6, 5)).astype(np.float64)
    y = rng.standard_normal((4, 6, 3)).astype(np.float64)
    tx = hl.tensor(x).permute(0, 2, 1)  # batched transposed view
    assert_close(tx @ hl.tensor(y), ref_matmul(x.transpose(0, 2, 1), y), 1e-12, 1e-12)
    v = hl.tensor(np.arange(20.0))[::2]  # strided vector
    m = rng.standard_normal((10, 3))
    assert_close(v @ hl.tensor(m), np.arange(20.0)[::2] @ m, 1e-12, 1e-12)
    assert_close(hl.tensor(m.T) @ v, m.T @ np.arange(20.0)[::2], 1e-12, 1e-12)
    e = hl.tensor(rng.standard_normal((1, 6))).expand(5, 6)  # zero stride: copied first
    assert_close(e @ hl.tensor(m[:6]), np.broadcast_to(e.numpy(), (5, 6)) @ m[:6], 1e-12, 1e-12)


def test_matmul_large_and_batched(rng):
    a = rng.standard_normal((300, 257)).astype(np.float32)
    b = rng.standard_normal((257, 129)).astype(np.float32)
    assert_close(hl.tensor(a) @ hl.tensor(b), ref_matmul(a, b), 1e-4, 1e-3)
    a = rng.standard_normal((3, 8, 40, 33)).astype(np.float32)
    b = rng.standard_normal((8, 33, 21)).astype(np.float32)
    assert_close(hl.tensor(a) @ hl.tensor(b), ref_matmul(a, b), 1e-4, 1e-3)
    a = rng.integers(-100, 100, (64, 70)).astype(np.int32)
    b = rng.integers(-100, 100, (70, 50)).astype(np.int32)
    assert_close(hl.tensor(a) @ hl.tensor(b), a @ b)


def test_integer_matmul_wraps_like_numpy():
    a = np.full((2, 3), 2**40, np.int64)
    b = np.full((3, 2), 2**30, np.int64)
    assert_close(hl.tensor(a) @ hl.tensor(b), a @ b)


def test_matmul_out(rng):
    a, b = rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal((4, 3)).astype(np.float32)
    out = hl.empty(5, 3)
    r = hl.matmul(hl.tensor(a), hl.tensor(b), out=out)
    assert r.shares_memory(out)
    assert_close(out, ref_matmul(a, b), 1e-4, 1e-4)
    buf = hl.zeros(3, 5)  # a transposed, non-contiguous output
    hl.matmul(hl.tensor(a), hl.tensor(b), out=buf.T)
    assert_close(buf.T, ref_matmul(a, b), 1e-4, 1e-4)
    check_guard(lambda o: hl.matmul(hl.tensor(a), hl.tensor(b), out=o), (5, 3))
    check_guard(lambda o: hl.matmul(hl.tensor(a[0]), hl.tensor(b), out=o), (3,))
    with pytest.raises(hl.errors.ShapeError, match="output"):
        hl.matmul(hl.tensor(a), hl.tensor(b), out=hl.empty(3, 5))
    with pytest.raises(hl.errors.DTypeError, match="float64"):
        hl.matmul(hl.tensor(a), hl.tensor(b), out=hl.empty(5, 3, dtype=hl.float64))
    sq = hl.tensor(rng.standard_normal((4, 4)).astype(np.float32))
    with pytest.raises(hl.errors.ValueError, match="overlaps"):
        hl.matmul(sq, sq, out=sq)


def test_matmul_errors():
    with pytest.raises(hl.errors.ShapeError, match=r"\(2, 3\) and \(4, 5\)"):
        hl.matmul(hl.zeros(2, 3), hl.zeros(4, 5))
    with pytest.raises(ValueError, match=r"\(3,\) and \(4,\)"):
        hl.zeros(3) @ hl.zeros(4)
    with pytest.raises(hl.errors.ShapeError, match="batch"):
        hl.matmul(hl.zeros(2, 3, 4), hl.zeros(3, 4, 5))
    with pytest.raises(hl.errors.ShapeError, match="at least one dimension"):
        hl.matmul(hl.zeros(()), hl.zeros(3))
    with pytest.raises(hl.errors.DTypeError, match="bool"):
        hl.matmul(hl.zeros(2, 2, dtype=hl.bool_), hl.zeros(2, 2, dtype=hl.bool_))
    with pytest.raises(hl.errors.DTypeError, match="different dtypes"):
        _core.call("matmul", hl.zeros(2, 2)._h, hl.zeros(2, 2, dtype=hl.float64)._h, _core.OUT)
    with pytest.raises(hl.errors.DTypeError, match="float16"):
        hl.matmul(hl.zeros(2, 2, dtype=hl.float16), hl.zeros(2, 2, dtype=hl.float16))


def test_matmul_promotes_like_numpy(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    b = rng.integers(0, 5, (3, 2)).astype(np.int32)
    got = hl.tensor(a) @ hl.tensor(b)
    assert got.dtype is hl.float64  # numpy: float32 with int32 -> float64
    assert_close(got, a.astype(np.float64) @ b, 1e-6, 1e-6)


# ---- gemm ----

C_SHAPES = [None, (), (1,), "N", (1, "N"), ("M", 1), ("M", "N")]


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
def test_gemm_every_combination(dtype, rng):
    M, N, K = 4, 5, 3
    for ta, tb, alpha, beta, cs in itertools.product((False, True), (False, True), (1.0, 0.5, 0.0),
                                                      (0.0, 1.0, 2.5), C_SHAPES):
        a = rand(rng, (K, M) if ta else (M, K), dtype)
        b = rand(rng, (N, K) if tb else (K, N), dtype)
        c = None if cs is None else rand(rng, tuple({"M": M, "N": N}.get(s, s) for s in cs), dtype)
        oa, ob = (a.T if ta else a).astype(np.float64), (b.T if tb else b).astype(np.float64)
        want = alpha * (oa @ ob) + (0 if c is None else beta * c.astype(np.float64))
        if np.dtype(dtype).kind == "i":
            want = np.trunc(want)  # hl's float -> int conversion truncates (and saturates)
        want = want.astype(dtype)
        inputs = [a, b] + ([] if c is None else [c])

        def f(*ts, ta=ta, tb=tb, alpha=alpha, beta=beta):
            return hl.gemm(ts[0], ts[1], ts[2] if len(ts) > 2 else None, trans_a=ta, trans_b=tb,
                           alpha=alpha, beta=beta)
        rtol, atol = tol(dtype, K)
        check_op(f, lambda *arrays, want=want: want, inputs, rtol=rtol, atol=atol)


def test_gemm_in_place_and_out(rng):
    a, b = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    c = rng.standard_normal((3, 2))
    tc = hl.tensor(c)
    hl.gemm(hl.tensor(a), hl.tensor(b), tc, beta=0.5, out=tc)  # C = A @ B + 0.5 C
    assert_close(tc, a @ b + 0.5 * c, 1e-12, 1e-12)
    buf = hl.zeros(2, 3, dtype=hl.float64)
    hl.gemm(hl.tensor(a), hl.tensor(b), hl.tensor(c), out=buf.T)
    assert_close(buf.T, a @ b + c, 1e-12, 1e-12)
    check_guard(lambda o: hl.gemm(hl.tensor(a), hl.tensor(b), hl.tensor(c[0]), out=o), (3, 2),
                dtype=hl.float64)


def test_gemm_size_zero(rng):
    a, b, c = np.zeros((3, 0)), np.zeros((0, 2)), rng.standard_normal((3, 2))
    assert_close(hl.gemm(hl.tensor(a), hl.tensor(b), hl.tensor(c), beta=2.0), 2 * c)
    assert_close(hl.gemm(hl.tensor(a), hl.tensor(b)), np.zeros((3, 2)))
    assert hl.gemm(hl.zeros(0, 4), hl.zeros(4, 5)).shape == (0, 5)


def test_gemm_errors():
    with pytest.raises(hl.errors.ShapeError, match="2-D"):
        hl.gemm(hl.zeros(2, 3, 4), hl.zeros(4, 5))
    with pytest.raises(hl.errors.ShapeError, match="inner dimensions 3 and 4"):
        hl.gemm(hl.zeros(2, 3), hl.zeros(4, 5))
    with pytest.raises(hl.errors.ShapeError, match="transposed"):
        hl.gemm(hl.zeros(2, 3), hl.zeros(2, 5), trans_b=True)
    with pytest.raises(hl.errors.ShapeError, match="cannot be broadcast"):
        hl.gemm(hl.zeros(2, 3), hl.zeros(3, 5), hl.zeros(3))
    with pytest.raises(hl.errors.ShapeError, match="cannot be broadcast"):
        hl.gemm(hl.zeros(2, 3), hl.zeros(3, 5), hl.zeros(1, 2, 5))
    with pytest.raises(hl.errors.DTypeError, match="different dtypes"):
        _core.call("gemm", hl.zeros(2, 2)._h, hl.zeros(2, 2)._h,
                   hl.zeros(2, 2, dtype=hl.float64)._h, 0, 0, 1.0, 1.0, _core.OUT)


# ---- dot, inner, outer, linear ----

def test_dot_inner_outer(rng):
    v, w = rng.standard_normal(5), rng.standard_normal(5)
    assert_close(hl.dot(hl.tensor(v), hl.tensor(w)), np.dot(v, w), 1e-12)
    m = rng.standard_normal((3, 5))
    assert_close(hl.dot(hl.tensor(m), hl.tensor(v)), np.dot(m, v), 1e-12)
    assert_close(hl.dot(hl.tensor(2.0), hl.tensor(m)), 2.0 * m.astype(np.float32), 1e-6)
    a, b = rng.standard_normal((2, 3, 5)), rng.standard_normal((4, 5, 6))
    assert_close(hl.dot(hl.tensor(a), hl.tensor(b)), np.dot(a, b), 1e-12, 1e-12)
    with pytest.raises(hl.errors.ShapeError, match="not aligned"):
        hl.dot(hl.tensor(a), hl.tensor(rng.standard_normal((4, 3, 6))))
    assert_close(hl.inner(hl.tensor(a), hl.tensor(m)), np.inner(a, m), 1e-12, 1e-12)
    assert_close(hl.outer(hl.tensor(v), hl.tensor(m)), np.outer(v, m), 1e-12)
    ints = np.arange(4, dtype=np.int64)
    assert_close(hl.outer(hl.tensor(ints), hl.tensor(ints)), np.outer(ints, ints))


def test_linear(rng):
    x, w, b = rng.standard_normal((6, 4)), rng.standard_normal((3, 4)), rng.standard_normal(3)
    assert_close(hl.linear(hl.tensor(x), hl.tensor(w), hl.tensor(b)), x @ w.T + b, 1e-12, 1e-12)
    assert_close(hl.linear(hl.tensor(x), hl.tensor(w)), x @ w.T, 1e-12, 1e-12)
    x3 = rng.standard_normal((2, 6, 4))
    assert_close(hl.linear(hl.tensor(x3), hl.tensor(w), hl.tensor(b)), x3 @ w.T + b, 1e-12, 1e-12)
    assert_close(hl.linear(hl.tensor(x[0]), hl.tensor(w), hl.tensor(b)), x[0] @ w.T + b, 1e-12)
    with pytest.raises(hl.errors.ShapeError):
        hl.linear(hl.tensor(x), hl.tensor(w.T))


def test_threads_do_not_change_results(rng):
    a = rng.standard_normal((200, 150)).astype(np.float32)
    b = rng.standard_normal((150, 100)).astype(np.float32)
    old = hl.get_num_threads()
    try:
        results = []
        for n in (1, 2):
            hl.set_num_threads(n)
            results.append((hl.tensor(a) @ hl.tensor(b)).numpy().copy())
            assert hl.get_num_threads() == n
        assert_close(results[0], results[1], 1e-5, 1e-5)
    finally:
        hl.set_num_threads(old)


# ---- properties: numpy's answer or an hl error, never a crash ----

@settings(max_examples=150, deadline=None)
@given(sa=st.lists(st.integers(0, 3), min_size=0, max_size=4),
       sb=st.lists(st.integers(0, 3), min_size=0, max_size=4),
       dtype=st.sampled_from([np.float64, np.int64]))
def test_property_matmul_numpy_or_hl_error(sa, sb, dtype):
    a = np.arange(int(np.prod(sa)), dtype=dtype).reshape(sa) % 3
    b = np.arange(int(np.prod(sb)), dtype=dtype).reshape(sb) % 4 - 1
    try:
        want = np.matmul(a, b)
    except ValueError:
        want = None
    try:
        got = hl.matmul(hl.tensor(np.asarray(a)), hl.tensor(np.asarray(b)))
    except hl.errors.HLError:
        assert want is None, f"hl raised where numpy gave shape {np.shape(want)}"
        return
    assert want is not None, "numpy raised but hl answered"
    assert_close(got, want, 1e-12, 1e-12)
