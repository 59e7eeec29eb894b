"""A model moved to another device between training steps: the optimiser's state follows its
parameters (as PyTorch's load_state_dict casts optimiser state to each parameter's device),
under the same keys, and training goes on as if it had never moved. Reference: the same six
steps on one device: float32, rtol 1e-6 (RMSProp 2e-5: see below) for a model, whose
forward and backward sum in another order on cuda than on the CPU; bit for bit for the
optimiser alone given the gradients (the update kernels are bit for bit the CPU's,
tests/cuda/test_fused.py)."""
import numpy as np
import pytest

import hl
from hl import layers as L

from tests.opt.common import (CONFIG_IDS, CONFIGS, assert_same_trajectory, hard_grads,
                               trajectory)

pytestmark = pytest.mark.gpu

OPTIMIZERS = {
    "momentum": lambda params: hl.opt.SGD(lr=0.05, momentum=0.9, nesterov=True, params=params),
    "adam": lambda params: hl.opt.Adam(lr=0.01, amsgrad=True, params=params),
    "rmsprop": lambda params: hl.opt.RMSProp(lr=0.005, centered=True, momentum=0.5,
                                             params=params),
    "adagrad": lambda params: hl.opt.AdaGrad(lr=0.1, params=params),
}
STEPS, MOVE_AT = 6, 3


def _data():
    rng = np.random.default_rng(0)
    return [(rng.standard_normal((8, 5)).astype(np.float32), rng.integers(0, 3, 8))
            for _ in range(STEPS)]


class _Net(hl.Module):
    def __init__(self):
        super().__init__()
        self.fc1, self.fc2 = L.Linear(16), L.Linear(3)

    def forward(self, x):
        return self.fc2(hl.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
        if self.optim.params is None:  # SINGA style
            self.optim.backward_and_update(loss)
        else:  # PyTorch style
            self.optim.zero_grad()
            loss.backward()
            self.optim.step()
        return loss


def _train(name, devices, style, graph=False):
    """STEPS steps, on devices[0] before MOVE_AT and on devices[1] from there; returns the
    losses, the weights and the optimiser's states (as numpy, with their keys)."""
    hl.manual_seed(0)
    data = _data()
    model = _Net()
    model(hl.tensor(data[0][0]))  # build the parameters, on the CPU
    model.to(devices[0])
    model.optim = OPTIMIZERS[name](
        list(model.get_params().values()) if style == "torch" else None)
    model.compile([hl.tensor(data[0][0], device=devices[0])], is_train=True, use_graph=graph)
    losses = []
    for i, (x, y) in enumerate(data):
        device = devices[i >= MOVE_AT]
        if i == MOVE_AT:
            model.to(device)
        loss = model.train_one_batch(hl.tensor(x, device=device), hl.tensor(y, device=device))
        losses.append(float(loss.item()))
    states = model.optim.get_states()
    for k, v in states.items():
        if isinstance(v, hl.Tensor):
            assert v.device == hl.devices.device(devices[1]), k  # the state followed
    return (losses, {k: v.numpy() for k, v in model.get_params().items()},
            {k: v.numpy() if isinstance(v, hl.Tensor) else v for k, v in states.items()})


def _assert_close(got, want, rtol=1e-6):
    np.testing.assert_allclose(got[0], want[0], rtol=rtol)
    for a, b in zip(got[1:], want[1:]):
        assert a.keys() == b.keys()
        assert not any(k.startswith("param") for k in a), sorted(a)  # the names were kept
        for k in a:
            np.testing.assert_allclose(a[k], b[k], rtol=rtol, atol=rtol / 10, err_msg=k)


@pytest.mark.parametrize("style", ["singa", "torch"])
@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("there,back", [("cpu", "cuda"), ("cuda", "cpu")])
def test_moving_the_model_after_three_steps_equals_six_steps_without_moving(name, style,
                                                                            there, back):
    # RMSProp divides by sqrt(s) (centered: sqrt(s - g * g)), which turns the devices'
    # last-bit matmul differences in the first three steps into a few 1e-6 relative;
    # test_moved_parameters_update_as_if_they_never_moved is exact
    _assert_close(_train(name, (there, back), style), _train(name, (back, back), style),
                  rtol=2e-5 if name == "rmsprop" else 1e-6)


@pytest.mark.parametrize("there,back", [("cpu", "cuda"), ("cuda", "cpu")])
def test_a_move_in_graph_mode_records_again_with_the_moved_state(there, back):
    """Graph mode: the plans recorded before the move hold the old state tensors; the step
    after the move runs eagerly (it moves the state), later ones record and replay."""
    got = _train("adam", (there, back), "singa", graph=True)
    _assert_close(got, _train("adam", (back, back), "singa"))


def test_to_keeps_the_name():
    t = hl.Tensor(np.ones(3, np.float32), requires_grad=True, stores_grad=True, name="w")
    for moved in (t.to("cuda"), t.to("cuda").to("cpu"), t.cuda(), t.cuda(0)):
        assert moved.name == "w" and moved is not t
        assert not moved.requires_grad  # a device move is a copy outside the autograd graph
    assert t.to("float64").name == "w" and t.to("cuda", "float64").name == "w"
    assert t.to("cpu") is t


def test_a_moved_tensor_keeps_its_optimiser_state():
    """A parameter replaced by its copy on cuda (p = p.to("cuda")) keeps its key, so the state
    made on the CPU is found and moved (it used to become a fresh 'param0' entry)."""
    p = hl.Tensor(np.ones(4, np.float32), name="w")
    opt = hl.opt.SGD(lr=0.1, momentum=0.9)
    opt.update(p, hl.tensor(np.full(4, 0.5, np.float32)))
    p = p.to("cuda")  # the CPU tensor is gone: its name now belongs to the copy
    opt.update(p, hl.tensor(np.full(4, 0.5, np.float32), device="cuda"))
    states = opt.get_states()
    assert sorted(states) == ["step", "w:momentum_buffer"]
    assert states["w:momentum_buffer"].device == hl.cuda(0)
    # buf = 0.5, then 0.9 * 0.5 + 0.5 = 0.95; p = 1 - 0.05 - 0.095
    np.testing.assert_allclose(states["w:momentum_buffer"].numpy(), np.full(4, 0.95), rtol=1e-6)
    np.testing.assert_allclose(p.numpy(), np.full(4, 1 - 0.05 - 0.095), rtol=1e-6)


@pytest.mark.parametrize("there,back", [("cpu", "cuda"), ("cuda", "cpu")])
@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_moved_parameters_update_as_if_they_never_moved(monkeypatch, hl_name, torch_name, kw,
                                                        there, back):
    """Exact: given gradients (no device arithmetic before the update), parameters moved in
    place after three updates (what Module.to does) end bit for bit where six updates on one
    device end, states included, for every optimiser configuration of tests/opt."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal(s).astype(np.float32) for s in [(3, 4), (5,), ()]]
    grads = hard_grads(rng, np.float32, [v.shape for v in values], STEPS)
    moved = trajectory(hl_name, kw, values, grads, monkeypatch,
                       devices=[there] * MOVE_AT + [back])
    assert_same_trajectory(moved, trajectory(hl_name, kw, values, grads, monkeypatch,
                                             devices=[back]))
