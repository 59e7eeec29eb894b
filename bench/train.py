"""Training throughput: hl beside PyTorch CPU, same model, same batch, same run.

    python bench/train.py                       # every model
    python bench/train.py --only cnn,resnet18   # some of them
    python bench/train.py --steps 30 --threads 2

Models: the MNIST CNN of SINGA's documentation at batch 64; an MLP 784-512-512-10 at batch
64 and at batch 1 (per-step latency, i.e. the framework's overhead per op); a CIFAR-size
ResNet-18 (3x3 stem, no max-pool, basic blocks [2, 2, 2, 2]) at batch 32. Each step is
forward, softmax cross-entropy, backward and an SGD-with-momentum update on random data.

Each (library, model) pair runs in a process of its own (another library's idle threads would
otherwise steal the cores), twice round the libraries; the figure is the median step time
over both processes' timed steps, after warm-up steps. Memory: the growth of the process's
peak resident set (VmHWM, reset before the first step) over its size before training, which
counts activations, gradients, optimiser slots and allocator caches alike for both libraries.
"""
import argparse
import statistics
import sys

from _common import report, run_worker, setup, step_worker_args, time_steps

MODELS = {  # name: (batch, input shape, description)
    "cnn": (64, (1, 28, 28), "MNIST CNN, batch 64"),
    "mlp64": (64, (784,), "MLP 784-512-512-10, batch 64"),
    "mlp1": (1, (784,), "MLP 784-512-512-10, batch 1"),
    "resnet18": (32, (3, 32, 32), "ResNet-18 (CIFAR), batch 32"),
}


# ---- hl models --------------------------------------------------------------------------

def hl_model(name):
    import hl
    from hl import layers as L

    if name == "cnn":
        return L.Sequential(L.Conv2d(20, 5), L.ReLU(), L.MaxPool2d(2, 2), L.Conv2d(50, 5),
                            L.ReLU(), L.MaxPool2d(2, 2), L.Flatten(), L.Linear(500), L.ReLU(),
                            L.Linear(10))
    if name.startswith("mlp"):
        return L.Sequential(L.Linear(512), L.ReLU(), L.Linear(512), L.ReLU(), L.Linear(10))

    class Block(hl.layers.Layer):
        def __init__(self, out, stride):
            super().__init__()
            self.conv1 = L.Conv2d(out, 3, stride=stride, padding=1, bias=False)
            self.bn1 = L.BatchNorm2d()
            self.conv2 = L.Conv2d(out, 3, padding=1, bias=False)
            self.bn2 = L.BatchNorm2d()
            self.stride, self.out = stride, out
            self.short = None

        def initialize(self, x):
            if self.stride != 1 or x.shape[1] != self.out:
                self.short = L.Sequential(L.Conv2d(self.out, 1, stride=self.stride, bias=False),
                                          L.BatchNorm2d())

        def forward(self, x):
            y = self.bn1(self.conv1(x)).relu()
            y = self.bn2(self.conv2(y))
            s = self.short(x) if self.short is not None else x
            return (y + s).relu()

    blocks = []
    for out, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                        (512, 1)]:
        blocks.append(Block(out, stride))
    if name == "resnet18_imagenet":  # 7x7 stride-2 stem, max-pool, 1000 classes (11.7M params)
        return L.Sequential(L.Conv2d(64, 7, stride=2, padding=3, bias=False), L.BatchNorm2d(),
                            L.ReLU(), L.MaxPool2d(3, 2, padding=1), *blocks,
                            L.GlobalAvgPool2d(), L.Flatten(), L.Linear(1000))
    return L.Sequential(L.Conv2d(64, 3, padding=1, bias=False), L.BatchNorm2d(), L.ReLU(),
                        *blocks, L.GlobalAvgPool2d(), L.Flatten(), L.Linear(10))


def hl_step_fn(name, batch, shape):
    import numpy as np
    import hl
    hl.manual_seed(0)
    model = hl_model(name)
    rng = np.random.default_rng(0)
    x = hl.tensor(rng.standard_normal((batch, *shape)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 10, batch).astype(np.int64))
    model.train()
    model(hl.Placeholder(x.shape))  # creates the parameters, computes nothing
    opt = hl.opt.SGD(lr=0.01, momentum=0.9)

    def step():
        loss = hl.losses.softmax_cross_entropy(model(x), y)
        opt.backward_and_update(loss)
        return loss
    return step


# ---- PyTorch models ---------------------------------------------------------------------

