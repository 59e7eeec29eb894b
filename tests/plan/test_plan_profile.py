"""Per-record timing of plan replays (libcore/src/plan/profile.c through hl._core):
which replays are timed (skip, on/off), what each record reports (its op, its fused group),
that the times are real (positive, and within the wall time measured around the replays)
and that timing changes no result (numpy reference)."""
import gc
import threading
import time

import numpy as np
import pytest

import hl
from hl import _core, errors

from .replaying import record
from .test_plan_core import _mlp, _mlp_numpy, _t, _weights

RNG = np.random.default_rng(24)


def _plan():
    w1, b1, w2 = _weights()
    x = _t(RNG.standard_normal((16, 32), dtype=np.float32))
    plan, (slot,), y = record(lambda: _mlp(x, w1, b1, w2), x)
    return plan, slot, y, (x, w1, b1, w2)


def test_skip_on_off_reset_and_ops():
    plan, _, y, (x, w1, b1, w2) = _plan()
    n = _core.plan_size(plan)
    timed, _, first, ns = _core.plan_profile(plan)
    assert timed == 0 and first == list(range(n)) and ns == [0] * n  # never switched on
    _core.plan_set_profiling(plan, True, skip=2)
    wall = 0.0
    for k in range(5):
        start = time.perf_counter()
        _core.plan_run(plan)
        if k >= 2:  # the first two replays are skipped
            wall += time.perf_counter() - start
    timed, ops, first, ns = _core.plan_profile(plan)
    assert timed == 3
    # the ops, in record order, are the ones the expression calls: matmul first, sum last
    assert ops[0] in ("matmul", "gemm") and ops[-1] == "sum" and len(ops) == n
    assert set(ops) >= {"relu", "tanh", "exp", "mul", "add"}
    for i, f in enumerate(first):
        assert f <= i and first[f] == f          # a group's first record is its own first
        if f == i:
            assert ns[i] > 0, (i, ops[i])          # every timed row took some time
        else:
            assert ns[i] == 0                      # its time is under its group's first
    assert sum(ns) / 1e9 <= wall                   # times are within the measured wall time
    np.testing.assert_allclose(y.numpy(), _mlp_numpy(x.numpy(), w1.numpy(), b1.numpy(),
                                                     w2.numpy()), rtol=1e-5, atol=1e-5)
    _core.plan_set_profiling(plan, False)
    _core.plan_run(plan)
    assert _core.plan_profile(plan)[0] == 3 and _core.plan_profile(plan)[3] == ns  # off
    _core.plan_profile_reset(plan)
    assert _core.plan_profile(plan)[0] == 0 and not any(_core.plan_profile(plan)[3])


def test_fused_chain_is_one_row():
    x = _t(RNG.standard_normal((64, 64), dtype=np.float32))
    plan, _, y = record(lambda: hl.relu((x + 1.0) * 2.0) - 3.0, x)
    _core.plan_set_profiling(plan, True, 0)
    _core.plan_run(plan)
    _core.plan_run(plan)
    timed, ops, first, ns = _core.plan_profile(plan)
    assert _core.plan_stats(plan)["fused_groups"] == 1
    assert first == [0] * len(ops) and ns[0] > 0 and not any(ns[1:])
    np.testing.assert_allclose(y.numpy(), np.maximum((x.numpy() + 1) * 2, 0) - 3, rtol=1e-6)


def test_timing_changes_no_result():
    plan, _, y, _ = _plan()
    _core.plan_run(plan)
    plain = y.numpy().copy()
    _core.plan_set_profiling(plan, True, 0)
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), plain)


def test_bad_arguments():
    plan, *_ = _plan()
    with pytest.raises(errors.ValueError, match="skip must be >= 0"):
        _core.plan_set_profiling(plan, True, -1)
    n = _core.plan_size(plan)
    ns = _core.ffi.new("int64_t[]", n + 1)
    with pytest.raises(errors.ValueError, match="hl_plan_size"):
        _core.check(_core.lib.hl_plan_profile(plan, _core.ffi.NULL, _core.ffi.NULL,
                                              _core.ffi.NULL, ns, n + 1))


def test_read_and_switch_while_another_thread_replays():
    plan, *_ = _plan()
    _core.plan_set_profiling(plan, True, 0)
    stop, seen = threading.Event(), []

    def replays():
        while not stop.is_set():
            _core.plan_run(plan)

    t = threading.Thread(target=replays)
    t.start()
    try:
        for k in range(50):
            timed, _, _, ns = _core.plan_profile(plan)
            seen.append(timed)
            _core.plan_set_profiling(plan, k % 2 == 0, 0)
    finally:
        stop.set()
        t.join()
    assert seen == sorted(seen)  # the count only grows
    gc.collect()
