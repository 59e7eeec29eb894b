"""hl.graph.profile: per-op times of graph mode's replays. Checked against what is known
independently: how many replays fit makes (steps, minus the eager and skipped ones), which ops
a Linear-ReLU-Linear step records, the wall time measured around fit, and that profiling
changes no number of training (the same history without it)."""
import time

import numpy as np
import pytest

import hl
from hl import errors


def _model(graph=True):
    hl.manual_seed(0)
    m = hl.Sequential([hl.layers.Linear(16), hl.layers.ReLU(), hl.layers.Linear(3)])
    m.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9), loss="cross_entropy",
              jit_compile=graph)
    return m


def _data(rng):
    return rng.standard_normal((96, 10)).astype(np.float32), rng.integers(0, 3, 96)


def test_fit_profile_counts_ops_and_time(rng):
    x, y = _data(rng)
    plain = _model().fit(x, y, batch_size=32, epochs=4, verbose=0, shuffle=False).history
    m = _model()
    start = time.perf_counter()
    with hl.graph.profile(skip=1) as prof:
        h = m.fit(x, y, batch_size=32, epochs=4, verbose=0, shuffle=False).history
    wall = time.perf_counter() - start
    assert h == plain  # timing changes nothing
    rows = prof.records()
    plans = sorted({r["plan"] for r in rows})
    assert plans == ["Sequential.fit #1", "Sequential.fit #1 (backward and update)"]
    # 12 steps: the first eager, the second recorded and run (skipped), 10 timed replays
    assert {r["replays"] for r in rows} == {10}
    forward = {op for r in rows if "(backward" not in r["plan"] for op in r["ops"]}
    backward = {op for r in rows if "(backward" in r["plan"] for op in r["ops"]}
    assert {"relu", "softmax_cross_entropy"} <= forward and not any(
        op.endswith("_grad") for op in forward)
    assert {"relu_grad", "softmax_cross_entropy_grad"} <= backward
    by_op = prof.by_op()
    assert by_op["relu"]["calls"] == 10 and by_op["relu_grad"]["calls"] == 10
    assert all(e["seconds"] > 0 for e in by_op.values())
    assert list(by_op) == sorted(by_op, key=lambda k: -by_op[k]["seconds"])  # slowest first
    assert 0 < prof.total() <= wall
    assert prof.total() == pytest.approx(sum(e["seconds"] for e in by_op.values()))
    table = prof.table().splitlines()
    assert table[0].split() == ["op", "calls", "total", "ms", "mean", "us", "share"]
    assert len(table) == len(by_op) + 2 and table[-1].startswith("total")
    # stopped: the totals stay, the plans are let go and later replays are not timed
    assert not prof.active and prof._plans == {}
    m.fit(x, y, batch_size=32, epochs=1, verbose=0)
    assert prof.records() == rows


def test_one_profile_at_a_time_and_eager_models(rng):
    x, y = _data(rng)
    with hl.graph.profile() as prof:
        with pytest.raises(errors.ValueError, match="one profile at a time"):
            hl.graph.profile().start()
        _model(graph=False).fit(x, y, batch_size=32, epochs=2, verbose=0)
    assert prof.records() == [] and prof.total() == 0  # eager ops are not timed
    with pytest.raises(errors.ValueError, match="skip must be >= 0"):
        hl.graph.profile(skip=-1)
    assert hl.graph.profile().start().stop().records() == []


def test_two_threads_under_one_profile(rng):
    """Plans replayed on two threads at once are both timed, and each thread's training gets
    exactly what it gets alone."""
    import threading
    x, y = _data(rng)
    alone = _model().fit(x, y, batch_size=32, epochs=3, verbose=0, shuffle=False).history
    models, out = [], [None, None]
    for _ in range(2):  # built here: their first draws from the generator are not concurrent
        models.append(_model())
        models[-1].predict(x[:1], verbose=0)

    def train(k):
        out[k] = models[k].fit(x, y, batch_size=32, epochs=3, verbose=0, shuffle=False).history

    with hl.graph.profile() as prof:
        threads = [threading.Thread(target=train, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert out == [alone, alone]
    # each model: 9 steps, the first eager: 8 runs of each of its two plans
    rows = prof.records()
    assert len({r["plan_number"] for r in rows}) == 4 and {r["replays"] for r in rows} == {8}


def test_a_cut_plan_is_timed_part_by_part():
    """A plan cut into segments (recording.cut, as DistOpt's buckets) is timed in every part;
    the Python between the parts is not."""
    from hl import _core
    from hl.graph import PlanCache, recording
    buf = hl.zeros((3,))

    def step(x):
        y = x * 2.0
        _core.copy_into(buf._h, y._h)
        if recording.current() is not None:
            recording.cut(lambda: None)
        return hl.relu(buf * 3.0)

    cache = PlanCache("cut")
    with hl.graph.profile() as prof:
        for i in range(5):
            out = cache.call(step, (hl.tensor(np.full(3, float(i), np.float32)),))
            np.testing.assert_array_equal(out.numpy(), np.full(3, 6.0 * i))
    rows = prof.records()
    assert {r["plan"] for r in rows} == {"cut #1 part 1", "cut #1 part 2"}
    assert {r["plan_number"] for r in rows} == {0} and {r["replays"] for r in rows} == {4}
    assert "relu" in {op for r in rows if r["plan"].endswith("part 2") for op in r["ops"]}
