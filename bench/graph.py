"""Graph mode: a training step replayed as a recorded plan, beside hl eager, PyTorch eager and
torch.compile (inductor, CPU), same model, same batch, same run.

    python bench/graph.py                         # every model
    python bench/graph.py --only mlp1 --steps 200
    python bench/graph.py --no-compile            # leave torch.compile out (slow to compile)
    python bench/graph.py --threads 1 --clock cpu # a loaded host: CPU time per step
    python bench/graph.py --only resnet18 --graph-alg sequence,topological  # both plan orders

Models (bench/train.py's): MLP 784-512-512-10 at batch 1 (per-step overhead), the MNIST CNN at
batch 64, a CIFAR ResNet-18 at batch 32. Each step is forward, softmax cross-entropy, backward
and SGD with momentum, on fixed random data; hl's step is a Module's train_one_batch, compiled
with use_graph=True for the graph figure (the warm-up covers graph mode's eager first step and
its recorded second); ``--graph-alg`` picks the plans' order (SINGA's graph_alg: 'sequence',
'topological' or both, each its own column). Each (library, model) pair runs in a process of
its own, twice round the libraries; the figure is the median step time over both processes'
timed steps. Memory: the growth of the process's peak resident set over its size before the
first step (as train.py).
"""
import argparse
import statistics
import sys

from _common import report, run_worker, setup, step_worker_args
from train import MODELS, hl_model, measure, torch_step_fn

LIBS = ("hl-eager", "hl-graph", "hl-topo", "torch", "torch-compile")
GRAPH_ALG = {"hl-graph": "sequence", "hl-topo": "topological"}  # graph mode's columns
# Timed steps at most, per model: a ResNet-18 step takes seconds on a loaded two-core machine,
# and 4 libraries x 2 processes x (warm-up + steps) of them must finish in minutes.
MOST_STEPS = {"resnet18": 3}


def hl_step_fn(name, batch, shape, graph, graph_alg="sequence"):
    import numpy as np
    import hl

    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.net = hl_model(name)
            self.optim = hl.opt.SGD(lr=0.01, momentum=0.9)

        def forward(self, x):
            return self.net(x)

        def train_one_batch(self, x, y):
            loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
            self.optim.backward_and_update(loss)
            return loss

    hl.manual_seed(0)
    model = Net()
    rng = np.random.default_rng(0)
    x = hl.tensor(rng.standard_normal((batch, *shape)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 10, batch).astype(np.int64))
    model.compile([hl.Placeholder(x.shape)], is_train=True, use_graph=graph,
                  graph_alg=graph_alg)

    def step():
        return model.train_one_batch(x, y)
    step.model = model  # for bench/graph_memory.py's plan statistics
    return step


def worker(lib, name, steps, warmup, threads, clock="wall"):
    if lib.startswith("hl"):
        import hl
        if threads:
            hl.set_num_threads(threads)
        step = hl_step_fn(name, *MODELS[name][:2], graph=lib in GRAPH_ALG,
                          graph_alg=GRAPH_ALG.get(lib, "sequence"))
    else:
        import torch
        if threads:
            torch.set_num_threads(threads)
        step = torch_step_fn(name, *MODELS[name][:2], compiled=lib == "torch-compile")
    return measure(step, steps, warmup, clock)


def run(args):
    algs = {a.strip() for a in args.graph_alg.split(",")}
    libs = [lib for lib in LIBS if not (args.no_compile and lib == "torch-compile") and
            not (lib in GRAPH_ALG and GRAPH_ALG[lib] not in algs)]
    graph = next(lib for lib in libs if lib in GRAPH_ALG)  # the ratios' graph column
    try:
        import torch  # noqa: F401
    except Exception:  # noqa: BLE001 - without torch, hl's figures alone
        libs = [lib for lib in libs if lib.startswith("hl")]
        print("torch is not importable: hl's figures only")
    names = [n.strip() for n in args.only.split(",")] if args.only else ["mlp1", "cnn",
                                                                         "resnet18"]
    what = "CPU ms per step (process time)" if args.clock == "cpu" else "median ms per step"
    print(f"threads: {args.threads or 'default'}   timed steps per process: {args.steps} "
          f"(at most {MOST_STEPS} for those models) "
          f"(after {args.warmup} warm-up), two processes per library; {what}")
    head = (f"{'model':30} " + " ".join(f"{lib:>13}" for lib in libs) +
            f" {'graph/eager':>11} {'graph/torch':>11}   {'MiB eager':>9} {'graph':>7}" +
            (f" {'topo/eager':>10}" if graph != "hl-topo" and "hl-topo" in libs else ""))
    print(head)
    print("-" * len(head))
    for name in names:
        res = {lib: {"times": [], "mem": []} for lib in libs}
        margs = argparse.Namespace(**{**vars(args),
                                      "steps": min(args.steps, MOST_STEPS.get(name, args.steps))})
        for _ in range(2):
            for lib in libs:
                r = run_worker(__file__, step_worker_args(lib, name, margs) + _clock(args),
                               f"{name}, {lib}") if lib != "torch-compile" else \
                    _optional(name, lib, margs)
                if r is None:
                    continue
                res[lib]["times"] += r["times"]
                res[lib]["mem"].append(r["mem_mib"])
        t = {lib: statistics.median(v["times"]) for lib, v in res.items() if v["times"]}
        mem = {lib: max(v["mem"]) for lib, v in res.items() if v["mem"]}
        line = f"{MODELS[name][2]:30} " + " ".join(
            f"{t[lib] * 1e3:13.3f}" if lib in t else f"{'failed':>13}" for lib in libs)
        speed = t["hl-eager"] / t[graph]
        vs_torch = f"{t['torch'] / t[graph]:11.2f}" if "torch" in t else f"{'-':>11}"
        line += f" {speed:11.2f} {vs_torch}   {mem['hl-eager']:9.1f} {mem[graph]:7.1f}"
        if graph != "hl-topo" and "hl-topo" in t:
            line += f" {t['hl-eager'] / t['hl-topo']:10.2f}"
        print(line, flush=True)
    print(f"graph/eager: hl eager's step time over graph mode's ({graph}; higher is faster); "
          "graph/torch: PyTorch eager's over graph mode's; hl-graph is graph_alg='sequence', "
          "hl-topo 'topological'")


def _optional(name, lib, args):
    """torch.compile may not work on a machine (no C++ compiler, an unsupported op): then
    its column says so and the rest of the table stands."""
    try:
        return run_worker(__file__, step_worker_args(lib, name, args, max(args.warmup, 3)) +
                          _clock(args), f"{name}, {lib}")
    except SystemExit as e:
        print(f"  ({lib} failed on {name}: {str(e).splitlines()[-1][:120]})")
        return None


def _clock(args):
    return ["--clock", args.clock]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated models: mlp1, cnn, resnet18")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--no-compile", action="store_true", help="leave torch.compile out")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time steps by the wall clock or by the process's CPU time (a "
                         "loaded host; with --threads 1)")
    ap.add_argument("--graph-alg", default="sequence",
                    help="graph mode's plan order: sequence, topological, or both "
                         "(comma-separated; each its own column)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if not {a.strip() for a in args.graph_alg.split(",")} <= set(GRAPH_ALG.values()):
        ap.error(f"--graph-alg: sequence, topological or both, got {args.graph_alg!r}")
    if args.clock == "cpu" and args.threads != 1:
        ap.error("--clock cpu needs --threads 1 (CPU time sums over threads)")
    setup(args.threads)
    if args.worker:
        report(worker(args.worker, args.only, args.steps, args.warmup, args.threads,
                      args.clock))
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
