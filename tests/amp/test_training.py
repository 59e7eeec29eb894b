"""Mixed-precision training on hl's shipped digits reaches float32's test accuracy within 1%:
through Keras's door (set_global_policy + fit, which scales the loss under mixed_float16) on
emulated cuda:0 with float16 and bfloat16 and on the CPU with (emulated) bfloat16, and through
PyTorch's door (autocast + GradScaler, a CNN with batch norm) on cuda with float16."""
import functools

import numpy as np
import pytest

import hl
from hl import layers as L
from hl.autograd import functional as F

from tests.digits import SmallCNN, digits


@pytest.fixture
def policy():
    yield hl.mixed_precision.set_global_policy
    hl.mixed_precision.set_global_policy("float32")


def _fit(name, device, epochs=4, graph=False):
    hl.mixed_precision.set_global_policy(name)
    hl.manual_seed(0)
    x, y, xt, yt = digits()
    model = hl.Sequential(L.Linear(64), L.ReLU(), L.Linear(10))
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.to(device)
    model.graph(graph)
    model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False)
    return model, model.evaluate(xt, yt, verbose=0)[1]


@functools.lru_cache(maxsize=None)
def _float32_accuracy(device):
    """The float32 run's test accuracy, the yardstick of every policy's run (once a device:
    both policies' tests compare with the same deterministic run)."""
    return _fit("float32", device)[1]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["mixed_float16", "mixed_bfloat16"])
def test_keras_policy_fit_on_cuda_matches_float32_accuracy(policy, name):
    acc32 = _float32_accuracy("cuda")
    model, acc = _fit(name, "cuda")
    assert acc32 > 0.9 and acc >= acc32 - 0.01, (acc, acc32)
    assert model.dtype_policy.name == name and model.layers[0].dtype_policy.compute_dtype == \
        name.split("_")[1]
    assert all(p.dtype is hl.float32 for p in model.get_params().values())  # master weights
    scaler = model.__dict__.get("loss_scaler")
    if name == "mixed_float16":  # Keras's LossScaleOptimizer: 2^15, no overflow here
        assert scaler is not None and scaler.get_scale() == 2.0 ** 15
    else:  # bfloat16 has float32's range: no scaling
        assert scaler is None
    x = hl.tensor(digits()[2][:5], device="cuda")
    assert model(x).dtype is hl.dtype(name.split("_")[1])  # a direct call computes in half too


def test_keras_policy_fit_on_cpu_with_bfloat16(policy):
    acc32 = _float32_accuracy("cpu")
    model, acc = _fit("mixed_bfloat16", "cpu")
    assert acc32 > 0.9 and acc >= acc32 - 0.01, (acc, acc32)
    x = hl.tensor(digits()[2][:5])
    out = model(x).numpy()  # float32 holding bfloat16 values (the CPU's emulation)
    assert np.array_equal(out, out.astype(hl.bfloat16.np).astype(np.float32))


def test_policy_names_and_refusals(policy):
    with pytest.raises(hl.errors.ValueError, match="unknown policy"):
        hl.mixed_precision.Policy("mixed_float8")
    p = hl.mixed_precision.Policy("mixed_float16")
    assert (p.compute_dtype, p.variable_dtype) == ("float16", "float32")
    policy("mixed_float16")
    layer = L.Linear(3)
    assert layer.dtype_policy == p
    policy("float32")
    assert L.Linear(3).dtype_policy.name == "float32" and layer.dtype_policy == p
    with pytest.raises(hl.errors.UnsupportedError, match="float16"):
        layer(hl.tensor(np.ones((2, 4), np.float32)))  # float16 on the CPU


def test_policy_survives_save_and_load(policy, tmp_path):
    policy("mixed_bfloat16")
    model = hl.Sequential(L.Linear(3))
    model(hl.tensor(np.ones((2, 4), np.float32)))
    hl.save(model, str(tmp_path / "m.hl"))  # hl.load's safe unpickler admits Policy by name
    back = hl.load(str(tmp_path / "m.hl"))
    assert back.layers[0].dtype_policy.name == "mixed_bfloat16"


def _train_cnn(amp, epochs=1):  # one epoch: ~15 s per run under emulation
    hl.manual_seed(0)
    x, y, xt, yt = digits(flat=False)
    model = SmallCNN()
    model.train()  # explicitly: not SINGA's global default, which another test may have left off
    model.to("cuda")
    opt = None
    scaler = hl.amp.GradScaler("cuda", enabled=amp)
    for _ in range(epochs):
        for i in range(0, len(x), 32):
            xb = hl.tensor(x[i:i + 32], device="cuda")
            yb = hl.tensor(y[i:i + 32], device="cuda")
            with hl.amp.autocast("cuda", dtype=hl.float16, enabled=amp):
                out = model(xb)
                loss = F.softmax_cross_entropy(out, yb)
            assert loss.dtype is hl.float32
            if opt is None:
                opt = hl.opt.SGD(lr=0.05, momentum=0.9, params=list(model.get_params().values()))
            opt.zero_grad()
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    model.eval()
    with hl.no_grad(), hl.amp.autocast("cuda", enabled=amp):
        pred = model(hl.tensor(xt, device="cuda")).astype("float32").numpy().argmax(1)
    return float((pred == yt).mean()), scaler


@pytest.mark.gpu
def test_pytorch_style_cnn_with_autocast_and_grad_scaler_on_cuda():
    acc32, _ = _train_cnn(False)
    acc, scaler = _train_cnn(True)
    assert acc32 > 0.75 and acc >= acc32 - 0.01, (acc, acc32)
    assert scaler.get_scale() == 2.0 ** 16  # no overflow, fewer than 2000 steps: unchanged


def test_graph_mode_fit_runs_bfloat16(policy):
    """bfloat16 needs no loss scaling, so its step records as a plan like float32's and gives
    the eager run's numbers."""
    x, y, _, _ = digits()
    losses = {}
    for graph in (False, True):
        policy("mixed_bfloat16")
        hl.manual_seed(0)
        model = hl.Sequential(L.Linear(32), L.ReLU(), L.Linear(10))
        model.compile(optimizer=hl.opt.SGD(lr=0.05), loss="sparse_categorical_crossentropy")
        model.graph(graph)
        losses[graph] = model.fit(x[:256], y[:256], epochs=1, batch_size=32, verbose=0,
                                  shuffle=False).history["loss"]
    np.testing.assert_allclose(losses[True], losses[False], rtol=1e-5)


@pytest.mark.gpu
def test_graph_mode_fit_with_float16_loss_scaling_matches_float32_accuracy(policy):
    """mixed_float16 in graph mode: the loss scaling runs on the device inside the update
    plan (tests/amp/test_graph_mode.py checks it step for step against eager); the digits
    reach float32's accuracy within 1% as eagerly."""
    acc32 = _float32_accuracy("cuda")
    model, acc = _fit("mixed_float16", "cuda", graph=True)
    assert acc32 > 0.9 and acc >= acc32 - 0.01, (acc, acc32)
    stats = model._graph.stats()["fit"]
    assert stats["replayed"] > 100, stats
    assert model.__dict__["loss_scaler"].get_scale() == 2.0 ** 15
