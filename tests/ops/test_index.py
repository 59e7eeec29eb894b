"""Indexing ops against numpy: gather (take, index_select, integer-array and mask indexing),
gather_grad, gather_elements, scatter_elements, one_hot, nonzero, topk.

Every op moves or selects values without arithmetic (scatter's add/mul and gather_grad's
sums aside), so results compare exactly, except gather_grad's sums (rtol 1e-6 in float32,
1e-12 in float64) and its finite-difference check (float64, atol 1e-7).
"""
import types

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors

from .harness import LAYOUTS, assert_close, check_op, numeric_grad

# the ops under test: the ones users call, and the backward kernel gather_grad from hl.ops
ix = types.SimpleNamespace(
    gather=hl.gather, take=hl.take, index_select=hl.index_select,
    gather_grad=hl.ops.gather_grad, gather_elements=hl.gather_elements,
    scatter_elements=hl.scatter_elements, one_hot=hl.one_hot, nonzero=hl.nonzero, topk=hl.topk)

DATA_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16]
IDX_DTYPES = [np.int32, np.int64]


def rand_data(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if dtype.kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def rand_shape(rng, ndim, lo=0, hi=5):
    return tuple(int(s) for s in rng.integers(lo, hi, size=ndim))


def rand_index(rng, n, shape, dtype):
    """Indices valid for an axis of size n, negative ones included."""
    if n == 0:
        return np.zeros(shape, dtype=dtype)
    return rng.integers(-n, n, size=shape).astype(dtype)


# ---- gather ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DATA_DTYPES)
@pytest.mark.parametrize("idx_dtype", IDX_DTYPES)
def test_gather_matches_take(rng, dtype, idx_dtype):
    for trial in range(6):
        ndim = 1 + trial % 4
        shape = rand_shape(rng, ndim, 1, 5)
        axis = int(rng.integers(-ndim, ndim))
        ishape = rand_shape(rng, trial % 3, 0, 4)   # 0-d, 1-d and 2-d indices, some empty
        x = rand_data(rng, shape, dtype)
        idx = rand_index(rng, shape[axis], ishape, idx_dtype)
        check_op(lambda a, i: ix.gather(a, i, axis), lambda a, i: np.take(a, i, axis=axis),
                 [x, idx])


def test_gather_size_zero(rng):
    x = rand_data(rng, (0, 3), np.float32)
    assert_close(ix.gather(hl.tensor(x), [2, -1], 1), np.take(x, [2, -1], axis=1))
    assert_close(ix.gather(hl.tensor(x), np.zeros(0, np.int64), 0), x[:0])
    y = rand_data(rng, (2, 0, 4), np.float64)
    assert_close(ix.gather(hl.tensor(y), np.zeros((3, 0), np.int32), 2),
                 np.take(y, np.zeros((3, 0), np.int32), axis=2))
    with pytest.raises(errors.IndexError, match="index 0 is out of range: axis 0 has size 0"):
        ix.gather(hl.tensor(x), [0], 0)


def test_gather_large_parallel(rng):
    """Big enough for the OpenMP paths (row moves and single-element moves)."""
    x = rand_data(rng, (300, 257), np.float32)
    i = rand_index(rng, 300, (1000,), np.int64)
    assert_close(ix.gather(hl.tensor(x), i, 0), np.take(x, i, axis=0))
    j = rand_index(rng, 257, (500,), np.int32)
    assert_close(ix.gather(hl.tensor(x), j, 1), np.take(x, j, axis=1))


def test_gather_out_of_range_names_value():
    x = hl.tensor(np.arange(12.0).reshape(3, 4))
    with pytest.raises(errors.IndexError, match=r"index 7 is out of range for axis 1 of size 4"):
        ix.gather(x, [0, 7, 1], 1)
    with pytest.raises(errors.IndexError, match=r"index -4 is out of range for axis 0 of size 3"):
        ix.gather(x, [[0], [-4]], 0)
    with pytest.raises(errors.IndexError, match="index 2147483647"):
        ix.gather(x, np.array([2**31 - 1], np.int32), 0)


def test_gather_bad_arguments():
    x = hl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(errors.DTypeError, match="indices must be integers"):
        ix.gather(x, np.array([0.0, 1.0]), 0)
    with pytest.raises(errors.DTypeError, match="indices must be integers"):
        ix.gather(x, np.array([True]), 0)
    with pytest.raises(errors.IndexError, match="axis 2 is out of range"):
        ix.gather(x, [0], 2)
    with pytest.raises(errors.IndexError, match="axis 0 is out of range"):
        ix.gather(hl.tensor(1.0), [0], 0)
    with pytest.raises(errors.ShapeError, match="at most 8"):
        ix.gather(x, np.zeros((1,) * 8, np.int64), 0)
    with pytest.raises(errors.ShapeError, match="output tensor given"):
        ix.gather(x, [0, 1], 0, out=hl.zeros(3, 3))
    big = hl.zeros(2, 6)
    with pytest.raises(errors.ValueError, match="not contiguous"):
        ix.gather(x, [0, 1], 0, out=big[:, ::2])


def test_gather_into_out_guard(rng):
    from .harness import check_guard
    x = rand_data(rng, (4, 5), np.float32)
    out = check_guard(lambda o: ix.gather(hl.tensor(x), [3, 0], 0, out=o), (2, 5))
    assert_close(out, x[[3, 0]])
    # a failed index check leaves the caller's output untouched
    o = hl.full((2, 5), 7.0)
    with pytest.raises(errors.IndexError):
        ix.gather(hl.tensor(x), [0, 9], 0, out=o)
    assert (o.numpy() == 7.0).all()


def test_take_and_index_select(rng):
    x = rand_data(rng, (3, 4, 5), np.float32)
    i = np.array([[4, -1], [0, 2]])
    assert_close(ix.take(hl.tensor(x), i), np.take(x, i))
    assert_close(ix.take(hl.tensor(x), [1, 0], axis=1), np.take(x, [1, 0], axis=1))
    torch = pytest.importorskip("torch")
    want = torch.index_select(torch.from_numpy(x), 2, torch.tensor([4, 0, 0])).numpy()
    assert_close(ix.index_select(hl.tensor(x), 2, [4, 0, 0]), want)
    with pytest.raises(errors.ShapeError, match="1-D"):
        ix.index_select(hl.tensor(x), 0, [[0]])


# ---- indexing through Tensor.__getitem__ -------------------------------------------------

@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_getitem_integer_arrays(rng, layout):
    x = rand_data(rng, (4, 5, 3), np.float32)
    t = LAYOUTS[layout](x)
    idx = np.array([3, -1, 0, 3])
    cases = [
        (idx, lambda a: a[idx]),
        ([2, 0], lambda a: a[[2, 0]]),
        ((slice(None), [2, 0]), lambda a: a[:, [2, 0]]),
        ((Ellipsis, np.array([[1, 2], [0, 0]])), lambda a: a[..., np.array([[1, 2], [0, 0]])]),
        ((1, slice(None), [0, 2]), lambda a: a[1, :, [0, 2]]),
        ((slice(1, 3), [4]), lambda a: a[1:3, [4]]),
        (hl.tensor(np.array([1, 0], np.int32)), lambda a: a[np.array([1, 0])]),
    ]
    for key, ref in cases:
        assert_close(t[key], ref(x), what=f"key {key!r}")
    with pytest.raises(errors.IndexError, match="index 4 is out of range"):
        t[[0, 4]]


@pytest.mark.parametrize("layout", list(LAYOUTS))
def test_getitem_bool_mask(rng, layout):
    x = rand_data(rng, (4, 5, 3), np.float64)
    t = LAYOUTS[layout](x)
    for mask in [x > 0, (x > 0)[:, :, 0], (x > 0)[:, 0, 0], np.zeros((4, 5), bool),
                 np.ones(4, bool)]:
        assert_close(t[mask], x[mask])
        assert_close(t[hl.tensor(mask)], x[mask])
    v = rand_data(rng, (7,), np.int32)
    assert_close(hl.tensor(v)[v > 50], v[v > 50])


# ---- gather_grad -------------------------------------------------------------------------

def gather_grad_ref(dy, idx, axis, x_shape):
    axis = axis % len(x_shape)
    out = np.zeros(x_shape, dtype=dy.dtype)
    n = x_shape[axis]
    flat_idx = np.asarray(idx).reshape(-1) % max(n, 1)
    moved = np.moveaxis(out, axis, 0)   # a view: adding into it adds into out
    d = dy.reshape(x_shape[:axis] + (-1,) + x_shape[axis + 1:])
    np.add.at(moved, flat_idx, np.moveaxis(d, axis, 0))
    return out


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("idx_dtype", IDX_DTYPES)
def test_gather_grad_matches_add_at(rng, dtype, idx_dtype):
    for trial in range(8):
        ndim = 1 + trial % 4
        x_shape = rand_shape(rng, ndim, 1, 5)
        axis = int(rng.integers(-ndim, ndim))
        a = axis % ndim
        ishape = rand_shape(rng, trial % 3, 0, 6)
        idx = rand_index(rng, x_shape[a], ishape, idx_dtype)   # repeats are likely
        dy = rand_data(rng, x_shape[:a] + ishape + x_shape[a + 1:], dtype)
        tol = 1e-6 if dtype == np.float32 else 1e-12
        check_op(lambda g, i: ix.gather_grad(g, i, axis, x_shape),
                 lambda g, i: gather_grad_ref(g, i, axis, x_shape), [dy, idx], rtol=tol,
                 atol=tol)


def test_gather_grad_repeated_indices_and_determinism(rng):
    """Many repeats of few indices, big enough to run in parallel: matches np.add.at and
    gives the same bits whatever the thread count."""
    dy = rand_data(rng, (3, 20000, 4), np.float32)
    idx = rng.integers(0, 5, size=20000)
    want = gather_grad_ref(dy, idx, 1, (3, 5, 4))
    got = ix.gather_grad(hl.tensor(dy), idx, 1, (3, 5, 4)).numpy()
    assert_close(got, want, rtol=1e-4, atol=1e-3)
    dy1 = rand_data(rng, (50000,), np.float64)
    idx1 = rng.integers(-7, 7, size=50000)
    before = hl.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            hl.set_num_threads(n)
            results.append((ix.gather_grad(hl.tensor(dy), idx, 1, (3, 5, 4)).numpy(),
                            ix.gather_grad(hl.tensor(dy1), idx1, 0, (7,)).numpy()))
    finally:
        hl.set_num_threads(before)
    for r in results[1:]:
        assert np.array_equal(r[0], results[0][0]) and np.array_equal(r[1], results[0][1])
    assert_close(results[0][1], gather_grad_ref(dy1, idx1, 0, (7,)), rtol=1e-12, atol=1e-9)


def test_gather_grad_finite_differences(rng):
    x = rand_data(rng, (3, 4, 2), np.float64)
    idx = np.array([[3, 0], [3, -1], [1, 3]])
    w = rand_data(rng, (3, 3, 2, 2), np.float64)

    def f(xv):
        return float((np.take(xv, idx, axis=1) * w).sum())

    want = numeric_grad(f, x)
    got = ix.gather_grad(hl.tensor(w), idx, 1, x.shape).numpy()
    assert_close(got, want, rtol=1e-7, atol=1e-7)


def test_gather_grad_bad_arguments():
    dy = hl.zeros(2, 3)
    with pytest.raises(errors.ShapeError, match="gives shape"):
        ix.gather_grad(dy, [0, 1], 1, (2, 5, 7))
    with pytest.raises(errors.DTypeError, match="float32 or float64"):
        ix.gather_grad(hl.zeros(2, 3, dtype=hl.int32), [0, 1, 2], 1, (2, 5))
    with pytest.raises(errors.IndexError, match="index 5 is out of range for axis 1 of size 5"):
        ix.gather_grad(dy, [0, 5, 1], 1, (2, 5))
    with pytest.raises(errors.IndexError, match="axis 2"):
        ix.gather_grad(dy, [0, 1, 2], 2, (2, 5))
    with pytest.raises(errors.ValueError, match="negative size"):
        ix.gather_grad(dy, [0, 1, 2], 1, (2, -5))


# ---- gather_elements ---------------------------------------------------------------------

def gather_elements_ref(x, idx, axis):
    """torch.gather / ONNX GatherElements: x is cut to indices' size on the other axes."""
    axis = axis % x.ndim
    cut = tuple(slice(None) if d == axis else slice(0, s) for d, s in enumerate(idx.shape))
    n = x.shape[axis]
    return np.take_along_axis(x[cut], np.where(idx < 0, idx + n, idx).astype(np.int64), axis)


@pytest.mark.parametrize("dtype", DATA_DTYPES)
@pytest.mark.parametrize("idx_dtype", IDX_DTYPES)
def test_gather_elements(rng, dtype, idx_dtype):
    for trial in range(6):
        ndim = 1 + trial % 4
        shape = rand_shape(rng, ndim, 1, 5)
        axis = int(rng.integers(-ndim, ndim))
        a = axis % ndim
        ishape = tuple(int(rng.integers(0, s + 1)) if d != a else int(rng.integers(0, 6))
                       for d, s in enumerate(shape))
        if trial % 2:   # the common case: same shape except along the axis
            ishape = shape[:a] + (ishape[a],) + shape[a + 1:]
        x = rand_data(rng, shape, dtype)
        idx = rand_index(rng, shape[a], ishape, idx_dtype)
        check_op(lambda t, i: ix.gather_elements(t, i, axis),
                 lambda t, i: gather_elements_ref(t, i, axis), [x, idx])


def test_gather_elements_torch_and_large(rng):
    torch = pytest.importorskip("torch")
    x = rand_data(rng, (40, 300, 5), np.float32)
    idx = rng.integers(0, 300, size=(40, 500, 5))
    want = torch.gather(torch.from_numpy(x), 1, torch.from_numpy(idx)).numpy()
    assert_close(ix.gather_elements(hl.tensor(x), idx, 1), want)
    # an expanded (stride 0) x is read in place
    xe = hl.tensor(x[:1]).expand(40, 300, 5)
    assert_close(ix.gather_elements(xe, idx, 1),
                 torch.gather(torch.from_numpy(x[:1]).expand(40, 300, 5), 1,
                              torch.from_numpy(idx)).numpy())


def test_gather_elements_bad_arguments():
    x = hl.zeros(3, 4)
    with pytest.raises(errors.ShapeError, match="rank"):
        ix.gather_elements(x, [0, 1], 0)
    with pytest.raises(errors.ShapeError, match="larger than x"):
        ix.gather_elements(x, np.zeros((2, 5), np.int64), 0)
    with pytest.raises(errors.IndexError, match="index -5 is out of range for axis 1 of size 4"):
        ix.gather_elements(x, np.array([[0, -5]]), 1)
    with pytest.raises(errors.ValueError, match="overlaps"):
        ix.gather_elements(x, [[0]], 0, out=x[:1, :1])


# ---- scatter_elements --------------------------------------------------------------------

REDUCE = {
    "none": lambda a, b: b,
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": lambda a, b: np.maximum(a, b),
    "min": lambda a, b: np.minimum(a, b),
}


def scatter_ref(x, idx, upd, axis, reduction):
    """The ONNX reference loop: updates applied one by one in row-major order."""
    axis = axis % x.ndim
    out = x.copy()
    n = x.shape[axis]
    with np.errstate(over="ignore"):
        for pos in np.ndindex(*idx.shape):
            tgt = list(pos)
            tgt[axis] = int(idx[pos]) % n
            tgt = tuple(tgt)
            out[tgt] = REDUCE[reduction](out[tgt], upd[pos])
    return out


@pytest.mark.parametrize("reduction", list(REDUCE))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_scatter_elements(rng, reduction, dtype):
    for trial in range(5):
        ndim = 1 + trial % 3
        shape = rand_shape(rng, ndim, 1, 5)
        axis = int(rng.integers(-ndim, ndim))
        a = axis % ndim
        ishape = tuple(int(rng.integers(0, s + 1)) if d != a else int(rng.integers(0, 7))
                       for d, s in enumerate(shape))
        x = rand_data(rng, shape, dtype)
        idx = rand_index(rng, shape[a], ishape, IDX_DTYPES[trial % 2])   # with repeats
        upd = rand_data(rng, ishape, dtype)
        check_op(lambda t, i, u: ix.scatter_elements(t, i, u, axis, reduction),
                 lambda t, i, u: scatter_ref(t, i, u, axis, reduction), [x, idx, upd],
                 rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.bool_, np.float16])