def torch_model(name):
    import torch.nn as nn

    if name == "cnn":
        return nn.Sequential(nn.Conv2d(1, 20, 5), nn.ReLU(), nn.MaxPool2d(2, 2),
                             nn.Conv2d(20, 50, 5), nn.ReLU(), nn.MaxPool2d(2, 2), nn.Flatten(),
                             nn.Linear(800, 500), nn.ReLU(), nn.Linear(500, 10))
    if name.startswith("mlp"):
        return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                             nn.Linear(512, 10))

    class Block(nn.Module):
        def __init__(self, cin, out, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(cin, out, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(out)
            self.conv2 = nn.Conv2d(out, out, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(out)
            self.short = None
            if stride != 1 or cin != out:
                self.short = nn.Sequential(nn.Conv2d(cin, out, 1, stride, bias=False),
                                           nn.BatchNorm2d(out))

        def forward(self, x):
            y = self.bn1(self.conv1(x)).relu()
            y = self.bn2(self.conv2(y))
            s = self.short(x) if self.short is not None else x
            return (y + s).relu()

    blocks, cin = [], 64
    for out, stride in [(64, 1), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2),
                        (512, 1)]:
        blocks.append(Block(cin, out, stride))
        cin = out
    return nn.Sequential(nn.Conv2d(3, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                         *blocks, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10))


def torch_step_fn(name, batch, shape, compiled=False):
    """PyTorch's training step; compiled: through torch.compile (bench/graph.py)."""
    import numpy as np
    import torch
    torch.manual_seed(0)
    model = torch_model(name)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.standard_normal((batch, *shape)).astype(np.float32))
    y = torch.tensor(rng.integers(0, 10, batch).astype(np.int64))
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return torch.compile(step) if compiled else step


# ---- measuring --------------------------------------------------------------------------

def _status_kib(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def worker(lib, name, steps, warmup, threads):
    if lib == "hl":
        import hl
        if threads:
            hl.set_num_threads(threads)
        make = hl_step_fn
    else:
        import torch
        if threads:
            torch.set_num_threads(threads)
        make = torch_step_fn
    batch, shape, _ = MODELS[name]
    return measure(make(name, batch, shape), steps, warmup)


def measure(step, steps, warmup, clock="wall"):
    """The step times (by the clock of _common.time_steps) and the growth of the peak
    resident set while stepping."""
    rss0 = _status_kib("VmRSS")
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # resets VmHWM, the peak resident set, to the current size
    except OSError:
        pass
    times = time_steps(step, steps, warmup, clock)
    peak = _status_kib("VmHWM")
    return {"times": times, "mem_mib": (peak - rss0) / 1024.0}


def run(args):
    libs = ["hl"]
    try:
        import torch  # noqa: F401
        libs.append("torch")
    except Exception:  # noqa: BLE001 - without torch, hl's figures alone
        print("torch is not importable: hl's figures only")
    names = [n.strip() for n in args.only.split(",")] if args.only else list(MODELS)
    print(f"threads: {args.threads or 'default'}   timed steps per process: {args.steps} "
          f"(after {args.warmup} warm-up), two processes per library; median step time")
    head = (f"{'model':32} {'hl samples/s':>13} {'torch':>9} {'hl/torch':>9}   "
            f"{'hl ms/step':>10} {'torch':>8}   {'hl MiB':>7} {'torch':>7}")
    print(head)
    print("-" * len(head))
    for name in names:
        res = {lib: {"times": [], "mem": []} for lib in libs}
        for _ in range(2):
            for lib in libs:
                r = run_worker(__file__, step_worker_args(lib, name, args), f"{name}, {lib}")
                res[lib]["times"] += r["times"]
                res[lib]["mem"].append(r["mem_mib"])
        batch = MODELS[name][0]
        t = {lib: statistics.median(res[lib]["times"]) for lib in libs}
        mem = {lib: max(res[lib]["mem"]) for lib in libs}
        sps = {lib: batch / t[lib] for lib in libs}
        line = f"{MODELS[name][2]:32} {sps['hl']:13.1f}"
        if "torch" in libs:
            line += f" {sps['torch']:9.1f} {sps['hl'] / sps['torch']:9.2f}"
        else:
            line += f" {'-':>9} {'-':>9}"
        line += f"   {t['hl'] * 1e3:10.2f}"
        line += f" {t['torch'] * 1e3:8.2f}" if "torch" in libs else f" {'-':>8}"
        line += f"   {mem['hl']:7.1f}"
        line += f" {mem['torch']:7.1f}" if "torch" in libs else f" {'-':>7}"
        print(line, flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated models: " + ", ".join(MODELS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    setup(args.threads)
    if args.worker:
        r = worker(args.worker, args.only, args.steps, args.warmup, args.threads)
        report(r)
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
