"""Layer.save_weights / load_weights: plain HDF5, one group per layer."""
import h5py
import numpy as np
import pytest

import hl
from hl import layers as L
from hl.errors import CheckpointError

from .models import built, same_states, snapshot


class Block(L.Layer):
    def __init__(self):
        super().__init__()
        self.conv1 = L.Conv2d(3, 3, padding=1)
        self.bn1 = L.BatchNorm2d()

    def forward(self, x):
        return self.bn1(self.conv1(x))


class Deep(hl.Module):
    def __init__(self):
        super().__init__()
        self.blk1 = Block()
        self.blocks = [Block(), Block()]
        self.head = L.Linear(2)

    def forward(self, x):
        x = self.blk1(x)
        for b in self.blocks:
            x = b(x)
        return self.head(x.reshape(x.shape[0], -1))


def test_plain_h5py_reads_one_group_per_layer(tmp_path):
    m = Deep()
    m(hl.randn(2, 3, 4, 4))
    m.save_weights(tmp_path / "w.h5")
    states = m.get_states()
    with h5py.File(tmp_path / "w.h5", "r") as f:
        assert isinstance(f["blk1"], h5py.Group) and isinstance(f["blk1/conv1"], h5py.Group)
        assert isinstance(f["blocks/1/bn1"], h5py.Group)
        np.testing.assert_array_equal(f["blk1/conv1/W"][()], states["blk1.conv1.W"].numpy())
        np.testing.assert_array_equal(f["blocks/1/bn1/running_var"][()],
                                      states["blocks.1.bn1.running_var"].numpy())
        names = []
        f.visititems(lambda p, o: names.append(o.attrs["name"])
                     if isinstance(o, h5py.Dataset) else None)
    assert sorted(names) == sorted(states)


def test_round_trip_and_mismatch(tmp_path):
    a = built()
    a.train_one_batch(hl.randn(4, 1, 5, 5), hl.tensor([0, 1, 2, 1]))
    a.save_weights(tmp_path / "w.h5")
    b = built()
    b.load_weights(tmp_path / "w.h5")
    assert same_states(b, snapshot(a))
    d = Deep()
    d(hl.randn(2, 3, 4, 4))
    snap = snapshot(d)
    with pytest.raises(CheckpointError, match="missing from the file"):
        d.load_weights(tmp_path / "w.h5")
    assert same_states(d, snap)
    with h5py.File(tmp_path / "other.h5", "w") as f:
        f["x"] = np.ones(3)
    with pytest.raises(CheckpointError, match="not an hl weights file"):
        b.load_weights(tmp_path / "other.h5")
    (tmp_path / "junk.h5").write_bytes(b"not hdf5 at all")
    with pytest.raises(CheckpointError, match="not a readable HDF5 file"):
        b.load_weights(tmp_path / "junk.h5")