def test_scatter_elements_moves_any_dtype(rng, dtype):
    x = rand_data(rng, (3, 4), dtype)
    idx = np.array([[1, 1, 0, 2], [1, 0, 0, 0]])
    upd = rand_data(rng, (2, 4), dtype)
    check_op(lambda t, i, u: ix.scatter_elements(t, i, u, 0),
             lambda t, i, u: scatter_ref(t, i, u, 0, "none"), [x, idx, upd])
    with pytest.raises(errors.DTypeError):
        ix.scatter_elements(hl.tensor(x), idx, hl.tensor(upd), 0, "add")


def test_scatter_elements_last_write_wins_and_nan():
    x = hl.zeros(4)
    got = ix.scatter_elements(x, [1, 1, 3, 1], [1.0, 2.0, 3.0, 4.0], 0)
    assert_close(got, np.array([0, 4, 0, 3], np.float32))
    got = ix.scatter_elements(hl.tensor([1.0, 1.0]), [0, 0, 1], [np.nan, 5.0, -1.0], 0, "max")
    assert_close(got, np.array([np.nan, 1.0], np.float32))
    # integer products wrap like numpy's: 1 * 2**30 * 4 = 2**32 -> 0 in int32
    got = ix.scatter_elements(hl.tensor([1, 2], dtype=hl.int32), [0, 0], [2**30, 4], 0, "mul")
    assert_close(got, np.array([0, 2], np.int32))


