"""One Sequential: hl.Sequential, hl.layers.Sequential and hl.model.Sequential are one class,
a Module that works as a sub-layer (parameters named by position, as torch.nn.Sequential)
and as a top-level Keras model (compile / fit / summary / save_states / hl.save)."""
import numpy as np
import pytest

import hl
from hl import layers as L


def test_one_class_under_three_names():
    assert hl.Sequential is hl.layers.Sequential is hl.model.Sequential
    assert issubclass(hl.Sequential, hl.Module)
    from hl.layers import Sequential
    assert Sequential is hl.Sequential


def test_as_a_sub_layer_its_parameters_are_named_by_position():
    torch = pytest.importorskip("torch")

    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.body = hl.layers.Sequential(L.Linear(8), L.ReLU(), L.Linear(3))

        def forward(self, x):
            return self.body(x)

    class TNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                            torch.nn.Linear(8, 3))

    net = Net()
    net(hl.zeros(2, 4))
    rename = {"W": "weight", "b": "bias"}
    assert [k.rsplit(".", 1)[0] + "." + rename[k.rsplit(".", 1)[1]] for k in net.state_dict()] \
        == list(TNet().state_dict())
    x = np.random.default_rng(0).normal(size=(32, 4)).astype(np.float32)
    y = np.random.default_rng(1).integers(0, 3, 32)
    net.compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    before = net.body[0].W.numpy().copy()
    net.fit(x, y, epochs=1, verbose=0)
    assert not np.array_equal(before, net.body[0].W.numpy())
    assert net.body(hl.tensor(x)).shape == (32, 3)  # inside a model: always the forward pass


def test_as_a_top_level_model(tmp_path):
    x = np.random.default_rng(2).normal(size=(64, 5)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    hl.manual_seed(0)
    m = hl.layers.Sequential(L.Dense(16, activation="relu"), L.Dense(2))
    m.compile(optimizer=hl.opt.Adam(lr=0.02), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    history = m.fit(x, y, epochs=20, batch_size=16, verbose=0)
    assert history.history["accuracy"][-1] > 0.9
    m.save_states(str(tmp_path / "s.zip"))
    other = hl.Sequential(L.Dense(16, activation="relu"), L.Dense(2))
    other.compile([hl.Placeholder((1, 5))], is_train=False)
    other.load_states(str(tmp_path / "s.zip"))
    hl.save(m, str(tmp_path / "m.hl"))
    loaded = hl.load(str(tmp_path / "m.hl"))
    for o in (other, loaded):
        np.testing.assert_array_equal(o.predict(x, verbose=0), m.predict(x, verbose=0))
    lines = []
    m.summary(print_fn=lines.append)
    assert "│ 0 (Dense)" in lines[0] and "(16, 16)" in lines[0]  # the first batch's shape


def test_keras_form_with_an_input_and_add_pop():
    m = hl.Sequential([hl.Input((3,))])
    m.add(L.Dense(4))
    m.add(L.Dense(2))
    assert m.count_params() == 3 * 4 + 4 + 4 * 2 + 2  # built by add, before any data
    assert m.pop() is not None and len(m) == 1
    with pytest.raises(hl.errors.ValueError, match="an hl.Input can only come first"):
        m.add(hl.Input((3,)))
    with pytest.raises(hl.errors.ValueError, match="expected a layer or a callable"):
        m.add(3)
    assert m(hl.zeros(5, 3)).shape == (5, 4)
