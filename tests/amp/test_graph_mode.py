"""Loss scaling in graph mode: a recorded step scales by the scale tensor, unscales, decides
on the device whether to update (a skipped step leaves weights and optimiser state unchanged)
and grows or backs off the scale there (hl/amp/recorded.py). Each test trains the same model
twice from the same seed, eagerly and as replayed plans, with an initial scale so large that
the first steps overflow (skipped, scale backing off) and a growth interval so short that the
scale grows again (and overflows again) during the run; every per-step loss, the final
weights, the optimiser's state and step count and the scaler's scale and tracker must be
equal bit for bit."""
import contextlib

import numpy as np
import pytest

import hl
from hl import layers as L
from hl.autograd import functional as F


@pytest.fixture
def policy():
    yield hl.mixed_precision.set_global_policy
    hl.mixed_precision.set_global_policy("float32")


def _digits(n=256):
    (x, y), _ = hl.data.digits()
    return x.reshape(len(x), -1)[:n].astype(np.float32), y[:n]


def _states(model, scaler):
    weights = {k: v.numpy().copy() for k, v in model.get_params().items()}
    opt = {k: (v.numpy().copy() if isinstance(v, hl.Tensor) else v)
           for k, v in model.optim.get_states().items()}
    return weights, opt, scaler.state_dict()


def _assert_same(a, b):
    for da, db in zip(a[:2], b[:2]):
        assert da.keys() == db.keys()
        for k in da:
            np.testing.assert_array_equal(da[k], db[k], err_msg=k)
    assert a[2] == b[2], (a[2], b[2])


def _fit_scaled(graph, device, init_scale, epochs=2):
    hl.mixed_precision.set_global_policy("mixed_float16")
    hl.manual_seed(0)
    x, y = _digits()
    model = hl.Sequential(L.Linear(32), L.ReLU(), L.Linear(10))
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy")
    model.to(device)
    scaler = hl.amp.GradScaler(init_scale=init_scale, growth_interval=3)
    model.__dict__["loss_scaler"] = scaler  # what fit uses under mixed_float16
    model.graph(graph)
    seen = []

    class Scales(hl.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            seen.append(scaler.get_scale())
    hist = model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False,
                     callbacks=[Scales()])
    return hist.history["loss"], seen, _states(model, scaler), model


@pytest.mark.gpu
def test_mixed_float16_fit_in_graph_mode_equals_eager(policy, tmp_path):
    eager = _fit_scaled(False, "cuda", 2.0 ** 24)
    graph = _fit_scaled(True, "cuda", 2.0 ** 24)
    stats = graph[3]._graph.stats()["fit"]
    # the steps after the first update really were replays (before it, a recording would
    # create the momentum buffers: those steps run eagerly, as graph mode does for any slot)
    assert stats["replayed"] >= 6 and stats["recorded"] >= 1, stats
    scales = eager[1]
    assert any(b < a for a, b in zip(scales, scales[1:])), scales   # backoffs (overflow)
    assert any(b > a for a, b in zip(scales, scales[1:])), scales   # growth
    assert graph[1] == scales
    assert graph[0] == eager[0]
    _assert_same(graph[2], eager[2])
    # skipped steps did not count: fewer optimiser steps than batches
    assert graph[2][1]["step"] == eager[2][1]["step"] < 16
    # the scaler's device state travels as its host values: a saved model resumes with them
    hl.save(graph[3], str(tmp_path / "m.hl"))
    back = hl.load(str(tmp_path / "m.hl"))
    assert back.__dict__["loss_scaler"].state_dict() == eager[2][2]


HALF = {"cpu": hl.bfloat16, "cuda": hl.float16}  # the CPU has no float16 arithmetic


class _AmpNet(hl.Module):
    """train_one_batch under autocast with a GradScaler, SINGA style (the scaler's one-call
    update) or PyTorch style (scale, backward, step, update): the step graph mode records
    whole."""

    def __init__(self, scaler, device, style):
        super().__init__()
        self.fc1, self.fc2 = L.Linear(32), L.Linear(10)
        self.scaler, self.device, self.style = scaler, device, style

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        with hl.amp.autocast(self.device, dtype=HALF[self.device]):
            out = self.forward(x)
            loss = F.softmax_cross_entropy(out, y)
        if self.style == "singa":
            self.scaler.backward_and_update(self.optim, loss)
        else:
            self.optim.zero_grad()
            self.scaler.scale(loss).backward()
            self.scaler.step(self.optim)
            self.scaler.update()
        return out, loss


