"""Plans on cuda replayed as CUDA Graphs (libcore/cuda/graph.cu, libcore/src/plan/capture.c):
graph-mode training on cuda:0 against eager cuda:0 and the CPU, capture statistics, inputs
bound by slot, random records drawing fresh numbers, the calls kept out of graphs (index and
label checks) and a capture that fails. Under HL_CUDA_EMULATE=1 the emulated runtime records
a capture's launches with their arguments by value and replays those, so a graph that keeps a
stale address or a stale Philox key gives wrong numbers here as on a GPU."""
import ctypes
import threading

import numpy as np
import pytest

import hl
from hl import _core
from hl import layers as L
from tests.plan.replaying import record

pytestmark = pytest.mark.gpu
needs_emulation = pytest.mark.skipif(not hl.cuda.is_emulated(),
                                     reason="needs the emulation's hooks")
RNG = np.random.default_rng(23)


def _emu():
    from hl import _cuda_libs
    return ctypes.CDLL(_cuda_libs.library_path())


def _cuda(a):
    return hl.tensor(np.asarray(a), device="cuda")


def _mlp(x, w1, b1, w2):
    h = hl.relu(x @ w1 + b1)
    h = hl.tanh(h * 0.5) * 2.0 - 1.0
    return (h @ w2).sum(axis=1)


def _mlp_numpy(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.tanh(h * 0.5) * 2 - 1
    return (h @ w2).sum(axis=1)


def _weights():
    return [RNG.standard_normal(s).astype(np.float32) * 0.3 for s in ((12, 20), (20,), (20, 4))]


def test_plan_is_captured_once_and_launched_with_rebound_inputs():
    ws = _weights()
    w1, b1, w2 = (_cuda(w) for w in ws)
    x = _cuda(RNG.standard_normal((6, 12)).astype(np.float32))
    plan, (slot,), y = record(lambda: _mlp(x, w1, b1, w2), x)
    for step in range(5):
        batch = RNG.standard_normal((6, 12)).astype(np.float32)
        if step % 2:  # bind: after the capture the values are copied into the slot
            _core.plan_bind(plan, slot, _cuda(batch)._h)
        else:         # graph mode's way: copy into the slot tensor
            _core.copy_into(x._h, _cuda(batch)._h)
        _core.plan_run(plan)
        # float32 matmuls, numpy vs the emulated cuBLAS (OpenBLAS): 1e-5 relative
        np.testing.assert_allclose(y.numpy(), _mlp_numpy(batch, *ws), rtol=1e-5, atol=1e-5)
        stats = _core.plan_stats(plan)
        if step == 0:  # the first replay runs call by call and notes what cannot be captured
            assert stats["graphs"] == 0 and stats["graph_launches"] == 0
    # replay 2 captured and launched, 3-5 launched
    assert stats["graphs"] == 1 and stats["graph_launches"] == 4
    assert stats["graph_calls"] == stats["calls"] and stats["uncaptured_calls"] == 0
    assert stats["capture_note"] == ""


def test_a_binding_made_before_the_capture_is_copied_into_the_slot():
    ws = _weights()
    w1, b1, w2 = (_cuda(w) for w in ws)
    x = _cuda(np.zeros((3, 12), np.float32))
    plan, (slot,), y = record(lambda: _mlp(x, w1, b1, w2), x)
    first = RNG.standard_normal((3, 12)).astype(np.float32)
    other = _cuda(first)
    _core.plan_bind(plan, slot, other._h)  # redirected (same layout): no copy yet
    _core.plan_run(plan)
    _core.plan_run(plan)  # the capture pins the slot to its own memory, values copied there
    np.testing.assert_allclose(y.numpy(), _mlp_numpy(first, *ws), rtol=1e-5, atol=1e-5)
    second = RNG.standard_normal((3, 12)).astype(np.float32)
    _core.copy_into(other._h, _cuda(second)._h)  # the old binding is no longer read...
    _core.plan_bind(plan, slot, other._h)         # ...until bound again
    _core.plan_run(plan)
    np.testing.assert_allclose(y.numpy(), _mlp_numpy(second, *ws), rtol=1e-5, atol=1e-5)
    assert _core.plan_stats(plan)["graph_launches"] == 2


@pytest.mark.parametrize("dtype", [hl.float32, hl.float64, hl.float16, hl.bfloat16])
def test_random_records_draw_fresh_numbers_in_a_graph(dtype):
    """A captured plan and the same plan uncaptured give the same stream, replay by replay
    (the half types' draws too: float32's words, rounded)."""
    draws = {}
    for options in (0, _core.PLAN_NO_CAPTURE):
        hl.manual_seed(7)
        x = _cuda(np.ones(1000, np.float64 if dtype == hl.float64 else np.float32))
        if dtype in (hl.float16, hl.bfloat16):
            x = x.astype(dtype)
        plan, _, y = record(lambda: (x * hl.uniform(1000, dtype=dtype, device="cuda")
                                      + hl.bernoulli(1000, p=0.5, dtype=dtype, device="cuda")
                                      * hl.normal(1000, dtype=dtype, device="cuda")), x,
                             options=options)
        out = []
        for _ in range(4):
            _core.plan_run(plan)
            out.append(y.astype(hl.float32).numpy().copy())
        draws[options] = out
        stats = _core.plan_stats(plan)
        assert stats["graphs"] == (1 if options == 0 else 0)
    for a, b in zip(draws[0], draws[_core.PLAN_NO_CAPTURE]):
        np.testing.assert_array_equal(a, b)
    for k in range(3):  # each replay draws anew
        assert not np.array_equal(draws[0][k], draws[0][k + 1])


def test_index_checks_stay_out_of_graphs_and_still_raise():
    table = _cuda(RNG.standard_normal((10, 4)).astype(np.float32))
    w = _cuda(RNG.standard_normal((4, 3)).astype(np.float32))
    ix = _cuda(np.array([1, 3, 5], np.int64))
    plan, (slot,), y = record(lambda: hl.relu(hl.gather(table * 2.0, ix, axis=0) @ w) + 1.0, ix)
    for _ in range(3):
        _core.plan_run(plan)
    want = np.maximum((table.numpy() * 2)[[1, 3, 5]] @ w.numpy(), 0) + 1
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-6)
    stats = _core.plan_stats(plan)
    assert stats["uncaptured_calls"] >= 1
    assert "gather" in stats["capture_note"] and "on the host" in stats["capture_note"]
    assert stats["graph_calls"] + stats["uncaptured_calls"] == stats["calls"]
    _core.copy_into(ix._h, _cuda(np.array([1, 10, 2], np.int64))._h)
    with pytest.raises(hl.errors.IndexError, match="index 10 is out of range for axis 0"):
        _core.plan_run(plan)