def test_scatter_elements_large_and_in_place(rng):
    x = rand_data(rng, (64, 700), np.float64)
    idx = rng.integers(-700, 700, size=(64, 900))
    upd = rand_data(rng, (64, 900), np.float64)
    want = scatter_ref(x, idx, upd, 1, "add")
    assert_close(ix.scatter_elements(hl.tensor(x), idx, upd, 1, "add"), want, rtol=1e-12)
    t = hl.tensor(x)
    r = ix.scatter_elements(t, idx, upd, 1, "add", out=t)
    assert_close(t, want, rtol=1e-12)
    assert r.shares_memory(t)
    # a scalar update
    assert_close(ix.scatter_elements(hl.tensor(x), idx[:, :3], 0.5, 1),
                 scatter_ref(x, idx[:, :3], np.full((64, 3), 0.5), 1, "none"))


def test_scatter_elements_bad_arguments():
    x = hl.zeros(3, 4)
    with pytest.raises(errors.ShapeError, match="updates .* must have the shape of indices"):
        ix.scatter_elements(x, np.zeros((2, 4), np.int64), hl.zeros(2, 3), 0)
    with pytest.raises(errors.ValueError, match="reduction"):
        ix.scatter_elements(x, [[0]], [[1.0]], 0, "mean")
    with pytest.raises(errors.IndexError, match="index 3 is out of range for axis 0 of size 3"):
        ix.scatter_elements(x, [[0, 3]], [[1.0, 2.0]], 0)
    with pytest.raises(errors.ShapeError, match="larger than x"):
        ix.scatter_elements(x, np.zeros((1, 5), np.int64), hl.zeros(1, 5), 0)
    with pytest.raises(errors.ValueError, match="not contiguous"):
        ix.scatter_elements(x, [[0]], [[1.0]], 0, out=x.flip(0))


