"""DataLoader: every sample once per epoch, batch sizes and drop_last, seeded shuffles that
reproduce and change per epoch, several arrays kept aligned, Tensor batches."""
import math

import numpy as np
import pytest

import hl
from hl.data import DataLoader


@pytest.mark.parametrize("n,bs,drop_last", [(10, 3, False), (10, 3, True), (12, 4, False),
                                            (12, 4, True), (5, 8, False), (5, 8, True)])
@pytest.mark.parametrize("shuffle", [False, True])
def test_each_sample_once_per_epoch(n, bs, drop_last, shuffle):
    x = np.arange(n)
    loader = DataLoader(x, batch_size=bs, shuffle=shuffle, seed=3, drop_last=drop_last)
    expected_batches = n // bs if drop_last else math.ceil(n / bs)
    assert len(loader) == expected_batches
    for _ in range(3):
        batches = list(loader)
        assert len(batches) == expected_batches
        sizes = [len(b) for b in batches]
        assert all(s == bs for s in sizes[:-1])
        if drop_last:
            assert all(s == bs for s in sizes)
        seen = np.concatenate(batches) if batches else np.array([], int)
        assert len(np.unique(seen)) == len(seen)  # nothing twice
        if not drop_last:
            np.testing.assert_array_equal(np.sort(seen), x)  # everything once
        else:
            assert len(seen) == (n // bs) * bs
        if not shuffle:
            np.testing.assert_array_equal(seen, x[:len(seen)])


def test_seeded_shuffles_reproduce_and_differ_per_epoch():
    x = np.arange(50)
    orders = [np.concatenate(list(DataLoader(x, batch_size=7, shuffle=True, seed=11)))
              for _ in range(2)]
    np.testing.assert_array_equal(orders[0], orders[1])  # same seed, same first epoch
    loader = DataLoader(x, batch_size=7, shuffle=True, seed=11)
    epochs = [np.concatenate(list(loader)) for _ in range(4)]
    np.testing.assert_array_equal(epochs[0], orders[0])
    for i in range(4):
        assert not np.array_equal(epochs[i], x)
        for j in range(i):
            assert not np.array_equal(epochs[i], epochs[j])  # a new order every epoch
    other = np.concatenate(list(DataLoader(x, batch_size=7, shuffle=True, seed=12)))
    assert not np.array_equal(other, orders[0])
    loader.set_epoch(2)  # resuming a run: epoch 2's order again
    np.testing.assert_array_equal(np.concatenate(list(loader)), epochs[2])
    unseeded = DataLoader(x, batch_size=7, shuffle=True)
    assert not np.array_equal(np.concatenate(list(unseeded)), np.concatenate(list(unseeded)))


def test_several_arrays_stay_aligned():
    x = np.arange(20, dtype=np.float32).reshape(10, 2)
    y = np.arange(10) * 10
    w = np.linspace(0, 1, 10)
    loader = DataLoader(x, y, w, batch_size=4, shuffle=True, seed=0)
    got = list(loader)
    assert all(isinstance(b, tuple) and len(b) == 3 for b in got)
    for xb, yb, wb in got:
        np.testing.assert_array_equal(xb[:, 0] / 2 * 10, yb)
        np.testing.assert_allclose(wb, yb / 90)
        assert xb.dtype == np.float32 and xb.shape[1:] == (2,)
    assert sorted(np.concatenate([b[1] for b in got]).tolist()) == y.tolist()
    by_keyword = list(DataLoader(x, y=y, batch_size=4, shuffle=True, seed=0))
    for (xb, yb, _), (xk, yk) in zip(got, by_keyword):
        np.testing.assert_array_equal(xb, xk)
        np.testing.assert_array_equal(yb, yk)


def test_tensor_batches_and_tensor_input():
    x = hl.tensor(np.arange(12, dtype=np.float32).reshape(6, 2))
    y = np.arange(6)
    loader = DataLoader(x, y, batch_size=4, as_tensor=True)
    (xb, yb), (xb2, yb2) = list(loader)
    assert isinstance(xb, hl.Tensor) and isinstance(yb, hl.Tensor)
    assert xb.shape == (4, 2) and xb2.shape == (2, 2) and yb.dtype is hl.int64
    np.testing.assert_array_equal(xb2.numpy(), [[8, 9], [10, 11]])


def test_loader_argument_errors():
    with pytest.raises(hl.errors.ShapeError, match=r"different lengths \[3, 4\]"):
        DataLoader(np.zeros(3), np.zeros(4))
    with pytest.raises(hl.errors.ValueError, match="batch_size"):
        DataLoader(np.zeros(3), batch_size=0)
    with pytest.raises(hl.errors.ShapeError, match="0-d"):
        DataLoader(np.zeros(3), np.float32(1.0))
    with pytest.raises(hl.errors.ValueError, match="at least one"):
        DataLoader()


def test_digits_through_the_loader():
    (x, y), _ = hl.data.digits()
    loader = DataLoader(x, y, batch_size=64, shuffle=True, seed=0, drop_last=True)
    assert len(loader) == len(x) // 64
    xb, yb = next(iter(loader))
    assert xb.shape == (64, 1, 8, 8) and yb.shape == (64,)
