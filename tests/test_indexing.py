"""Tensor indexing (hl/ops/shape.py getitem / setitem) against numpy: ints, negative ints,
slices with any step (negative too, bounds clamped as in Python), None, Ellipsis; assignment
with broadcasting and through bool masks; and the errors: an index out of range or too many
indices raise hl.errors.IndexError (which is also Python's IndexError)."""
import numpy as np
import pytest

import hl
from hl import errors

from tests.ops.harness import LAYOUTS


def _data(shape):
    return np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)


def _same(t, a):
    assert t.shape == a.shape, (t.shape, a.shape)
    np.testing.assert_array_equal(t.numpy(), a)


def _random_key(rng, shape):
    """A basic index for shape: per axis an int, a slice or nothing, with None and one
    Ellipsis sprinkled in."""
    key = []
    ndim = len(shape)
    n_used = int(rng.integers(0, ndim + 1))
    for ax in range(n_used):
        n = shape[ax]
        r = rng.random()
        if r < 0.3 and n:
            key.append(int(rng.integers(-n, n)))
        else:
            pick = lambda: None if rng.random() < 0.3 else int(rng.integers(-n - 2, n + 3))
            step = None if rng.random() < 0.3 else int(rng.choice([-3, -2, -1, 1, 2, 3]))
            key.append(slice(pick(), pick(), step))
        if rng.random() < 0.15:
            key.append(None)
    if rng.random() < 0.3:  # anywhere when every axis is indexed, else last
        key.insert(int(rng.integers(0, len(key) + 1)) if n_used == ndim else len(key), Ellipsis)
    if rng.random() < 0.2:
        key.insert(int(rng.integers(0, len(key) + 1)), None)
    return tuple(key)


SHAPES = [(5,), (3, 4), (2, 3, 4), (4, 1, 3), (0, 3), (2, 0), (), (2, 2, 2, 2, 2)]


@pytest.mark.parametrize("shape", SHAPES)
def test_basic_indexing_matches_numpy(shape, rng):
    x = _data(shape)
    for layout, make in LAYOUTS.items():
        t = make(x)
        for _ in range(40):
            key = _random_key(rng, shape)
            want = x[key]
            got = t[key]
            _same(got, np.asarray(want))
            if isinstance(want, np.ndarray) and want.size:
                assert got.shares_memory(t), key


@pytest.mark.parametrize("key", [0, -1, 2, slice(None), slice(None, None, -1), slice(5, -7, -2),
                                 slice(-100, 100), slice(3, 1), (Ellipsis, 1), (None, 1, None),
                                 (1, Ellipsis, None), (slice(1, None, 2), -2), Ellipsis, None,
                                 (None, Ellipsis, None), ()])
def test_specific_keys(key):
    x = _data((4, 5))
    _same(hl.tensor(x)[key], np.asarray(x[key]))


def test_integer_like_keys():
    x = _data((4, 5))
    t = hl.tensor(x)
    _same(t[np.int64(2)], x[2])
    _same(t[hl.tensor(3)], x[3])
    _same(t[1, np.int32(-1)], np.asarray(x[1, -1]))


def test_index_out_of_range():
    t = hl.tensor(_data((3, 4)))
    for key in (3, -4, (0, 4), (0, -5), (Ellipsis, 7)):
        with pytest.raises(errors.IndexError, match="out of bounds for axis"):
            t[key]
    with pytest.raises(IndexError):             # the built-in catches it too
        t[10]
    with pytest.raises(errors.IndexError, match="index 0 is out of bounds for axis 0 with size 0"):
        hl.zeros(0, 3)[0]


def test_too_many_indices():
    t = hl.tensor(_data((3, 4)))
    with pytest.raises(errors.IndexError, match="too many indices for a tensor of 2 dimensions"):
        t[0, 0, 0]
    with pytest.raises(errors.IndexError, match="too many indices"):
        hl.tensor(1.0)[0]
    with pytest.raises(errors.IndexError, match="single ellipsis"):
        t[..., 0, ...]