# ---- one_hot -----------------------------------------------------------------------------

def one_hot_ref(idx, depth, axis, on, off, dtype):
    idx = np.asarray(idx).astype(np.int64)
    wrapped = np.where(idx < 0, idx + depth, idx)
    valid = (wrapped >= 0) & (wrapped < depth)
    eye = np.eye(depth)[np.where(valid, wrapped, 0)] * valid[..., None]
    out = eye * (on - off) + off
    return np.moveaxis(out, -1, axis % (idx.ndim + 1)).astype(dtype)


@pytest.mark.parametrize("idx_dtype", IDX_DTYPES)
@pytest.mark.parametrize("dtype", [hl.float32, hl.float64, hl.int32, hl.int64, hl.uint8,
                                   hl.bool_, hl.float16])
def test_one_hot(rng, idx_dtype, dtype):
    for trial in range(5):
        ndim = trial % 4
        ishape = rand_shape(rng, ndim, 0, 4)
        depth = int(rng.integers(1, 6))
        axis = int(rng.integers(-ndim - 1, ndim + 1))
        idx = rng.integers(-depth - 2, depth + 2, size=ishape).astype(idx_dtype)  # some outside
        on, off = (1, 0) if dtype is hl.bool_ else (3, -1 if dtype is not hl.uint8 else 2)
        check_op(lambda i: ix.one_hot(i, depth, axis, on, off, dtype),
                 lambda i: one_hot_ref(i, depth, axis, on, off, dtype.np), [idx])


