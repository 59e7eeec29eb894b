"""Convolution benchmark: hl against PyTorch CPU on the layers of two reference networks.

For each layer, the median time of the forward pass and of forward + backward (gradient with
respect to the input and to the weight) for hl and for torch.nn.functional.conv2d with
autograd, from the same run, with the ratio hl / torch. Both use hl.get_num_threads() threads.

    python bench/conv.py [--repeat 20] [--layer mnist1|mnist2|resnet]

hl and PyTorch are timed in separate processes, started one after the other, twice each and
alternating (hl, torch, hl, torch): in one process each library's idle OpenMP threads spin
for a while after a call and steal the cores from the other, which skewed the figures.
The numbers are only as quiet as the machine: on a shared host run it more than once.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))
import hl  # noqa: E402  (the checkout's hl, also when run as a script)

LAYERS = {
    # name: (N, C_in, H, W, C_out, k, stride, pad)
    "mnist1": (64, 1, 28, 28, 20, 5, 1, 0),     # MNIST CNN conv1
    "mnist2": (64, 20, 12, 12, 50, 5, 1, 0),    # MNIST CNN conv2 (after 2x2 pooling)
    "resnet": (32, 64, 32, 32, 64, 3, 1, 1),    # ResNet 3x3 block conv
}


def sample_times(fns, repeat, rounds=5, warmup=2):
    """Times of each function in fns (a dict), run in alternating blocks so that both sides
    see the same background load: rounds blocks of repeat / rounds calls each."""
    times = {k: [] for k in fns}
    per = max(1, repeat // rounds)
    for _ in range(rounds):
        for k, fn in fns.items():
            for _ in range(warmup):
                fn()
            for _ in range(per):
                t0 = time.perf_counter()
                fn()
                times[k].append(time.perf_counter() - t0)
    return times


def bench_layer(name, repeat, torch, side):
    n, c, h, w, co, k, s, p = LAYERS[name]
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wa = rng.standard_normal((co, c, k, k), dtype=np.float32) * 0.1
    ba = rng.standard_normal(co, dtype=np.float32)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    dya = rng.standard_normal((n, co, oh, ow), dtype=np.float32)

    x, wt, b, dy = hl.tensor(xa), hl.tensor(wa), hl.tensor(ba), hl.tensor(dya)

    def hl_fwd():
        hl.ops.conv2d_forward(x, wt, b, stride=s, padding=p)

    def hl_fwd_bwd():
        hl.ops.conv2d_forward(x, wt, b, stride=s, padding=p)
        hl.ops.conv2d_grad_input(dy, wt, xa.shape, stride=s, padding=p)
        hl.ops.conv2d_grad_weight(dy, x, wa.shape, stride=s, padding=p)

    fns = {"hl_fwd": hl_fwd, "hl_fb": hl_fwd_bwd} if side == "hl" else {}
    if torch is not None and side == "torch":
        F = torch.nn.functional
        tx = torch.from_numpy(xa).requires_grad_(True)
        tw = torch.from_numpy(wa).requires_grad_(True)
        tb = torch.from_numpy(ba).requires_grad_(True)
        tdy = torch.from_numpy(dya)

        def t_fwd():
            with torch.no_grad():
                F.conv2d(tx, tw, tb, stride=s, padding=p)

        def t_fwd_bwd():
            tx.grad = tw.grad = tb.grad = None
            F.conv2d(tx, tw, tb, stride=s, padding=p).backward(tdy)

        fns.update(t_fwd=t_fwd, t_fb=t_fwd_bwd)
    return sample_times(fns, repeat)


def run_side(side, args):
    """Times one library's side of every layer in this process: {layer: {key: [seconds]}}."""
    torch = None
    if side == "torch":
        import torch
        torch.set_num_threads(hl.get_num_threads())
    return {name: bench_layer(name, args.repeat, torch, side) for name in args.layer or LAYERS}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--layer", choices=sorted(LAYERS), action="append")
    ap.add_argument("--side", choices=("hl", "torch"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:  # a worker: time one library, hand the samples back as JSON
        print("RESULTS " + json.dumps(run_side(args.side, args)))
        return
    try:
        import torch  # noqa: F401  only to know whether the torch side can run
        sides = ("hl", "torch")
    except ImportError:
        sides = ("hl",)
    t = {name: {} for name in args.layer or LAYERS}
    for _ in range(2):
        for side in sides:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *sys.argv[1:],
                                  "--side", side], capture_output=True, text=True,
                                 check=True).stdout
            for name, times in json.loads(out.split("RESULTS ", 1)[1]).items():
                for key, v in times.items():
                    t[name].setdefault(key, []).extend(v)
    has_torch = "torch" in sides
    print(f"threads: {hl.get_num_threads()}   calls per figure: {2 * args.repeat}   times in "
          f"ms, median (and minimum)")
    print(f"{'layer':27s} {'pass':5s} {'hl':>15s} {'torch':>15s} {'hl/torch':>14s}")
    for name in args.layer or LAYERS:
        n, c, h, w, co, k, s, p = LAYERS[name]
        label = f"{name} {n}x{c}x{h}x{w}->{co} k{k}"
        for key, what in (("fwd", "fwd"), ("fb", "f+b")):
            tl = t[name]
            h_med, h_min = statistics.median(tl["hl_" + key]) * 1e3, min(tl["hl_" + key]) * 1e3
            line = f"{label:27s} {what:5s} {h_med:8.2f} ({h_min:5.2f})"
            if has_torch:
                t_med, t_min = statistics.median(tl["t_" + key]) * 1e3, min(tl["t_" + key]) * 1e3
                line += f" {t_med:8.2f} ({t_min:5.2f}) {h_med / t_med:6.2f} ({h_min / t_min:4.2f})"
            print(line)


if __name__ == "__main__":
    main()
