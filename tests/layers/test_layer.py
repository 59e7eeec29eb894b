"""Layer mechanics: hierarchical names, lazy init, weight sharing, loading params and states
(strict reports), modes."""
import numpy as np
import pytest

import hl
from hl.layers import BatchNorm1d, Dropout, Layer, Linear, ReLU, Sequential


def _x(*shape, seed=0):
    return hl.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


class Block(Layer):
    def __init__(self, width):
        super().__init__()
        self.fc1 = Linear(width)
        self.act = ReLU()
        self.fc2 = Linear(width, bias=False)

    def forward(self, x):
        return self.fc2(self.act(self.fc1(x)))


class Net(Layer):
    """Sub-layers as attributes, in a list, in a dict, and in a Sequential."""

    def __init__(self):
        super().__init__()
        self.blk1 = Block(6)
        self.heads = [Linear(4), Linear(3)]
        self.extra = {"proj": Linear(5)}
        self.seq = Sequential(Linear(2), ReLU(), Linear(2, name="last"))

    def forward(self, x):
        h = self.blk1(x)
        h = self.heads[1](self.heads[0](h))
        h = self.extra["proj"](h)
        return self.seq(h)


NET_PARAMS = {"blk1.fc1.W": (8, 6), "blk1.fc1.b": (6,), "blk1.fc2.W": (6, 6),
              "heads.0.W": (6, 4), "heads.0.b": (4,), "heads.1.W": (4, 3), "heads.1.b": (3,),
              "extra.proj.W": (3, 5), "extra.proj.b": (5,), "seq.0.W": (5, 2), "seq.0.b": (2,),
              "seq.last.W": (2, 2), "seq.last.b": (2,)}


def test_hierarchical_names_and_lazy_shapes():
    net = Net()
    assert net.get_params() == {}  # nothing exists before the first call
    y = net(_x(3, 8))
    assert y.shape == (3, 2)
    params = net.get_params()
    assert {k: v.shape for k, v in params.items()} == NET_PARAMS
    assert list(params) == list(NET_PARAMS)  # attribute order, depth first
    assert params["heads.1.W"].name == "heads.1.W"  # tensors carry their full name
    assert net.blk1.fc1.describe() == "Linear 'blk1.fc1'"
    assert net.seq[2].describe() == "Linear 'seq.last'"
    assert set(net.blk1.get_params()) == {"fc1.W", "fc1.b", "fc2.W"}  # relative below the root
    assert [n for n, _ in net.named_layers()][:5] == ["", "blk1", "blk1.fc1", "blk1.act",
                                                      "blk1.fc2"]


def test_layers_appended_to_a_list_after_assignment_get_their_names():
    class Stack(Layer):
        def __init__(self):
            super().__init__()
            self.layers = []
            for width in (3, 4):
                self.layers.append(Linear(width))

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    s = Stack()
    s(_x(2, 5))
    assert {k: v.shape for k, v in s.get_params().items()} == {
        "layers.0.W": (5, 3), "layers.0.b": (3,), "layers.1.W": (3, 4), "layers.1.b": (4,)}
    assert s.layers[1].describe() == "Linear 'layers.1'"


def test_weight_sharing_counts_once():
    class Shared(Layer):
        def __init__(self):
            super().__init__()
            self.enc = Linear(4)
            self.again = self.enc  # the same layer under a second name
            self.out = Linear(4)

        def forward(self, x):
            return self.out(self.again(self.enc(x) if x.shape[-1] == 4 else x))

    m = Shared()
    m(_x(2, 4))
    assert sorted(m.get_params()) == ["enc.W", "enc.b", "out.W", "out.b"]
    assert m.enc.describe() == "Linear 'enc'"
    assert len(m.parameters()) == 4


def test_parameters_require_grad_and_buffers_do_not():
    class WithBN(Layer):
        def __init__(self):
            super().__init__()
            self.fc = Linear(3)
            self.bn = BatchNorm1d()

        def forward(self, x):
            return self.bn(self.fc(x))

    m = WithBN()
    m(_x(4, 2))
    assert sorted(m.get_params()) == ["bn.bias", "bn.scale", "fc.W", "fc.b"]
    assert sorted(m.get_states()) == ["bn.bias", "bn.running_mean", "bn.running_var",
                                      "bn.scale", "fc.W", "fc.b"]
    assert all(t.requires_grad and t.stores_grad for t in m.get_params().values())
    assert not m.bn.running_mean.requires_grad
    assert m.get_states()["bn.running_mean"] is m.bn.running_mean  # tensors, not copies


def _built_net():
    net = Net()
    net(_x(3, 8))
    return net


def _values(net, seed=1):
    rng = np.random.default_rng(seed)
    return {k: rng.standard_normal(v.shape).astype(np.float32)
            for k, v in net.get_params().items()}