def test_one_hot_defaults_and_errors(rng):
    idx = rng.integers(0, 10, size=(50, 70))
    assert_close(ix.one_hot(idx, 10), np.eye(10, dtype=np.float32)[idx])
    with pytest.raises(errors.ValueError, match="depth must be positive"):
        ix.one_hot([0], 0)
    with pytest.raises(errors.IndexError, match="axis 3 is out of range"):
        ix.one_hot([[0]], 3, axis=3)
    with pytest.raises(errors.DTypeError, match="integers"):
        ix.one_hot([0.5], 3)
    with pytest.raises(errors.ShapeError, match="at most 8"):
        ix.one_hot(np.zeros((1,) * 8, np.int32), 2)


# ---- nonzero -----------------------------------------------------------------------------

def nonzero_ref(x):
    return np.stack(np.nonzero(x)).astype(np.int64).reshape(x.ndim, -1)


@pytest.mark.parametrize("dtype", DATA_DTYPES)
def test_nonzero(rng, dtype):
    for ndim in range(1, 5):
        shape = rand_shape(rng, ndim, 0, 5)
        x = rand_data(rng, shape, dtype)
        if x.size and dtype != np.bool_:
            x.flat[rng.integers(0, x.size, size=x.size // 2)] = 0
        check_op(ix.nonzero, nonzero_ref, [x])


def test_nonzero_special_values(rng):
    x = np.array([0.0, -0.0, np.nan, 1e-30, -np.inf], np.float32)
    assert_close(ix.nonzero(hl.tensor(x)), np.array([[2, 3, 4]]))
    assert_close(ix.nonzero(hl.tensor(x.astype(np.float16))), np.array([[2, 4]]))  # 1e-30 -> 0
    big = rng.random((300, 500)) < 0.3    # several blocks, filled in parallel
    assert_close(ix.nonzero(hl.tensor(big)), nonzero_ref(big))
    # 0-d: ONNX gives (0, count)
    assert ix.nonzero(hl.tensor(5.0)).shape == (0, 1)
    assert ix.nonzero(hl.tensor(0)).shape == (0, 0)


def test_nonzero_refuses_plan_and_out():
    from hl import _core
    x = hl.tensor([1.0, 0.0])
    _core.check(_core.lib.hl_plan_begin())
    try:
        with pytest.raises(errors.UnsupportedError, match="cannot be recorded"):
            ix.nonzero(x)
    finally:
        p = _core.ffi.new("hl_plan *[1]")
        _core.check(_core.lib.hl_plan_end(p))
        _core.lib.hl_plan_release(p[0])
    with pytest.raises(errors.ValueError, match="cannot be given"):
        _core.call("nonzero", x._h, _core.out(hl.zeros(1, 1, dtype=hl.int64)._h))


# ---- topk --------------------------------------------------------------------------------

def topk_ref(x, k, axis, largest):
    """Stable sort: ties keep the lower index first; numpy sorts NaN last, so it is the
    largest. Descending order comes from a stable ascending sort of the reversed axis."""
    n = x.shape[axis]
    if largest:
        order = np.flip(np.argsort(np.flip(x, axis), axis=axis, kind="stable"), axis)
        order = n - 1 - order
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    order = np.take(order, np.arange(k), axis=axis)
    return np.take_along_axis(x, order, axis), order.astype(np.int64)


@pytest.mark.parametrize("largest", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.uint8])
def test_topk(rng, largest, dtype):
    for trial in range(6):
        ndim = 1 + trial % 3
        shape = rand_shape(rng, ndim, 0 if trial == 5 else 1, 7)
        axis = int(rng.integers(-ndim, ndim))
        n = shape[axis]
        k = int(rng.integers(0, n + 1))
        x = rng.integers(0, 4, size=shape).astype(dtype)   # many ties
        if np.dtype(dtype).kind == "f" and x.size:
            x.flat[rng.integers(0, x.size, size=max(1, x.size // 5))] = np.nan
            x.flat[rng.integers(0, x.size, size=max(1, x.size // 5))] = -0.0
        check_op(lambda t: ix.topk(t, k, axis, largest),
                 lambda a: topk_ref(a, k, axis, largest), [x])


def test_topk_large_and_torch(rng):
    x = rand_data(rng, (64, 1000), np.float32)
    for k, largest in [(1, True), (10, False), (1000, True)]:
        v, i = ix.topk(hl.tensor(x), k, 1, largest)
        wv, wi = topk_ref(x, k, 1, largest)
        assert_close(v, wv)
        assert_close(i, wi)
    torch = pytest.importorskip("torch")
    tv, ti = torch.topk(torch.from_numpy(x), 5, dim=0)
    v, i = ix.topk(hl.tensor(x), 5, 0)
    assert_close(v, tv.numpy())
    assert_close(i, ti.numpy())


def test_topk_bad_arguments():
    x = hl.zeros(3, 4)
    with pytest.raises(errors.ValueError, match="k = 5 is out of range for axis 1 of size 4"):
        ix.topk(x, 5)
    with pytest.raises(errors.ValueError, match="k = -1"):
        ix.topk(x, -1)
    with pytest.raises(errors.IndexError, match="axis 2"):
        ix.topk(x, 1, 2)
    with pytest.raises(errors.DTypeError, match="numeric"):
        ix.topk(hl.tensor([True, False]), 1)
    with pytest.raises(errors.DTypeError, match="float16"):
        ix.topk(hl.tensor(np.zeros(3, np.float16)), 1)


# ---- property tests: numpy's answer or an hl error, never a crash ---------------------------

PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@PROPS
@given(shape=shapes, axis=st.integers(-5, 5), idx=st.lists(st.integers(-7, 7), max_size=5),
       wide=st.booleans())
def test_gather_property(shape, axis, idx, wide):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    i = np.array(idx, dtype=np.int64 if wide else np.int32)
    try:
        want = np.take(x, i, axis=axis)
    except (IndexError, ValueError, np.exceptions.AxisError):
        want = None
    try:
        got = ix.gather(hl.tensor(x), i, axis)
    except errors.HLError:
        # hl also refuses what numpy lets through: a 0-d x (ONNX Gather needs rank >= 1), and
        # out-of-range indices when the result is empty anyway (numpy checks none then)
        assert want is None or x.ndim == 0 or want.size == 0
        return
    assert want is not None, "numpy refused, hl did not"
    assert_close(got, want)


@PROPS
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple),
       axis=st.integers(-4, 4), data=st.data(), reduction=st.sampled_from(list(REDUCE)))
def test_elements_property(shape, axis, data, reduction):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    ishape = tuple(data.draw(st.integers(0, s + 1)) for s in shape)
    idx = np.array(data.draw(st.lists(st.integers(-6, 6), min_size=int(np.prod(ishape)),
                                      max_size=int(np.prod(ishape)))),
                   dtype=np.int64).reshape(ishape)
    upd = np.ones(ishape) * 2
    ok = -len(shape) <= axis < len(shape)
    if ok:
        a = axis % len(shape)
        n = shape[a]
        ok = all(s <= shape[d] for d, s in enumerate(ishape) if d != a) and (
            idx.size == 0 or (idx.min() >= -n and idx.max() < n))
    if not ok:
        with pytest.raises(errors.HLError):
            ix.gather_elements(hl.tensor(x), idx, axis)
        with pytest.raises(errors.HLError):
            ix.scatter_elements(hl.tensor(x), idx, upd, axis, reduction)
        return
    assert_close(ix.gather_elements(hl.tensor(x), idx, axis), gather_elements_ref(x, idx, axis))
    assert_close(ix.scatter_elements(hl.tensor(x), idx, upd, axis, reduction),
                 scatter_ref(x, idx, upd, axis, reduction))


@PROPS
@given(ishape=shapes, depth=st.integers(-2, 5), axis=st.integers(-6, 6), data=st.data())
def test_one_hot_property(ishape, depth, axis, data):
    n = int(np.prod(ishape))
    idx = np.array(data.draw(st.lists(st.integers(-2**40, 2**40) | st.integers(-7, 7),
                                      min_size=n, max_size=n)), np.int64).reshape(ishape)
    if depth <= 0 or not -len(ishape) - 1 <= axis <= len(ishape):
        with pytest.raises(errors.HLError):
            ix.one_hot(idx, depth, axis)
        return
    assert_close(ix.one_hot(idx, depth, axis), one_hot_ref(idx, depth, axis, 1, 0, np.float32))


@PROPS
@given(shape=shapes, k=st.integers(-1, 6), axis=st.integers(-5, 5), largest=st.booleans(),
       data=st.data())
def test_topk_property(shape, k, axis, largest, data):
    n = int(np.prod(shape))
    x = np.array(data.draw(st.lists(st.sampled_from([0.0, 1.0, -1.0, np.nan, -0.0]),
                                    min_size=n, max_size=n)), np.float32).reshape(shape)
    if not (-len(shape) <= axis < len(shape)) or not 0 <= k <= shape[axis]:
        with pytest.raises(errors.HLError):
            ix.topk(hl.tensor(x), k, axis, largest)
        return
    v, i = ix.topk(hl.tensor(x), k, axis, largest)
    wv, wi = topk_ref(x, k, axis, largest)
    assert_close(v, wv)
    assert_close(i, wi)


@PROPS
@given(shape=shapes, data=st.data())
def test_nonzero_property(shape, data):
    n = int(np.prod(shape))
    x = np.array(data.draw(st.lists(st.sampled_from([0, 1, 2]), min_size=n, max_size=n)),
                 np.int32).reshape(shape)
    if x.ndim == 0:
        assert ix.nonzero(hl.tensor(x)).shape == (0, int(x != 0))
        return
    assert_close(ix.nonzero(hl.tensor(x)), nonzero_ref(x))
