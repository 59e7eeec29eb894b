"""hl.Module: compile with placeholders creates every parameter and allocates nothing else;
graph mode is refused; old-style scripts that never compile still train."""
import gc

import numpy as np
import pytest

import hl
from hl.layers import (BatchNorm2d, Conv2d, Flatten, GlobalAvgPool2d, Linear, MaxPool2d,
                       ReLU)


class CNN(hl.Module):
    """The MNIST CNN of SINGA's documentation."""

    def __init__(self):
        super().__init__()
        self.conv1 = Conv2d(20, 5)
        self.relu1 = ReLU()
        self.pool1 = MaxPool2d(2, 2)
        self.conv2 = Conv2d(50, 5)
        self.relu2 = ReLU()
        self.pool2 = MaxPool2d(2, 2)
        self.flatten = Flatten()
        self.fc1 = Linear(500)
        self.relu3 = ReLU()
        self.fc2 = Linear(10)

    def forward(self, x):
        x = self.pool1(self.relu1(self.conv1(x)))
        x = self.pool2(self.relu2(self.conv2(x)))
        return self.fc2(self.relu3(self.fc1(self.flatten(x))))


CNN_PARAMS = {"conv1.W": (20, 1, 5, 5), "conv1.b": (20,), "conv2.W": (50, 20, 5, 5),
              "conv2.b": (50,), "fc1.W": (800, 500), "fc1.b": (500,), "fc2.W": (500, 10),
              "fc2.b": (10,)}


class BNNet(hl.Module):
    def __init__(self):
        super().__init__()
        self.conv = Conv2d(8, 3, padding="same")
        self.bn = BatchNorm2d()
        self.relu = ReLU()
        self.pool = GlobalAvgPool2d(keepdims=False)
        self.fc = Linear(10)

    def forward(self, x):
        return self.fc(self.pool(self.relu(self.bn(self.conv(x)))))


def _in_use():
    gc.collect()
    return hl.memory_stats()["in_use"]


def _bytes_of_fresh_copies(tensors):
    """What the allocator charges for tensors of these shapes and dtypes (it rounds each
    block up to a size class, so nbytes alone would not match)."""
    before = _in_use()
    copies = [hl.zeros(*t.shape, dtype=t.dtype) for t in tensors]
    used = _in_use() - before
    del copies
    return used


@pytest.mark.parametrize("make,expected_states,batch", [
    (CNN, CNN_PARAMS, (4096, 1, 28, 28)),  # conv1's output alone would be 189 MB
    (BNNet, {"conv.W": (8, 3, 3, 3), "conv.b": (8,), "bn.scale": (8,), "bn.bias": (8,),
             "bn.running_mean": (8,), "bn.running_var": (8,), "fc.W": (8, 10), "fc.b": (10,)},
     (32, 3, 16, 16)),
])
def test_compile_with_placeholders_allocates_only_the_states(make, expected_states, batch):
    # a first compile fills process-wide one-time caches (the core's tensors for Python
    # scalar constants: one 64-byte block on a fresh process), which are not activations
    make().compile([hl.Placeholder(batch)])
    model = make()
    before = _in_use()
    peak_before = hl.memory_stats()["peak"]
    model.compile([hl.Placeholder(batch)], is_train=True, use_graph=False)
    grown = _in_use() - before
    # nor was anything allocated and freed on the way: the peak did not rise above the
    # states (an activation at this batch size would be far larger than any earlier peak)
    assert hl.memory_stats()["peak"] <= max(peak_before, before + grown)
    states = model.get_states()
    assert {k: v.shape for k, v in states.items()} == expected_states
    assert set(model.get_params()) == {k for k in expected_states if "running" not in k}
    # no activation was allocated: the memory in use grew by exactly the states
    assert grown == _bytes_of_fresh_copies(states.values())
    assert grown >= sum(int(np.prod(s)) * 4 for s in expected_states.values())
    if make is BNNet:  # nothing was computed: the running statistics are untouched
        np.testing.assert_array_equal(model.bn.running_mean.numpy(), np.zeros(8))
        np.testing.assert_array_equal(model.bn.running_var.numpy(), np.ones(8))
    assert model.training is True


def test_compiled_model_runs_on_real_data_of_another_batch_size():
    model = CNN()
    model.compile([hl.Placeholder((64, 1, 28, 28))], is_train=False)
    assert all(layer.training is False for _, layer in model.named_layers())
    x = hl.tensor(np.random.default_rng(0).standard_normal((3, 1, 28, 28)).astype(np.float32))
    assert model(x).shape == (3, 10)