@pytest.mark.parametrize("dtype", [hl.float16, hl.bfloat16])
def test_half_sums_in_a_work_buffer_replay_from_the_plan_arena(dtype):
    """The half indexing gradients and cumsum in a plan: gather_grad and scatter-add sum in a
    float32 buffer, which inside a plan is the call's block of the plan's arena; each replay
    gives the eager numbers as the bound input changes."""
    table = _cuda(RNG.standard_normal((40, 8)).astype(np.float32)).astype(dtype)
    picks = np.array([3, 3, 7, 0, 3, 39], np.int64)
    ix = _cuda(picks)
    rows = _cuda(np.repeat((picks % 6)[:, None], 8, axis=1))  # repeated rows: sums
    zeros = hl.zeros((6, 8), device="cuda").astype(dtype)

    def step():
        g = hl.ops.gather_grad(table[:6] * 2.0, ix, 0, (40, 8))
        s = hl.ops.scatter_elements_forward(zeros, rows, table[6:12], 0, "add")
        return hl.cumsum(g, axis=0).sum() + s.sum()
    want = step().astype(hl.float32).item()
    plan, _, y = record(step, table)
    for _ in range(3):
        _core.plan_run(plan)
        assert y.astype(hl.float32).item() == want
    other = _cuda(RNG.standard_normal((40, 8)).astype(np.float32)).astype(dtype)
    _core.copy_into(table._h, other._h)
    _core.plan_run(plan)
    assert y.astype(hl.float32).item() == step().astype(hl.float32).item() != want


@needs_emulation
def test_a_failed_capture_runs_the_calls_one_by_one_and_says_why():
    ws = _weights()
    w1, b1, w2 = (_cuda(w) for w in ws)
    x = _cuda(RNG.standard_normal((4, 12)).astype(np.float32))
    plan, _, y = record(lambda: _mlp(x, w1, b1, w2), x)
    _core.plan_run(plan)
    _emu().hl_cuda_emu_spoil_next_capture()
    for _ in range(3):
        _core.plan_run(plan)
        np.testing.assert_allclose(y.numpy(), _mlp_numpy(x.numpy(), *ws), rtol=1e-5, atol=1e-5)
    stats = _core.plan_stats(plan)
    assert stats["graphs"] == 0 and stats["uncaptured_calls"] == stats["calls"]
    assert "the capture failed" in stats["capture_note"]


@needs_emulation
def test_a_failing_launch_inside_a_graph_is_a_device_error():
    x = _cuda(np.ones(8, np.float32))
    plan, _, y = record(lambda: (x.exp() + 1.0).sqrt(), x)
    _core.plan_run(plan)
    _core.plan_run(plan)  # captured
    _emu().hl_cuda_emu_fail_next_launch(0)
    with pytest.raises(hl.errors.DeviceError, match="a captured plan failed on cuda:0"):
        _core.plan_run(plan)
    _core.plan_run(plan)
    np.testing.assert_allclose(y.numpy(), np.sqrt(np.e + 1) * np.ones(8), rtol=1e-6)


