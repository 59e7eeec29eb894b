"""Convolution benchmark: hl against PyTorch CPU on the layers of two reference networks.

For each layer, the median time of the forward pass and of forward + backward (gradient with
respect to the input and to the weight) for hl and for torch.nn.functional.conv2d with
autograd, from the same run, with the ratio hl / torch. Both use hl.get_num_threads() threads.

    python bench/conv.py [--repeat 20] [--layer mnist1|mnist2|resnet]

The numbers are only as quiet as the machine: on a shared host run it more than once.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
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


def bench_layer(name, repeat, torch):
    n, c, h, w, co, k, s, p = LAYERS[name]
    rng = np.random.default_rng(0)
    xa = rng.standard_normal((n, c, h, w), dtype=np.float32)
    wa = rng.standard_normal((co, c, k, k), dtype=np.float32) * 0.1
    ba = rng.standard_normal(co, dtype=np.float32)
    oh, ow = (h + 2 * p - k) // s + 1, (w + 2 * p - k) // s + 1
    dya = rng.standard_normal((n, co, oh, ow), dtype=np.float32)

    x, wt, b, dy = hl.tensor(xa), hl.tensor(wa), hl.tensor(ba), hl.tensor(dya)

    def hl_fwd():
        hl.ops.conv2d(x, wt, b, stride=s, padding=p)

    def hl_fwd_bwd():
        hl.ops.conv2d(x, wt, b, stride=s, padding=p)
        hl.ops.conv2d_grad_input(dy, wt, xa.shape, stride=s, padding=p)
        hl.ops.conv2d_grad_weight(dy, x, wa.shape, stride=s, padding=p)

    fns = {"hl_fwd": hl_fwd, "hl_fb": hl_fwd_bwd}
    if torch is not None:
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


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--layer", choices=sorted(LAYERS), action="append")
    args = ap.parse_args()
    try:
        import torch
        torch.set_num_threads(hl.get_num_threads())
    except ImportError:
        torch = None
    print(f"threads: {hl.get_num_threads()}   calls per figure: {args.repeat}   times in ms, "
          f"median (and minimum)")
    print(f"{'layer':27s} {'pass':5s} {'hl':>15s} {'torch':>15s} {'hl/torch':>14s}")
    for name in args.layer or LAYERS:
        n, c, h, w, co, k, s, p = LAYERS[name]
        t = bench_layer(name, args.repeat, torch)
        label = f"{name} {n}x{c}x{h}x{w}->{co} k{k}"
        for key, what in (("fwd", "fwd"), ("fb", "f+b")):
            h_med, h_min = statistics.median(t["hl_" + key]) * 1e3, min(t["hl_" + key]) * 1e3
            line = f"{label:27s} {what:5s} {h_med:8.2f} ({h_min:5.2f})"
            if torch is not None:
                t_med, t_min = statistics.median(t["t_" + key]) * 1e3, min(t["t_" + key]) * 1e3
                line += f" {t_med:8.2f} ({t_min:5.2f}) {h_med / t_med:6.2f} ({h_min / t_min:4.2f})"
            print(line)


if __name__ == "__main__":
    main()