def _singa_run(graph, init_scale, device="cpu", style="singa", steps=24):
    hl.manual_seed(0)
    x, y = _digits()
    scaler = hl.amp.GradScaler(device, init_scale=init_scale, growth_interval=4)
    model = _AmpNet(scaler, device, style)
    tx = hl.tensor(x[:32], device=device)
    model(tx)  # builds the parameters, on the CPU
    model.to(device)
    params = list(model.get_params().values()) if style == "torch" else None
    model.optim = hl.opt.Adam(lr=0.01, params=params)
    model.compile([tx], is_train=True, use_graph=graph)
    losses, scales = [], []
    for i in range(steps):
        j = (i * 32) % len(x)
        _, loss = model.train_one_batch(hl.tensor(x[j:j + 32], device=device),
                                        hl.tensor(y[j:j + 32], device=device))
        losses.append(float(loss.item()))
        scales.append(scaler.get_scale())
    stats = model._graph.stats()["train_one_batch"] if graph else None
    return losses, scales, _states(model, scaler), stats


@pytest.mark.parametrize("device,style", [
    ("cpu", "singa"), ("cpu", "torch"),
    pytest.param("cuda", "singa", marks=pytest.mark.gpu),
    pytest.param("cuda", "torch", marks=pytest.mark.gpu)])
def test_autocast_and_grad_scaler_in_a_recorded_train_one_batch(device, style):
    """On the CPU (bfloat16: float32's range) 2^130 does not fit float32 (the scaled loss is
    inf, as eagerly); on cuda 2^24 overflows float16's gradients. The first steps are skipped
    and the scale backs off until the scaled gradients are finite, then grows every 4 steps
    into overflow again; Adam's state (moments and per-parameter step counts) must not move
    on a skipped step. On both devices the one-pass update reads the skip flag on the device
    for every parameter (no guard copies: docs/amp.md)."""
    init = 2.0 ** 130 if device == "cpu" else 2.0 ** 24
    eager = _singa_run(False, init, device, style)
    read_flag = []
    real = hl.ops.skipping_when

    @contextlib.contextmanager
    def spy(flag):
        with real(flag) as done:
            yield done
        read_flag.append(len(done))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(hl.ops, "skipping_when", spy)
        graph = _singa_run(True, init, device, style)
    assert read_flag and set(read_flag) == {4}, read_flag  # both layers' weight and bias
    assert graph[3]["replayed"] >= 15, graph[3]  # after the first update (Adam makes slots)
    scales = eager[1]
    assert scales[0] == init / 2 and any(b > a for a, b in zip(scales, scales[1:])), scales
    assert graph[1] == scales
    assert graph[0] == eager[0]
    _assert_same(graph[2], eager[2])
    assert eager[2][1]["step"] < 24


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_the_one_pass_update_reads_the_skip_flag_on_the_device(device):
    """hl.ops.optim_update inside ops.skipping_when(flag): with the flag false it is the
    plain update bit for bit, with it true it writes nothing (parameter and state); a flag
    that is not a 0-d bool, or on another device, is refused and nothing is written."""
    rng = np.random.default_rng(0)
    p0, g, m0, v0 = (rng.standard_normal((3, 5)).astype(np.float32) for _ in range(4))
    v0 = np.abs(v0)

    def t(a):
        return hl.tensor(a, device=device)

    def adam(flag):
        p, m, v = t(p0), t(m0), t(v0)
        args = ("adam", p, t(g), [m, v], [-0.01, 0.9], [0.0, 0.1, 0.999, 0.001, 1e-8])
        if flag is None:
            hl.ops.optim_update(*args)
        else:
            with hl.ops.optim.skipping_when(t(np.array(flag))) as done:
                hl.ops.optim_update(*args)
            assert done == {id(p)}
        return p.numpy(), m.numpy(), v.numpy()
    plain, kept, skipped = adam(None), adam(False), adam(True)
    for a, b in zip(plain, kept):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(skipped, (p0, m0, v0)):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(plain[0], p0)
    p = t(p0)
    with pytest.raises(hl.errors.ValueError, match="0-d bool"):
        hl._core.optim_update(0, 0, p._h, t(g)._h, [], None, [-0.1], [0, 0, 1],
                              t(np.array([True, False]))._h)
    if device != "cpu":
        with pytest.raises(hl.errors.DeviceError, match="cpu"):
            hl._core.optim_update(0, 0, p._h, t(g)._h, [], None, [-0.1], [0, 0, 1],
                                  hl.tensor(np.array(True))._h)
    np.testing.assert_array_equal(p.numpy(), p0)