def test_compile_with_real_tensors_also_builds():
    model = BNNet()
    model.compile(hl.zeros(2, 3, 8, 8), is_train=False)
    assert model.fc.W.shape == (8, 10)


def test_compile_switches_graph_mode_and_refuses_bad_arguments():
    model = CNN()
    model.compile([hl.Placeholder((2, 1, 28, 28))], use_graph=True)  # tests/graph/ for more
    assert model.graph_mode
    model.graph(False)
    assert not model.graph_mode
    with pytest.raises(hl.errors.ValueError, match="graph_alg must be"):
        model.compile([hl.Placeholder((2, 1, 28, 28))], graph_alg="fast")
    with pytest.raises(hl.errors.ValueError, match=r"input 0 is a list; pass hl.Placeholder"):
        model.compile([[1, 2]])
    model.compile([hl.Placeholder((2, 1, 28, 28))], sequential=True)  # SINGA's spelling
    assert model.fc2.W.shape == (500, 10)


def test_compile_reports_a_channels_last_placeholder():
    with pytest.raises(hl.errors.ShapeError, match=r"Conv2d 'conv': expected input with 3 "
                                                   r"channels.*did you mean channels-last"):
        m = BNNet()
        m.conv.in_channels = 3
        m.compile([hl.Placeholder((4, 16, 16, 3))])


class _SGD:
    """The smallest optimiser with SINGA's backward_and_update (hl.opt lives elsewhere)."""

    def __init__(self, lr):
        self.lr = lr

    def backward_and_update(self, loss):
        for p, g in hl.autograd.backward(loss):
            with hl.no_grad():
                p.copy_(p - g * self.lr)


class Regressor(hl.Module):
    def __init__(self):
        super().__init__()
        self.fc = Linear(1)
        self.loss_fn = lambda out, y: ((out - y) ** 2).mean()
        self.optim = _SGD(0.1)

    def forward(self, x):
        return self.fc(x)


def test_old_style_training_without_compile():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 3)).astype(np.float32)
    y = (x @ np.array([[1.0], [-2.0], [0.5]]) + 0.3).astype(np.float32)
    model = Regressor()
    assert model.get_params() == {}
    losses = []
    for _ in range(40):
        out, loss = model.train_one_batch(hl.tensor(x), hl.tensor(y))
        losses.append(float(loss.numpy()))
    assert out.shape == (32, 1)
    assert model.fc.W.shape == (3, 1)
    assert losses[-1] < 0.01 * losses[0]
    np.testing.assert_allclose(model.fc.W.numpy().ravel(), [1.0, -2.0, 0.5], atol=0.05)


def test_default_train_one_batch_needs_a_loss_and_an_optimiser():
    model = CNN()
    with pytest.raises(hl.errors.ValueError, match=r"set self.loss_fn and self.optim"):
        model.train_one_batch(hl.zeros(1, 1, 28, 28), hl.zeros(1))


def test_cnn_forward_and_backward_match_torch():
    torch = pytest.importorskip("torch")
    nn = torch.nn
    torch.manual_seed(0)
    tnet = nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Conv2d(20, 50, 5),
                         nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(), nn.Linear(800, 500),
                         nn.ReLU(), nn.Linear(500, 10))
    model = CNN()
    model.compile([hl.Placeholder((2, 1, 28, 28))])
    t = {"conv1": tnet[0], "conv2": tnet[3], "fc1": tnet[7], "fc2": tnet[9]}
    model.set_params({
        f"{name}.{p}": (m.weight.detach().numpy().T if p == "W" and name.startswith("fc")
                        else (m.weight if p == "W" else m.bias).detach().numpy())
        for name, m in t.items() for p in ("W", "b")})
    x = np.random.default_rng(0).standard_normal((2, 1, 28, 28)).astype(np.float32)
    labels = np.array([3, 7])
    out = model(hl.tensor(x))
    loss = hl.softmax_cross_entropy(out, hl.tensor(labels))
    loss.backward()
    tout = tnet(torch.tensor(x))
    tloss = nn.functional.cross_entropy(tout, torch.tensor(labels))
    tloss.backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(float(loss.numpy()), tloss.item(), rtol=1e-5)
    for name, m in t.items():
        gw = m.weight.grad.numpy()
        np.testing.assert_allclose(getattr(model, name).W.grad.numpy(),
                                   gw.T if name.startswith("fc") else gw, rtol=1e-4, atol=1e-5)
        np.testing.assert_allclose(getattr(model, name).b.grad.numpy(), m.bias.grad.numpy(),
                                   rtol=1e-4, atol=1e-5)
