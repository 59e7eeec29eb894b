"""What graph-mode profiling costs (hl.graph.profile; SINGA's dev.SetVerbosity): a training
step replayed as a plan, with profiling off and on, in the same process, in alternating
blocks (so load changes hit both alike).

    python bench/graph_profile.py [--only mlp1 cnn] [--steps 30] [--blocks 6] [--threads 1]

Models are bench/train.py's: the MLP 784-512-512-10 at batch 1 (many short records: the
clock reads weigh most there), the MNIST CNN at batch 64. Figures: the median step time of
each setting over all its blocks, and on/off as a ratio. "off" is the plain replay (the
profiling branch costs one pointer test per replay in the core and one list test in Python).
"""
import argparse
import platform
import statistics

import _common

ARGS = None


def step_fn(name):
    from graph import hl_step_fn
    from train import MODELS
    batch, shape = MODELS[name][:2]
    return hl_step_fn(name, batch, shape, graph=True)


def bench(name):
    import hl
    step = step_fn(name)
    _common.time_steps(step, 0, warmup=5)  # eager, recorded, then replays
    off, on = [], []
    for _ in range(ARGS.blocks):
        off += _common.time_steps(step, ARGS.steps, warmup=1)
        with hl.graph.profile() as prof:
            on += _common.time_steps(step, ARGS.steps, warmup=1)
    rows = len(prof.records())
    return statistics.median(off), statistics.median(on), rows


def main():
    global ARGS
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="*", default=["mlp1", "cnn"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--blocks", type=int, default=6)
    ap.add_argument("--threads", type=int, default=None)
    ARGS = ap.parse_args()
    _common.setup(ARGS.threads)
    import os
    print(f"CPU: {platform.processor() or platform.machine()}, load average "
          f"{os.getloadavg()[0]:.1f}, threads {ARGS.threads or 'default'}")
    print(f"{'model':<6} {'rows':>5} {'off ms':>9} {'on ms':>9} {'on/off':>7}")
    for name in ARGS.only:
        off, on, rows = bench(name)
        print(f"{name:<6} {rows:>5} {off * 1e3:>9.3f} {on * 1e3:>9.3f} {on / off:>7.3f}")


if __name__ == "__main__":
    main()