def test_unsupported_keys():
    t = hl.tensor(_data((3, 4)))
    with pytest.raises(errors.IndexError, match="unsupported index"):
        t["a"]
    with pytest.raises(errors.IndexError, match="unsupported index"):
        t[1.5]
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        t[::0]


def test_iteration_indexes_rows():
    x = _data((3, 2))
    for row, want in zip(hl.tensor(x), x):
        _same(row, want)


# ---- assignment ------------------------------------------------------------------------------

SETS = [((1,), 5.0), ((slice(None), 1), [1.0, 2.0, 3.0]), ((slice(None, None, -2),), [7.0] * 4),
        ((Ellipsis, -1), 9.0), ((0, slice(1, 3)), np.array([8.0, 9.0])), ((None, 1), [[1] * 4]),
        ((slice(1, 3), slice(None, None, 3)), [[1.0], [2.0]]), ((slice(5, 9),), 1.0),
        ((-1, -1), 4), ((), 0.5)]


@pytest.mark.parametrize("key,value", SETS, ids=[str(k) for k, _ in SETS])
def test_setitem_broadcasts(key, value):
    x = _data((3, 4))
    for layout, make in LAYOUTS.items():
        t = make(x)
        t[key] = value
        want = x.copy()
        want[key] = value
        _same(t, want)


def test_setitem_with_a_tensor_casts_and_broadcasts():
    t = hl.zeros(2, 3, dtype=hl.int32)
    t[1] = hl.tensor([1.9, -2.9, 3.0], dtype=hl.float64)
    _same(t, np.array([[0, 0, 0], [1, -2, 3]], np.int32))
    t[:, 0] = hl.tensor(7)
    _same(t[:, 0], np.array([7, 7], np.int32))


def test_setitem_errors():
    t = hl.zeros(2, 3)
    with pytest.raises(errors.ShapeError, match="copy: cannot assign"):
        t[0] = [1.0, 2.0]
    with pytest.raises(errors.IndexError, match="out of bounds"):
        t[2] = 1.0
    with pytest.raises(errors.IndexError, match="too many indices"):
        t[0, 0, 0] = 1.0


def test_setitem_with_a_mask():
    x = np.array([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], np.float32)
    for layout, make in LAYOUTS.items():
        t = make(x)
        t[t < 0] = 0.0
        _same(t, np.where(x < 0, 0, x))
        t = make(x)
        t[x > 2] = hl.tensor([10.0, 20.0, 30.0])     # broadcast over the masked positions' rows
        want = x.copy()
        want[x > 2] = np.broadcast_to([10.0, 20.0, 30.0], x.shape)[x > 2]
        _same(t, want)


def test_setitem_mask_of_another_shape_is_refused():
    t = hl.zeros(2, 3)
    with pytest.raises(errors.UnsupportedError, match="mask of the tensor's shape"):
        t[hl.tensor([True, False])] = 1.0


# ---- advanced indexing (needs the gather kernels of hl.ops.index) ------------------------------

def _has_gather():
    from hl.ops import index
    return hasattr(index, "gather_forward") and hasattr(index, "nonzero")


needs_gather = pytest.mark.skipif(not _has_gather(), reason="hl.ops.index is not merged yet")


@needs_gather
@pytest.mark.parametrize("key", [[0, 2], (slice(None), [3, 0, -1]), (1, [0, 0]),
                                 (Ellipsis, np.array([1, 2])), (None, [1])])
def test_integer_array_index(key):
    x = _data((3, 4))
    _same(hl.tensor(x)[key], x[key])


@needs_gather
def test_bool_mask_index():
    x = _data((3, 4))
    t = hl.tensor(x)
    _same(t[t > 5], x[x > 5])
    _same(t[np.array([True, False, True])], x[np.array([True, False, True])])


@needs_gather
def test_integer_array_index_out_of_range():
    with pytest.raises(errors.IndexError):
        hl.tensor(_data((3, 4)))[[0, 3]]