def test_set_params_round_trip():
    net = _built_net()
    vals = _values(net)
    report = net.set_params(vals)
    assert report == hl.layers.LoadReport([], [], [])
    for k, t in net.get_params().items():
        np.testing.assert_array_equal(t.numpy(), vals[k])
    other = _built_net()
    other.set_params(net.get_params())  # tensors work as values too
    x = _x(3, 8, seed=5)
    np.testing.assert_array_equal(other(x).numpy(), net(x).numpy())


def test_set_params_strict_lists_every_problem_and_loads_nothing():
    net = _built_net()
    before = {k: v.numpy().copy() for k, v in net.get_params().items()}
    vals = _values(net)
    del vals["blk1.fc1.b"]
    vals["blk1.fc3.W"] = np.zeros((2, 2), np.float32)
    vals["heads.0.W"] = np.zeros((4, 6), np.float32)
    with pytest.raises(hl.errors.ValueError) as e:
        net.set_params(vals)
    msg = str(e.value)
    assert msg.startswith("set_params on Net: missing ['blk1.fc1.b'], unexpected "
                          "['blk1.fc3.W'], wrong shape [heads.0.W: expected (6, 4), got (4, 6)]")
    assert "nothing was loaded" in msg
    for k, t in net.get_params().items():
        np.testing.assert_array_equal(t.numpy(), before[k], err_msg=k)


def test_set_params_not_strict_loads_what_fits():
    net = _built_net()
    before = {k: v.numpy().copy() for k, v in net.get_params().items()}
    vals = _values(net)
    del vals["blk1.fc1.b"]
    vals["nope"] = np.zeros(3, np.float32)
    vals["heads.0.W"] = np.zeros((4, 6), np.float32)
    report = net.set_params(vals, strict=False)
    assert report.missing == ["blk1.fc1.b"] and report.unexpected == ["nope"]
    assert report.mismatched == ["heads.0.W: expected (6, 4), got (4, 6)"]
    for k, t in net.get_params().items():
        want = before[k] if k in ("blk1.fc1.b", "heads.0.W") else vals[k]
        np.testing.assert_array_equal(t.numpy(), want, err_msg=k)


def test_set_states_covers_buffers_and_set_params_refuses_them():
    m = Sequential(Linear(3), BatchNorm1d())
    m(_x(4, 2))
    states = {k: np.full(v.shape, 0.5, np.float32) for k, v in m.get_states().items()}
    m.set_states(states)
    np.testing.assert_array_equal(m[1].running_var.numpy(), np.full(3, 0.5))
    with pytest.raises(hl.errors.ValueError, match=r"unexpected \['1.running_mean', "
                                                   r"'1.running_var'\]"):
        m.set_params(states)
    with pytest.raises(hl.errors.ValueError, match=r"set_states on Sequential: missing "
                                                   r"\['1.running_mean', '1.running_var'\]"):
        m.set_states({k: v for k, v in states.items() if "running" not in k})


def test_loading_into_an_unbuilt_model_says_to_call_it_first():
    with pytest.raises(hl.errors.ValueError, match="has no parameters yet.*first call"):
        Net().set_params({"blk1.fc1.W": np.zeros((8, 6), np.float32)})


def test_train_eval_propagate_and_default_to_the_global_flag():
    net = Sequential(Linear(3), Dropout(0.5), Sequential(Dropout(0.1)))
    old = hl.autograd.training
    try:
        for flag in (False, True):
            hl.autograd.training = flag
            assert all(layer.training is flag for _, layer in net.named_layers())
        assert net.eval() is net
        assert all(layer.training is False for _, layer in net.named_layers())
        hl.autograd.training = True
        assert net[2][0].training is False  # switched layers ignore the global flag
        net[2].train()
        assert net[2][0].training is True and net[1].training is False
    finally:
        hl.autograd.training = old


def test_forgetting_super_init_is_reported():
    class Bad(Layer):
        def __init__(self):
            self.fc = Linear(3)

    with pytest.raises(hl.errors.ValueError, match=r"Bad.__init__ did not call "
                                                   r"super\(\).__init__\(\)"):
        Bad()


def test_duplicate_names_in_a_sequential_are_refused():
    s = Sequential(Linear(2, name="fc"), Linear(2, name="fc"))
    s(_x(1, 3))
    with pytest.raises(hl.errors.ValueError, match=r"two different tensors are both named "
                                                   r"'fc.W'"):
        s.get_params()


def test_repr_shows_the_tree():
    net = _built_net()
    text = repr(net)
    assert text.startswith("Net()\n  (blk1): Block()\n    (fc1): Linear(8, 6, bias=True)")
    assert "(heads.1): Linear(4, 3, bias=True)" in text


def test_a_layer_listed_twice_in_a_sequential_counts_once():
    fc = Linear(3)
    s = Sequential(fc, ReLU(), fc)
    y = s(_x(2, 3))
    assert y.shape == (2, 3)
    assert sorted(s.get_params()) == ["0.W", "0.b"]
    assert fc.describe() == "Linear '0'"
    assert [n for n, _ in s.named_layers()] == ["", "0", "1"]
