"""concat, stack, pad and tile against numpy: random shapes (size-0 and size-1 axes included),
every layout of the inputs (contiguous, strided, transposed), every dtype they move, the
error each bad argument raises, and hypothesis properties: numpy's answer or an hl error,
never a crash. These ops only move elements, so results must equal numpy exactly."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hl
from hl import _core, errors
from tests.ops.harness import LAYOUTS, assert_close, check_guard, check_op

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16]
PROPS = settings(max_examples=60, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow])


def _values(rng, shape, dtype):
    a = np.asarray(rng.integers(-50, 50, size=shape))
    return (a % 2 == 0) if dtype is np.bool_ else a.astype(dtype)


def _shape(rng, ndim, lo=0, hi=4):
    return tuple(int(s) for s in rng.integers(lo, hi + 1, size=ndim))


# ---- concat and stack ----------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_concat_matches_numpy(rng, dtype):
    for _ in range(6):
        ndim = int(rng.integers(1, 4))
        axis = int(rng.integers(-ndim, ndim))
        base = _shape(rng, ndim, 1, 4)
        parts = []
        for _ in range(int(rng.integers(1, 5))):
            s = list(base)
            s[axis] = int(rng.integers(0, 4))  # size-0 parts included
            parts.append(_values(rng, s, dtype))
        check_op(lambda *xs: hl.concat(xs, axis), lambda *xs: np.concatenate(xs, axis), parts)


def test_concat_many_inputs(rng):
    """More parts than a call record holds inline (the in_many path)."""
    parts = [rng.standard_normal((2, int(rng.integers(0, 3)), 3)).astype(np.float32)
             for _ in range(11)]
    check_op(lambda *xs: hl.concat(xs, 1), lambda *xs: np.concatenate(xs, 1), parts)
    one = [rng.standard_normal((3, 2))]
    check_op(lambda *xs: hl.concat(xs, -1), lambda *xs: np.concatenate(xs, -1), one)


def test_concat_promotes_dtypes_like_numpy():
    a, b = np.arange(3, dtype=np.int32), np.ones(2, dtype=np.float64)
    got = hl.concat([hl.tensor(a), hl.tensor(b)])
    assert got.dtype is hl.float64
    assert_close(got, np.concatenate([a, b]))


def test_concat_writes_only_its_output(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((4, 3))
    xs = [hl.tensor(a.astype(np.float32)), hl.tensor(b.astype(np.float32))]
    arr = _core.tensor_array([x._h for x in xs])
    out = check_guard(lambda o: _core.call("concat", 2, arr, 0, _core.out(o._h)), (6, 3))
    assert_close(out, np.concatenate([a, b]).astype(np.float32))


def test_concat_into_a_strided_output(rng):
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((2, 1))
    big = hl.zeros(2, 8, dtype=hl.float64)
    out = big[:, ::2]
    xs = [hl.tensor(a), hl.tensor(b)]  # the handle array does not keep its tensors alive
    arr = _core.tensor_array([x._h for x in xs])
    _core.call("concat", 2, arr, 1, _core.out(out._h))
    assert_close(big.numpy()[:, ::2], np.concatenate([a, b], 1))
    assert (big.numpy()[:, 1::2] == 0).all()


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.bool_])
def test_stack_matches_numpy(rng, dtype):
    for axis in (0, 1, -1, 2):
        xs = [_values(rng, (2, 3), dtype) for _ in range(3)]
        check_op(lambda *ts: hl.stack(ts, axis), lambda *a: np.stack(a, axis), xs)


def test_concat_bad_inputs():
    f32, f64 = hl.zeros(2, 3), hl.zeros(2, 3, dtype=hl.float64)

    def core_concat(xs, axis):
        arr = _core.tensor_array([x._h for x in xs])
        return _core.call("concat", len(xs), arr, axis, _core.OUT)

    with pytest.raises(errors.DTypeError, match="cast them to one dtype"):
        core_concat([f32, f64], 0)
    with pytest.raises(errors.ShapeError, match="same number of dimensions"):
        hl.concat([f32, hl.zeros(2, 3, 1)])
    with pytest.raises(errors.ShapeError, match=r"axis 1 differs"):
        hl.concat([f32, hl.zeros(2, 4)], 0)
    with pytest.raises(errors.IndexError, match="axis"):
        hl.concat([f32, f32], 2)
    with pytest.raises(errors.IndexError, match="axis"):
        hl.concat([f32, f32], -3)
    with pytest.raises(errors.ShapeError, match="zero-dimensional"):
        hl.concat([hl.tensor(1.0), hl.tensor(2.0)])
    with pytest.raises(errors.ValueError, match="at least one"):
        hl.concat([])
    with pytest.raises(errors.ValueError, match="at least one"):
        core_concat([], 0)
    with pytest.raises(errors.ValueError, match="overlaps"):
        arr = _core.tensor_array([f32._h, f32._h])
        big = hl.zeros(4, 3)
        halves = [big[:2], big[2:]]
        arr = _core.tensor_array([h._h for h in halves])
        _core.call("concat", 2, arr, 0, _core.out(big._h))
    with pytest.raises(errors.ShapeError, match="output tensor given"):
        arr = _core.tensor_array([f32._h, f32._h])
        wrong = hl.zeros(4, 4)
        _core.call("concat", 2, arr, 0, _core.out(wrong._h))
    with pytest.raises(errors.ShapeError):
        hl.stack([f32, hl.zeros(3, 2)])


# ---- pad -------------------------------------------------------------------------------------

def _np_pad(a, pads, mode, value=0):
    """ONNX pads (begins then ends, negative crops) through slicing and np.pad."""
    nd = a.ndim
    if nd == 0:
        return a.copy()
    begins, ends = pads[:nd], pads[nd:]
    crop = tuple(slice(max(0, -b), a.shape[d] - max(0, -e))
                 for d, (b, e) in enumerate(zip(begins, ends)))
    widths = [(max(0, b), max(0, e)) for b, e in zip(begins, ends)]
    kw = {"constant_values": value} if mode == "constant" else {}
    return np.pad(a[crop], widths, mode=mode, **kw)


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
@pytest.mark.parametrize("dtype", DTYPES)
def test_pad_matches_numpy(rng, mode, dtype):
    for _ in range(5):
        ndim = int(rng.integers(1, 4))
        shape = _shape(rng, ndim, 1 if mode != "constant" else 0, 5)
        a = _values(rng, shape, dtype)
        if mode == "reflect":
            widths = [(int(rng.integers(0, n)), int(rng.integers(0, n))) for n in shape]
        else:
            widths = [(int(rng.integers(0, 4)), int(rng.integers(0, 4))) for _ in shape]
        value = 1 if dtype is np.bool_ else 7
        kw = {"constant_values": value} if mode == "constant" else {}
        check_op(lambda t: hl.pad(t, widths, mode=mode, value=value),
                 lambda x: np.pad(x, widths, mode=mode, **kw), [a])


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge"])
def test_pad_negative_pads_crop(rng, mode):
    for _ in range(8):
        shape = _shape(rng, 3, 5, 7)
        a = rng.standard_normal(shape)
        pads = [int(rng.integers(-2, 3)) for _ in range(6)]  # reflect keeps >= 3 > any pad
        check_op(lambda t: hl.pad(t, pads, mode=mode, value=-1.5),
                 lambda x: _np_pad(x, pads, mode, -1.5), [a])


def test_pad_flat_onnx_order_and_edge_cases(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    assert_close(hl.pad(hl.tensor(a), [1, 0, 2, 3]), np.pad(a, ((1, 2), (0, 3))))
    assert_close(hl.pad(hl.tensor(a), [0, 0, 0, 0]), a)
    # crop everything away
    assert hl.pad(hl.tensor(a), [-1, 0, -1, 0]).shape == (0, 3)
    # pad an empty axis with a constant
    e = np.zeros((0, 2), np.float32)
    assert_close(hl.pad(hl.tensor(e), [1, 0, 2, 1], value=3), np.full((3, 3), 3, np.float32))
    # a 0-d tensor takes no pads
    assert_close(hl.pad(hl.tensor(np.float64(2.5)), []), np.float64(2.5))
    # numpy's short forms: one int, or one pair, for every axis
    assert_close(hl.pad(hl.tensor(a), 2), np.pad(a, 2))
    assert_close(hl.pad(hl.tensor(a), [(1, 2)], mode="edge"), np.pad(a, [(1, 2)], mode="edge"))
    assert_close(hl.tile(hl.tensor(a), np.int64(2)), np.tile(a, 2))
    # replicate is edge
    assert_close(hl.pad(hl.tensor(a), ((1, 1), (2, 0)), mode="replicate"),
                 np.pad(a, ((1, 1), (2, 0)), mode="edge"))
    # NaN and inf move untouched
    b = np.array([np.nan, np.inf, -np.inf], np.float32)
    assert_close(hl.pad(hl.tensor(b), [(2, 2)], mode="reflect"), np.pad(b, 2, mode="reflect"))


def test_pad_writes_only_its_output(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    out = check_guard(lambda o: _core.call("pad", hl.tensor(a)._h, [1, 1, 0, 2], 1, 0.0,
                                           _core.out(o._h)), (4, 7))
    assert_close(out, np.pad(a, ((1, 0), (1, 2)), mode="reflect"))


def test_pad_bad_inputs():
    x = hl.zeros(2, 3)
    with pytest.raises(errors.ValueError, match="smaller than the axis size"):
        hl.pad(x, ((0, 2), (0, 0)), mode="reflect")
    with pytest.raises(errors.ValueError, match="smaller than the axis size"):
        hl.pad(x, [0, 0, 0, 3], mode="reflect")
    with pytest.raises(errors.ValueError, match="smaller than the axis size"):
        hl.pad(x, [0, -1, 0, 2], mode="reflect")  # 2 kept on axis 1 after the crop
    with pytest.raises(errors.ValueError, match="empty axis"):
        hl.pad(hl.zeros(0, 3), [1, 0, 0, 0], mode="edge")
    with pytest.raises(errors.ShapeError, match="crop more than"):
        hl.pad(x, [-2, 0, -1, 0])
    with pytest.raises(errors.ShapeError, match="crop more than"):
        hl.pad(x, [0, -5, 0, 9])
    with pytest.raises(errors.ValueError, match="expected 4 pad amounts"):
        hl.pad(x, [1, 1])
    with pytest.raises(errors.ValueError, match="pairs"):
        hl.pad(x, [(1, 1)] * 3)
    with pytest.raises(errors.ValueError, match="pairs"):
        hl.pad(x, [(1, 1, 1), (1, 1, 1)])
    with pytest.raises(errors.ValueError, match="mode must be"):
        hl.pad(x, [0, 0, 0, 0], mode="wrap")
    with pytest.raises(errors.ValueError, match="mode 7"):
        _core.call("pad", x._h, [0, 0, 0, 0], 7, 0.0, _core.OUT)
    with pytest.raises(errors.MemoryError, match="too large"):
        hl.pad(x, [2**62, 0, 2**62, 0])
    with pytest.raises(errors.ValueError, match="overlaps"):
        big = hl.zeros(2, 5)
        _core.call("pad", big[:, :3]._h, [0, 0, 0, 2], 0, 0.0, _core.out(big._h))


# ---- tile ------------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
def test_tile_matches_numpy(rng, dtype):
    for _ in range(5):
        ndim = int(rng.integers(0, 4))
        a = _values(rng, _shape(rng, ndim, 0, 3), dtype)
        reps = [int(r) for r in rng.integers(0, 4, size=int(rng.integers(0, 5)))]
        check_op(lambda t: hl.tile(t, reps), lambda x: np.tile(x, reps), [a])


def test_tile_int_repeat_and_large_inner(rng):
    a = rng.standard_normal((3, 70000)).astype(np.float32)  # big enough to run in parallel
    assert_close(hl.tile(hl.tensor(a), 2), np.tile(a, 2))
    assert_close(hl.tile(LAYOUTS["strided"](a), (2, 1)), np.tile(a, (2, 1)))


def test_tile_bad_inputs():
    x = hl.zeros(2, 3)
    with pytest.raises(errors.ValueError, match="negative repeat"):
        hl.tile(x, (1, -1))
    with pytest.raises(errors.MemoryError, match="too large"):
        hl.tile(x, (2**62, 2**62))
    with pytest.raises(errors.ValueError, match="repeats is NULL"):
        _core.call("tile", x._h, None, _core.OUT)


# ---- properties: numpy's answer or an hl error, never a crash ------------------------------

shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3).map(tuple)


@PROPS
@given(shape=shapes, data=st.data(), mode=st.sampled_from(["constant", "reflect", "edge"]))
def test_pad_property(shape, data, mode):
    nd = len(shape)
    pads = data.draw(st.lists(st.integers(-5, 5), min_size=2 * nd, max_size=2 * nd))
    a = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    begins, ends = pads[:nd], pads[nd:]
    kept = [n - max(0, -b) - max(0, -e) for n, b, e in zip(shape, begins, ends)]
    valid = all(k >= 0 for k in kept)
    if valid and mode == "reflect":
        valid = all(max(b, e, 0) < k or max(b, e) <= 0 for k, b, e in zip(kept, begins, ends))
    if valid and mode == "edge":
        valid = all(k > 0 or max(b, e) <= 0 for k, b, e in zip(kept, begins, ends))
    try:
        got = hl.pad(hl.tensor(a), pads, mode=mode, value=-1)
    except errors.HLError:
        assert not valid, f"valid pads {pads} for {shape} rejected"
        return
    assert valid, f"invalid pads {pads} for {shape} accepted"
    assert_close(got, _np_pad(a, pads, mode, -1))


@PROPS
@given(shape=shapes, reps=st.lists(st.integers(-2, 3), max_size=4))
def test_tile_property(shape, reps):
    a = np.arange(int(np.prod(shape)), dtype=np.int64).reshape(shape)
    try:
        want = np.tile(a, reps)
    except ValueError:
        want = None
    try:
        got = hl.tile(hl.tensor(a), reps)
    except errors.HLError:
        # numpy accepts negative repeats of an empty array; hl refuses every negative repeat
        assert want is None or min(reps) < 0
        return
    assert want is not None, "numpy refused, hl accepted"
    assert_close(got, want)


@PROPS
@given(shapes_=st.lists(shapes, min_size=1, max_size=8), axis=st.integers(-4, 4))
def test_concat_property(shapes_, axis):
    arrays = [np.full(s, k, dtype=np.int32) for k, s in enumerate(shapes_)]
    try:
        want = np.concatenate(arrays, axis)
    except (ValueError, np.exceptions.AxisError):
        with pytest.raises(errors.HLError):
            hl.concat([hl.tensor(a) for a in arrays], axis)
        return
    assert_close(hl.concat([hl.tensor(a) for a in arrays], axis), want)
