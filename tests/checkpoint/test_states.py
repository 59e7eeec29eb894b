"""Module.save_states / load_states: the hl states archive (zip: states.json + tensors.h5)."""
import json
import math
import zipfile

import h5py
import numpy as np
import pytest

import hl
from hl.errors import CheckpointError

from .models import INPUT, Net, batches, built, same_states, snapshot


def train(model, data):
    losses = []
    for x, y in data:
        _, loss = model.train_one_batch(x, y)
        losses.append(np.array(loss.numpy()))
    return losses


def test_states_round_trip_bit_for_bit(tmp_path):
    a = built()
    train(a, batches(2))
    a.save_states(tmp_path / "ck.zip")
    b = built()
    assert not same_states(b, snapshot(a))
    aux = b.load_states(tmp_path / "ck.zip")
    assert aux == {}
    assert same_states(b, snapshot(a))
    x = batches(1, seed=5)[0][0]
    a.eval(), b.eval()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_archive_layout_is_plain_json_and_hdf5(tmp_path):
    m = built()
    path = tmp_path / "ck.zip"
    m.save_states(path, {"epoch": 7})
    with zipfile.ZipFile(path) as z:
        assert sorted(z.namelist()) == ["states.json", "tensors.h5"]  # no pickle inside
        assert z.testzip() is None                                    # every CRC checks out
        doc = json.loads(z.read("states.json"))
        z.extract("tensors.h5", tmp_path)
    assert doc["format"] == "hl.states" and doc["aux"] == {"epoch": 7}
    states = m.get_states()
    assert set(doc["states"]) == set(states)
    with h5py.File(tmp_path / "tensors.h5", "r") as f:  # a plain HDF5 file once extracted
        for name, t in states.items():
            entry = doc["states"][name]
            assert entry["shape"] == list(t.shape) and entry["dtype"] == "float32"
            np.testing.assert_array_equal(f[entry["dataset"]][()], t.numpy())


def test_aux_values_round_trip(tmp_path):
    m = built()
    opt = m.optim
    train(m, batches(1))
    aux = {"epoch": 3, "lr": 0.125, "nan": float("nan"), "inf": -math.inf, "name": "run-1",
           "none": None, "flag": True, "hist": [1.5, 2.5], "pair": (1, "a"),
           "nested": {"a": {"b": [1, {"c": 2}]}}, "tagged": {"__hl__": 1},
           "t32": hl.tensor([[1.5, 2.5]]), "t64": hl.arange(5), "t16": hl.ones(3, dtype="float16"),
           "tbool": hl.tensor([True, False]), "arr": np.arange(6, dtype=np.int16).reshape(2, 3),
           "scalar": np.float64(2.5), "optim": opt,
           "rng": hl.random.default_generator}
    m.save_states(tmp_path / "ck.zip", aux)
    rng_state = hl.random.default_generator.get_state()
    got = built().load_states(tmp_path / "ck.zip")
    assert got["epoch"] == 3 and got["lr"] == 0.125 and got["name"] == "run-1"
    assert math.isnan(got["nan"]) and got["inf"] == -math.inf
    assert got["none"] is None and got["flag"] is True and got["hist"] == [1.5, 2.5]
    assert got["pair"] == (1, "a") and got["nested"] == {"a": {"b": [1, {"c": 2}]}}
    assert got["tagged"] == {"__hl__": 1}
    for k in ("t32", "t64", "t16", "tbool"):
        assert isinstance(got[k], hl.Tensor) and got[k].dtype is aux[k].dtype
        np.testing.assert_array_equal(got[k].numpy(), aux[k].numpy())
    assert isinstance(got["arr"], np.ndarray) and got["arr"].dtype == np.int16
    np.testing.assert_array_equal(got["arr"], aux["arr"])
    assert got["scalar"] == 2.5 and got["scalar"].dtype == np.float64
    assert got["rng"] == rng_state
    states = opt.get_states()
    assert set(got["optim"]) == set(states) and got["optim"]["step"] == states["step"] == 1
    for k, v in states.items():
        if isinstance(v, hl.Tensor):
            np.testing.assert_array_equal(got["optim"][k].numpy(), v.numpy())
    fresh = hl.opt.SGD(lr=0.05, momentum=0.9)
    fresh.set_states(got["optim"])  # what the issue promises: the states restore an optimiser
    assert fresh.step_count == 1