@needs_emulation
def test_a_plan_arena_past_the_device_memory_is_a_memory_error(monkeypatch):
    x = _cuda(np.ones((1000, 1000), np.float32))
    plan, _, y = record(lambda: ((x * 2.0).exp() + x).sum(), x)
    hl.cuda.synchronize()
    hl.cuda.empty_cache()
    used = hl.cuda.memory_stats()["in_use"]
    monkeypatch.setenv("HL_CUDA_EMU_MEMORY_MB", str((used >> 20) + 1))  # < 1 intermediate
    with pytest.raises(hl.errors.MemoryError, match="out of memory"):
        _core.plan_run(plan)
        _core.plan_run(plan)  # the arena is made before the second replay
    monkeypatch.delenv("HL_CUDA_EMU_MEMORY_MB")
    _core.plan_run(plan)
    _core.plan_run(plan)
    assert y.numpy() == pytest.approx(float((np.exp(2.0) + 1) * 1e6), rel=1e-5)


def test_other_threads_work_never_lands_in_a_capture():
    """A capture records on the capturing thread's own stream: eager work of another thread
    on the same device runs (and is not replayed by the graph)."""
    stop, errors = threading.Event(), []
    a = RNG.standard_normal((32, 32)).astype(np.float32)
    want_other = np.maximum(a @ a, 0).sum(axis=0)

    def other():
        try:
            t = _cuda(a)
            while not stop.is_set():
                np.testing.assert_allclose((t @ t).relu().sum(axis=0).numpy(), want_other,
                                           rtol=1e-4, atol=1e-4)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    th = threading.Thread(target=other)
    th.start()
    try:
        ws = _weights()
        w1, b1, w2 = (_cuda(w) for w in ws)
        for _ in range(6):  # fresh plans: a capture at each one's second replay
            x = _cuda(RNG.standard_normal((5, 12)).astype(np.float32))
            plan, _, y = record(lambda: _mlp(x, w1, b1, w2), x)
            for _ in range(3):
                _core.plan_run(plan)
                np.testing.assert_allclose(y.numpy(), _mlp_numpy(x.numpy(), *ws), rtol=1e-5,
                                           atol=1e-5)
            assert _core.plan_stats(plan)["graphs"] == 1
    finally:
        stop.set()
        th.join()
    assert not errors, errors[0]


def _train(device, graph, epochs=2, dropout=False, cnn=False):
    hl.manual_seed(0)
    (x, y), _ = hl.data.digits()
    x, y = x.astype(np.float32)[:480], y[:480]
    if cnn:  # conv's im2col buffer is kernel scratch: in the plan's arena, on the device
        x = x.reshape(len(x), 1, 8, 8)
        layers = [L.Conv2d(4, 3, padding=1), L.BatchNorm2d(), L.ReLU(), L.MaxPool2d(2),
                  L.Flatten()]
    else:
        x = x.reshape(len(x), -1)
        layers = []
    layers += [L.Linear(32), L.ReLU()] + ([L.Dropout(0.2)] if dropout else []) + [L.Linear(10)]
    model = hl.Sequential(*layers)
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", jit_compile=graph)
    model.to(device)
    hist = model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False)
    return model, hist.history["loss"]


def _plan_stats(model):
    runner = model.__dict__.get("_graph")
    stats = []
    for cache in runner.caches.values():
        for entry in cache.entries.values():
            for p in (entry.plan, entry.second):
                if p is not None:
                    stats.append(_core.plan_stats(p.core))
    return stats


@pytest.mark.parametrize("cnn", [False, True], ids=["mlp", "cnn"])
def test_graph_mode_training_on_cuda_equals_eager_cuda_and_cpu(cnn):
    model, graph_cuda = _train("cuda", True, cnn=cnn)
    _, eager_cuda = _train("cuda", False, cnn=cnn)
    _, graph_cpu = _train("cpu", True, cnn=cnn)
    # float32 with double accumulators everywhere; summation order differs between devices
    np.testing.assert_allclose(graph_cuda, eager_cuda, rtol=1e-6)
    np.testing.assert_allclose(graph_cuda, graph_cpu, rtol=1e-5)
    stats = _plan_stats(model)
    assert stats and sum(s["graph_launches"] for s in stats) >= 2 * (480 // 32 - 3)
    # the loss checks its labels on the host (and max_pool_grad its indices): those calls
    # stay out, the rest is in graphs
    assert any("softmax_cross_entropy" in s["capture_note"] for s in stats)
    assert sum(s["graph_calls"] for s in stats) > 3 * sum(s["uncaptured_calls"] for s in stats)


def test_graph_mode_with_dropout_on_cuda_is_the_uncaptured_replay():
    """Dropout in a captured step draws the masks the uncaptured replay draws."""
    import os
    _, captured = _train("cuda", True, epochs=1, dropout=True)
    os.environ["HL_PLAN_CAPTURE"] = "0"
    try:
        model, plain = _train("cuda", True, epochs=1, dropout=True)
    finally:
        del os.environ["HL_PLAN_CAPTURE"]
    assert all(s["graphs"] == 0 for s in _plan_stats(model))
    np.testing.assert_array_equal(captured, plain)
