"""What dynamic loss scaling costs per training step, eagerly and in graph mode (issue 23):
an MLP (64-256-256-10, batch 64, momentum SGD) on the CPU under bfloat16 autocast, its step
with a plain update and with hl.amp.GradScaler (scale, unscale, inf check, update, scale
update), in hl eagerly, in hl's graph mode (the scaler recorded on the device: the one-pass
update reads the skip flag, or, with ``guard``, every written tensor copied and selected
back, the path of devices whose kernel does not read the flag), and in PyTorch eagerly with
torch.amp.GradScaler (the peer). Each line: the median step time of each variant, each in a
process of its own, and the scaled/plain ratio.

    python bench/amp_scaling.py --steps 30 --threads 1 --clock cpu
"""
import argparse
import statistics
import sys

from _common import report, run_worker, setup, time_steps

BATCH, SIZES = 64, (64, 256, 256, 10)
VARIANTS = {"hl eager": ("hl", False), "hl graph": ("hl", True),
            "hl graph guard": ("hl", True), "torch eager": ("torch", False)}


def _hl_step(graph, scaled, guard):
    import numpy as np

    import hl
    from hl import layers as L
    from hl.amp import recorded
    from hl.autograd import functional as F
    if guard:  # every update guarded by copy and select, as on a device without the flag
        recorded.ops = _NoFusedSkip(recorded.ops)
    scaler = hl.amp.GradScaler("cpu", enabled=scaled)

    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = [L.Linear(n) for n in SIZES[1:]]
            for k, layer in enumerate(self.fc):
                setattr(self, f"fc{k}", layer)

        def forward(self, x):
            for layer in self.fc[:-1]:
                x = F.relu(layer(x))
            return self.fc[-1](x)

        def train_one_batch(self, x, y):
            with hl.amp.autocast("cpu", dtype=hl.bfloat16):
                loss = F.softmax_cross_entropy(self.forward(x), y)
            scaler.backward_and_update(self.optim, loss)
            return loss

    rng = np.random.default_rng(0)
    x = hl.tensor(rng.standard_normal((BATCH, SIZES[0])).astype(np.float32))
    y = hl.tensor(rng.integers(0, SIZES[-1], BATCH))
    model = Net()
    model.optim = hl.opt.SGD(lr=0.01, momentum=0.9)
    model.compile([x], is_train=True, use_graph=graph)
    return lambda: model.train_one_batch(x, y)


class _NoFusedSkip:
    """hl.ops as recorded.py sees it, with no parameter predicted to read the skip flag."""

    def __init__(self, ops):
        self._ops = ops

    def optim_update_available(self, *a, **k):
        return False

    def __getattr__(self, name):
        return getattr(self._ops, name)


def _torch_step(scaled):
    import torch
    torch.manual_seed(0)
    layers = []
    for a, b in zip(SIZES, SIZES[1:]):
        layers += [torch.nn.Linear(a, b), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cpu", enabled=scaled)
    x, y = torch.randn(BATCH, SIZES[0]), torch.randint(0, SIZES[-1], (BATCH,))

    def step():
        with torch.autocast("cpu", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(model(x).float(), y)
        opt.zero_grad()
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        return loss
    return step


def worker(variant, scaled, steps, warmup, threads, clock):
    lib, graph = VARIANTS[variant]
    if lib == "hl":
        import hl
        hl.set_num_threads(threads)
        step = _hl_step(graph, scaled, variant.endswith("guard"))
    else:
        import torch
        torch.set_num_threads(threads)
        step = _torch_step(scaled)
    report({"median": statistics.median(time_steps(step, steps, warmup, clock))})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args()
    setup(args.threads)
    if args.worker:
        worker(args.worker[0], args.worker[1] == "1", args.steps, args.warmup, args.threads,
               args.clock)
        return
    import os
    import platform
    print(f"CPU: {platform.processor() or platform.machine()}, threads {args.threads}, "
          f"{args.clock} clock, median of {args.steps} steps, load {os.getloadavg()[0]:.1f}")
    print(f"{'MLP 64-256-256-10 b64 bf16':28s} {'plain':>9s} {'scaled':>9s} {'ratio':>6s}")
    for variant in VARIANTS:
        t = [run_worker(__file__, ["--worker", variant, int(scaled), "--steps", args.steps,
                                   "--warmup", args.warmup, "--threads", args.threads,
                                   "--clock", args.clock], f"{variant} {scaled}")["median"]
             for scaled in (False, True)]
        print(f"{variant:28s} {t[0] * 1e3:7.3f}ms {t[1] * 1e3:7.3f}ms {t[1] / t[0]:5.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
