"""SINGA's device graph (dev.EnableGraph / RunGraph / ResetGraph) and dev.PrintTimeProfiling
on hl's plans, against SINGA's documented behaviour (src/core/device/device.cc,
src/core/scheduler/scheduler.cc): buffered ops do not run until RunGraph, RunGraph runs them
every time it is called and reads the inputs' current values, ResetGraph forgets them; the
time report's format per verbosity. Expected values: numpy, and the same steps run eagerly."""
import re

import numpy as np
import pytest

import hl
from hl import errors
from hl.singa import autograd, device, layer, model, opt, tensor


@pytest.fixture
def dev():
    d = device.get_default_device()
    yield d
    d.EnableGraph(False)
    d.ResetGraph()
    d.SetVerbosity(0)
    d.SetSkipIteration(5)


def test_buffered_ops_run_only_in_run_graph_and_read_current_inputs(dev, rng):
    a, w = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 2))
    x = tensor.from_numpy(a)
    wt = tensor.from_numpy(w.astype(np.float32))
    dev.EnableGraph(True)
    assert dev.graph_enabled()
    y = autograd.relu(autograd.matmul(x, wt))
    dev.EnableGraph(False)
    with pytest.raises(errors.UnsupportedError, match="before the plan .* has run"):
        tensor.to_numpy(y)                     # not computed yet
    dev.RunGraph()
    np.testing.assert_allclose(tensor.to_numpy(y), np.maximum(a @ w, 0), rtol=1e-5, atol=1e-6)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    x.copy_from_numpy(b)                       # SINGA's loop: new data, then RunGraph
    dev.RunGraph(serial=True)
    np.testing.assert_allclose(tensor.to_numpy(y), np.maximum(b @ w, 0), rtol=1e-5, atol=1e-6)
    dev.ResetGraph()                           # forgotten: RunGraph no longer touches y
    x.copy_from_numpy(a)
    dev.RunGraph()
    np.testing.assert_allclose(tensor.to_numpy(y), np.maximum(b @ w, 0), rtol=1e-5, atol=1e-6)


def test_run_graph_while_buffering_keeps_buffering(dev):
    """SINGA's RunGraph turns buffering off for the run and back on: later ops join."""
    x = tensor.from_numpy(np.full((2,), 2.0, np.float32))
    dev.EnableGraph(True)
    y = autograd.mul(x, x)
    dev.RunGraph()
    assert dev.graph_enabled()
    z = autograd.add(y, x)
    dev.EnableGraph(False)
    with pytest.raises(errors.UnsupportedError, match="dev.RunGraph"):
        tensor.to_numpy(z)
    dev.RunGraph()
    np.testing.assert_array_equal(tensor.to_numpy(z), [6.0, 6.0])


