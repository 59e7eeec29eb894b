"""SINGA's checkpoint zip, both directions. The SINGA-side files are built here from the
layout SINGA's Model.save_states writes (tensor_dict.npz + states_attr.json, deflated), not
with hl's own writer."""
import io
import json
import zipfile

import numpy as np
import pytest

import hl
from hl.errors import CheckpointError

from .models import built, same_states, snapshot

FLOAT32, FLOAT16, INT32 = 0, 1, 2


def singa_zip(path, arrays, attrs):
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("tensor_dict.npz", npz.getvalue())
        z.writestr("states_attr.json", json.dumps(attrs))


def singa_checkpoint(path, model_values, aux):
    arrays, attrs = {}, {}
    for k, v in model_values.items():
        arrays[k] = v
        attrs[k] = {"state_type": 0, "shape": list(v.shape), "dtype": FLOAT32}
    for k, (v, code) in aux.items():
        arrays[k] = v
        attrs[k] = {"state_type": 1, "shape": list(v.shape), "dtype": code}
    singa_zip(path, arrays, attrs)


def test_load_a_singa_checkpoint(tmp_path, rng):
    m = built()
    values = {k: rng.standard_normal(t.shape).astype(np.float32)
              for k, t in m.get_states().items()}
    aux = {"epoch": (np.array(12, dtype=np.int32), INT32),
           "emb": (rng.standard_normal((2, 3)).astype(np.float16), FLOAT16),
           "lr": (np.array(0.05, dtype=np.float32), FLOAT32)}
    singa_checkpoint(tmp_path / "singa.zip", values, aux)
    got = m.load_states(tmp_path / "singa.zip")
    for k, v in values.items():
        np.testing.assert_array_equal(m.get_states()[k].numpy(), v)
    assert set(got) == {"epoch", "emb", "lr"}
    assert isinstance(got["epoch"], hl.Tensor) and int(got["epoch"]) == 12   # SINGA: tensors
    assert got["emb"].dtype is hl.float16
    np.testing.assert_array_equal(got["emb"].numpy(), aux["emb"][0])


def test_save_in_singa_layout(tmp_path):
    m = built()
    m.train_one_batch(hl.randn(4, 1, 5, 5), hl.tensor([0, 1, 2, 0]))
    m.save_states(tmp_path / "s.zip", {"epoch": 5, "lr": 0.01, "optim": m.optim,
                                       "mask": hl.tensor([True, False])}, format="singa")
    with zipfile.ZipFile(tmp_path / "s.zip") as z:
        assert sorted(z.namelist()) == ["states_attr.json", "tensor_dict.npz"]
        attrs = json.loads(z.read("states_attr.json"))
        npz = np.load(io.BytesIO(z.read("tensor_dict.npz")), allow_pickle=False)
    states = m.get_states()
    for k, t in states.items():
        assert attrs[k] == {"state_type": 0, "shape": list(t.shape), "dtype": FLOAT32}
        np.testing.assert_array_equal(npz[k], t.numpy())
    assert attrs["epoch"] == {"state_type": 1, "shape": [], "dtype": INT32}
    assert npz["epoch"] == 5 and npz["epoch"].dtype == np.int32
    assert attrs["lr"]["dtype"] == FLOAT32 and npz["lr"] == np.float32(0.01)
    assert attrs["mask"]["dtype"] == 5 and npz["mask"].dtype == np.uint8  # SINGA's kUChar
    assert attrs["optim/step"]["state_type"] == 1
    momentum = "optim/fc.W:momentum_buffer"
    np.testing.assert_array_equal(npz[momentum],
                                  m.optim.get_states()["fc.W:momentum_buffer"].numpy())

    other = built()
    aux = other.load_states(tmp_path / "s.zip")        # and back: the optimiser restores
    assert same_states(other, snapshot(m))
    opt = hl.opt.SGD(lr=0.05, momentum=0.9)
    opt.set_states(aux["optim"])
    assert opt.step_count == 1


def test_singa_format_refuses_what_it_cannot_hold(tmp_path):
    m = built()
    with pytest.raises(CheckpointError, match="SINGA's format holds only tensors"):
        m.save_states(tmp_path / "s.zip", {"name": "run"}, format="singa")
    with pytest.raises(CheckpointError, match="beyond int32"):
        m.save_states(tmp_path / "s.zip", {"big": hl.tensor([2 ** 40])}, format="singa")
    with pytest.raises(CheckpointError, match="also a state"):
        m.save_states(tmp_path / "s.zip", {"fc.W": hl.ones(1)}, format="singa")
    assert not (tmp_path / "s.zip").exists()


def test_bad_singa_files(tmp_path, rng):
    m = built()
    snap = snapshot(m)
    values = {k: rng.standard_normal(t.shape).astype(np.float32)
              for k, t in m.get_states().items()}
    attrs = {k: {"state_type": 0, "shape": list(v.shape), "dtype": FLOAT32}
             for k, v in values.items()}
    bad_shape = dict(attrs, **{"fc.b": {"state_type": 0, "shape": [4], "dtype": FLOAT32}})
    singa_zip(tmp_path / "a.zip", values, bad_shape)
    with pytest.raises(CheckpointError, match="'fc.b' is float32\\[3\\] in tensor_dict.npz"):
        m.load_states(tmp_path / "a.zip")
    extra = dict(attrs, ghost={"state_type": 0, "shape": [1], "dtype": FLOAT32})
    singa_zip(tmp_path / "b.zip", values, extra)
    with pytest.raises(CheckpointError, match="lists \\['ghost'\\]"):
        m.load_states(tmp_path / "b.zip")
    pickled = dict(values, evil=np.array([object()], dtype=object))  # npz with a pickle
    singa_zip(tmp_path / "c.zip", pickled,
              dict(attrs, evil={"state_type": 1, "shape": [1], "dtype": FLOAT32}))
    with pytest.raises(CheckpointError, match="not a readable numpy archive"):
        m.load_states(tmp_path / "c.zip")
    assert same_states(m, snap)
