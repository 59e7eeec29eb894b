"""Records f() into a plan, sets its options and replays it: the plan tests' common step."""
import gc

from hl import _core


def replay(f, options=0, runs=2):
    """(plan, f's result): f's outputs hold what the last replay wrote."""
    _core.plan_begin()
    try:
        out = f()
    finally:
        plan = _core.plan_end()
    # the recording's young cyclic garbage goes (a full collection, ~0.5 s late in the suite
    # where the heap is large, made the plan tests a minute slower)
    gc.collect(1)
    _core.plan_set_options(plan, options)
    for _ in range(runs):
        _core.plan_run(plan)
    return plan, out