class Net(model.Model):
    def __init__(self):
        super().__init__()
        self.fc1 = layer.Linear(16)
        self.fc2 = layer.Linear(3)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc2(autograd.relu(self.fc1(x)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        ls = self.loss(out, y)
        self.optimizer(ls)
        return out, ls


def _net():
    hl.manual_seed(0)
    m = Net()
    m.optimizer = opt.Adam(lr=0.01)  # step counts live on the host: replay hooks
    m.compile([tensor.Tensor((8, 10))], is_train=True, use_graph=False)
    return m


def test_a_buffered_training_step_replays_as_eager_steps(dev, rng):
    """The step buffered once and run by RunGraph gives the eager run's weights bit for bit
    (Adam's bias corrections included), after an eager first step made the optimiser state."""
    data = [(rng.standard_normal((8, 10)).astype(np.float32),
             rng.integers(0, 3, 8).astype(np.int32)) for _ in range(6)]
    eager, graph = _net(), _net()
    tx, ty = tensor.Tensor((8, 10)), tensor.Tensor((8,), dtype=tensor.int32)
    for x, y in data:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        eager(tx, ty)
    tx.copy_from_numpy(data[0][0])
    ty.copy_from_numpy(data[0][1])
    graph(tx, ty)                        # eager: Adam makes its state
    dev.EnableGraph(True)
    out, ls = graph(tx, ty)              # buffered, not run
    dev.EnableGraph(False)
    for x, y in data[1:]:
        tx.copy_from_numpy(x)
        ty.copy_from_numpy(y)
        dev.RunGraph()
    assert graph.optimizer.step_count == eager.optimizer.step_count == 6
    for k, v in eager.get_states().items():
        np.testing.assert_array_equal(tensor.to_numpy(graph.get_states()[k]), tensor.to_numpy(v),
                                      err_msg=k)
    # a step buffered and then forgotten gives its host-side state back
    dev.EnableGraph(True)
    graph(tx, ty)
    dev.EnableGraph(False)
    assert graph.optimizer.step_count == 7
    dev.ResetGraph()
    assert graph.optimizer.step_count == 6


def test_what_cannot_be_buffered_says_so(dev):
    m = Net()
    m.optimizer = opt.SGD(lr=0.1)
    x = tensor.from_numpy(np.ones((2, 10), np.float32))
    dev.EnableGraph(True)
    with pytest.raises(errors.GraphBreak, match="would create its parameters"):
        m.forward(x)                     # never compiled: its weights would be buffered
    with pytest.raises(errors.GraphBreak, match="incomplete"):
        dev.EnableGraph(False)
    assert not dev.graph_enabled()
    dev.EnableGraph(True)
    y = autograd.relu(x)
    try:
        float(tensor.to_numpy(y).sum())  # a host read while buffering, caught
    except errors.GraphBreak:
        pass
    with pytest.raises(errors.GraphBreak, match="dropped"):
        dev.EnableGraph(False)
    dev.RunGraph()                       # nothing buffered: nothing runs


def _train_graph_mode(dev, steps, rng, verbosity, skip=None):
    m = _net()
    m.graph(True, sequential=True)
    if skip is not None:
        dev.SetSkipIteration(skip)
    dev.SetVerbosity(verbosity)
    tx, ty = tensor.Tensor((8, 10)), tensor.Tensor((8,), dtype=tensor.int32)
    for _ in range(steps):
        tx.copy_from_numpy(rng.standard_normal((8, 10)).astype(np.float32))
        ty.copy_from_numpy(rng.integers(0, 3, 8).astype(np.int32))
        m(tx, ty)
    return m


def test_print_time_profiling_per_verbosity(dev, rng, capsys):
    dev.PrintTimeProfiling()
    assert capsys.readouterr().out == ""          # verbosity 0: SINGA prints nothing
    _train_graph_mode(dev, 10, rng, verbosity=2, skip=3)
    dev.PrintTimeProfiling()
    out = capsys.readouterr().out.splitlines()
    assert out[:2] == ["", "Time Profiling:"]
    rows = [re.fullmatch(r"OP_ID(\d+)\. (\S+) : (\S+) sec", ln) for ln in out[2:]]
    assert all(rows) and len(rows) > 10, out
    ops = [r.group(2) for r in rows]
    assert "gemm" in ops or "matmul" in ops
    assert "softmax_cross_entropy_grad" in ops and all(float(r.group(3)) > 0 for r in rows)
    ids = [int(r.group(1)) for r in rows]
    assert ids == sorted(ids)
    # 10 steps: 1 eager, the recorded one and 8 replays run the plan (9 runs), 3 skipped
    prof = device._profiler.prof
    assert {r["replays"] for r in prof.records()} == {6}
    dev.SetVerbosity(1)
    dev.PrintTimeProfiling()
    out = capsys.readouterr().out.splitlines()
    f = re.fullmatch(r"Forward Propagation Time : (\S+) sec", out[2])
    b = re.fullmatch(r"Backward Propagation Time : (\S+) sec", out[3])
    assert f and b and float(f.group(1)) > 0 and float(b.group(1)) > 0
    per_step = prof.total() / 6
    assert float(f.group(1)) + float(b.group(1)) == pytest.approx(per_step, rel=1e-3)
    dev.SetVerbosity(3)
    dev.PrintTimeProfiling()
    assert capsys.readouterr().out.splitlines()[1] == "Time Profiling:"


def test_buffering_belongs_to_its_thread(dev):
    import threading
    started, finish, seen = threading.Event(), threading.Event(), []

    def buffer():
        dev.EnableGraph(True)
        started.set()
        finish.wait(60)
        dev.EnableGraph(False)
        seen.append(dev.graph_enabled())

    t = threading.Thread(target=buffer)
    t.start()
    started.wait(60)
    try:
        for call in (lambda: dev.EnableGraph(False), dev.ResetGraph):
            with pytest.raises(errors.ValueError, match="another thread"):
                call()
    finally:
        finish.set()
        t.join()
    assert seen == [False]
