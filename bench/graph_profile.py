"""What graph-mode profiling costs (hl.graph.profile; SINGA's dev.SetVerbosity): a training
step replayed as a plan, with profiling off and on, in the same process, in alternating
blocks (so load changes hit both alike).

    python bench/graph_profile.py [--only chain mlp1 cnn] [--steps 30] [--blocks 6] [--threads 1]
                                  [--clock cpu]

Models are bench/train.py's: the MLP 784-512-512-10 at batch 1 (short records), the MNIST CNN
at batch 64; and ``chain``, the worst case: a plan of 2000 tiny element-wise records (a (1, 8)
tensor, fusion off, as bench/graph_overhead.py), replayed through the core alone, its figure
per replay. Figures: the median step time of each setting over all its blocks, and on/off as
a ratio. ``--clock cpu`` times the process's CPU time instead of the wall clock (steadier on a
shared host; use it with --threads 1). "off" is the plain replay (the profiling branch costs
one pointer test per replay in the core and one list test in Python).
"""
import argparse
import statistics

import _common

ARGS = None


def step_fn(name):
    from graph import hl_step_fn
    from train import MODELS
    batch, shape = MODELS[name][:2]
    return hl_step_fn(name, batch, shape, graph=True)


def time_steps(step):
    """Per-step times of ARGS.steps steps after one untimed, on the chosen clock."""
    import time
    clock = time.process_time if ARGS.clock == "cpu" else time.perf_counter
    step()
    out = []
    for _ in range(ARGS.steps):
        t0 = clock()
        step()
        out.append(clock() - t0)
    return out


def chain_fn():
    """A plan of 2000 element-wise calls on a (1, 8) tensor, fusion off, and a step that
    replays it; profiling switched on by the caller goes through hl.graph.profile (the plan
    is wrapped as graph mode's are)."""
    import numpy as np
    import hl
    from hl import _core
    from hl.graph import Plan
    x = hl.tensor(np.ones((1, 8), np.float32))
    _core.plan_begin()
    v = x
    for k in range(2000):
        v = v + 0.5 if k % 3 == 0 else (v * 0.999 if k % 3 == 1 else hl.relu(v))
    core = _core.plan_end()
    _core.plan_set_options(core, _core.PLAN_NO_FUSION)
    plan = Plan(core, [], v, [], lambda: True, name="chain")
    return lambda: plan.run(())


def bench(name):
    import hl
    step = chain_fn() if name == "chain" else step_fn(name)
    _common.time_steps(step, 0, warmup=5)  # eager, recorded, then replays
    off, on = [], []
    for _ in range(ARGS.blocks):
        off += time_steps(step)
        with hl.graph.profile() as prof:
            on += time_steps(step)
    rows = len(prof.records())
    return statistics.median(off), statistics.median(on), rows


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["chain", "mlp1", "cnn"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--threads", type=int, default=None)
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    ARGS = ap.parse_args()
    _common.setup(ARGS.threads)
    import os
    from graph_overhead import _cpu
    print(f"CPU: {_cpu()}, load average "
          f"{os.getloadavg()[0]:.1f}, threads {ARGS.threads or 'default'}, clock {ARGS.clock}")
    print(f"{'model':<6} {'rows':>5} {'off ms':>9} {'on ms':>9} {'on/off':>7}")
    for name in ARGS.only:
        off, on, rows = bench(name)
        print(f"{name:<6} {rows:>5} {off * 1e3:>9.3f} {on * 1e3:>9.3f} {on / off:>7.3f}")


if __name__ == "__main__":
    main()