@pytest.mark.parametrize("bad, what", [
    ({"f": object()}, "aux_states['f'] is a builtins.object"),
    ({"f": lambda: 1}, "aux_states['f'] is a builtins.function"),
    ({"d": {3: 1}}, "has the key 3"),
    ({"a": np.array(["x"])}, "numpy array of <U1"),
])
def test_unstorable_aux_values_are_refused_and_the_old_file_kept(tmp_path, bad, what):
    m = built()
    path = tmp_path / "ck.zip"
    m.save_states(path, {"epoch": 1})
    before = path.read_bytes()
    with pytest.raises(CheckpointError, match=what.replace("[", r"\[").replace("(", r"\(")):
        m.save_states(path, bad)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["ck.zip"]


def test_mismatched_names_and_shapes_are_listed_and_nothing_loads(tmp_path):
    m = built()
    m.save_states(tmp_path / "ck.zip")
    other = Net(width=6)                       # conv 6 channels: every shape after it differs
    other.compile([hl.Placeholder(INPUT)])
    snap = snapshot(other)
    with pytest.raises(CheckpointError) as e:
        other.load_states(tmp_path / "ck.zip")
    msg = str(e.value)
    assert "conv.W: the model has (6, 1, 3, 3), the file (4, 1, 3, 3)" in msg
    assert "fc.W" in msg and "Nothing was loaded" in msg and "ck.zip" in msg
    assert same_states(other, snap)

    class Bigger(Net):
        def __init__(self):
            super().__init__()
            self.head = hl.layers.Linear(2)

        def forward(self, x):
            return self.head(super().forward(x))

    big = Bigger()
    big.compile([hl.Placeholder(INPUT)])
    with pytest.raises(CheckpointError, match=r"missing from the file: \['head.W', 'head.b'\]"):
        big.load_states(tmp_path / "ck.zip")
    big.save_states(tmp_path / "big.zip")
    small = built()
    with pytest.raises(CheckpointError, match=r"not in the model: \['head.W', 'head.b'\]"):
        small.load_states(tmp_path / "big.zip")


def test_strict_false_loads_what_matches_and_warns(tmp_path):
    m = built()
    train(m, batches(1))
    m.save_states(tmp_path / "ck.zip")
    other = Net(width=6)
    other.compile([hl.Placeholder(INPUT)])
    with pytest.warns(UserWarning, match="different shapes"):
        other.load_states(tmp_path / "ck.zip", strict=False)
    # conv.W differs in shape; the others that match in shape are loaded
    src, dst = m.get_states(), other.get_states()
    assert dst["conv.W"].shape == (6, 1, 3, 3)
    np.testing.assert_array_equal(dst["fc.b"].numpy(), src["fc.b"].numpy())


def test_overwrite_false_refuses_as_singa_does(tmp_path):
    m = built()
    path = tmp_path / "ck.zip"
    m.save_states(path, overwrite=False)
    before = path.read_bytes()
    train(m, batches(1))
    with pytest.raises(CheckpointError, match="already exists"):
        m.save_states(path, overwrite=False)
    assert path.read_bytes() == before
    m.save_states(path)  # the default replaces it
    assert path.read_bytes() != before


def test_unbuilt_modules_say_to_compile(tmp_path):
    with pytest.raises(CheckpointError, match="compile"):
        Net().save_states(tmp_path / "a.zip")
    built().save_states(tmp_path / "b.zip")
    with pytest.raises(CheckpointError, match="compile"):
        Net().load_states(tmp_path / "b.zip")


def test_resume_from_a_checkpoint_is_bit_for_bit(tmp_path):
    """Train 8 steps straight; train 4, checkpoint (model, optimiser, data position, random
    generator), rebuild everything from the file in fresh objects, train 4 more: the losses
    of the last 4 steps are identical, bit for bit (dropout and Adam's moments included)."""
    data = batches(8, seed=3)

    def fresh():
        hl.random.manual_seed(11)
        return built(optim=hl.opt.Adam(lr=hl.opt.schedules.StepDecay(0.01, 2, 0.5)),
                     dropout=0.3)

    straight = fresh()
    expected = train(straight, data)

    first = fresh()
    train(first, data[:4])
    first.save_states(tmp_path / "ck.zip", {"step": 4, "optim": first.optim,
                                             "rng": hl.random.default_generator})
    hl.random.manual_seed(999)  # whatever happens in between
    resumed = fresh()
    aux = resumed.load_states(tmp_path / "ck.zip")
    resumed.optim.set_states(aux["optim"])
    hl.random.default_generator.set_state(aux["rng"])
    got = train(resumed, data[aux["step"]:])
    for a, b in zip(got, expected[4:]):
        assert a.tobytes() == b.tobytes()
    assert same_states(resumed, snapshot(straight))
