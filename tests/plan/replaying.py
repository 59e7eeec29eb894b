"""Records f() into a plan (with input slots), sets its options and replays it: the plan
tests' common steps."""
import gc

from hl import _core


def record(f, *inputs, options=None):
    """(plan, slots, f's result): f() recorded with the tensors `inputs` declared as input
    slots, in order."""
    _core.plan_begin()
    try:
        slots = [_core.plan_input(x._h) for x in inputs]
        out = f()
    finally:
        plan = _core.plan_end()
    # the recording's young cyclic garbage goes (a full collection, ~0.5 s late in the suite
    # where the heap is large, made the plan tests a minute slower)
    gc.collect(1)
    if options is not None:
        _core.plan_set_options(plan, options)
    return plan, slots, out


def replay(f, options=0, runs=2):
    """(plan, f's result): f's outputs hold what the last replay wrote."""
    plan, _, out = record(f, options=options)
    for _ in range(runs):
        _core.plan_run(plan)
    return plan, out
