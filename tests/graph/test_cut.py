"""recording.cut: Python that runs between two parts of a recorded plan at every replay (what
DistOpt uses to start a bucket's allreduce while the rest of backward runs). Reference: the
same step run eagerly, where the Python runs inline."""
import numpy as np
import pytest

import hl
from hl import _core
from hl.graph import PlanCache, recording


def _step(buf, calls):
    def step(x):
        y = x * 2.0
        _core.copy_into(buf._h, y._h)  # the first segment writes buf...

        def between():  # ...Python reads and changes it between the segments...
            calls.append(float(buf.numpy()[0]))
            buf.numpy()[...] += 1.0
        if recording.current() is not None:
            recording.cut(between)
        else:
            between()
        return buf * 3.0  # ...and the second segment reads what Python left
    return step


def test_cut_runs_python_between_segments_at_every_replay():
    buf, calls = hl.zeros((3,)), []
    cache = PlanCache("cut test")
    for i in range(5):
        out = cache.call(_step(buf, calls), (hl.tensor(np.full(3, float(i), np.float32)),))
        np.testing.assert_array_equal(out.numpy(), np.full(3, (2.0 * i + 1.0) * 3.0))
    assert cache.stats == {"eager": 1, "recorded": 1, "replayed": 3}
    assert calls == [0.0, 2.0, 4.0, 6.0, 8.0]  # once per step, with that step's values
    plan = next(iter(cache.entries.values())).plan
    assert len(plan.then) == 1 and plan.size == sum(
        _core.plan_size(c) for c in [plan.core] + [c for _, c in plan.then])


def test_cut_outside_a_recording_is_refused():
    with pytest.raises(hl.errors.ValueError, match="no plan is being recorded"):
        recording.cut(lambda: None)
