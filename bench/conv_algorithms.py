"""What choosing a convolution algorithm per layer could save a ResNet-18 training step: every
convolution of the CIFAR ResNet-18 (bench/train.py's, batch 32) timed by each algorithm
libcore has for it, forward, grad_input and grad_weight, beside the algorithm hl picks today.

    python bench/conv_algorithms.py [--rounds 5] [--threads 1] [--batch 32]

This is the measurement behind graph mode's (missing) plan-time algorithm choice (cuDNN's
benchmark mode; docs/design-notes.md, "Graph mode and convolution algorithms"): a plan could
time the candidates once per record and keep the fastest, and the "oracle" line says the most
that could save, per step, over the heuristics eager and graph mode share today.

Candidates (the switches are libcore's own, read on every call):
  default       what hl_cpu_conv* choose (Winograd F(2x2, 3x3) for 3x3 stride-1 layers with
                16+ channels, else im2col + OpenBLAS; the stem and strided layers im2col)
  im2col        HL_WINOGRAD=0: im2col (col2im) + OpenBLAS everywhere
  winograd      HL_WINOGRAD=1: Winograd wherever it fits, however few tiles (forward)
  packed        conv_pack's panels + the packed product (phases / gathered columns for strided
                layers; HL_CONV_PACKED=1 forces it over Winograd), the pack counted: a
                training step's weights change, so a plan would pack them once per step
  wino-packed   kernels transformed once (conv_pack 'winograd') + the packed Winograd
                product, the transform counted (as packed)
Times are the process's CPU time (one thread: the time of the work, not of the wait for a
core on a loaded host), the median of --rounds rounds that alternate the candidates.
"""
import argparse
import os
import statistics
import time

import _common

# (C_in, H, C_out, kernel, stride, pad, how many in the network): bench/train.py's CIFAR
# ResNet-18 (3x3 stem, basic blocks [2, 2, 2, 2], 1x1 stride-2 downsample shortcuts).
LAYERS = [
    (3, 32, 64, 3, 1, 1, 1),
    (64, 32, 64, 3, 1, 1, 4),
    (64, 32, 128, 3, 2, 1, 1),
    (64, 32, 128, 1, 2, 0, 1),
    (128, 16, 128, 3, 1, 1, 3),
    (128, 16, 256, 3, 2, 1, 1),
    (128, 16, 256, 1, 2, 0, 1),
    (256, 8, 256, 3, 1, 1, 3),
    (256, 8, 512, 3, 2, 1, 1),
    (256, 8, 512, 1, 2, 0, 1),
    (512, 4, 512, 3, 1, 1, 3),
]
ENV = ("HL_WINOGRAD", "HL_CONV_PACKED")


def with_env(fn, **env):
    """fn run with libcore's algorithm switches set as env says (the others unset)."""
    def run():
        for k in ENV:
            os.environ.pop(k, None)
        os.environ.update(env)
        try:
            return fn()
        finally:
            for k in ENV:
                os.environ.pop(k, None)
    return run


def candidates(batch, layer):
    """{pass: {candidate: fn}} for one layer: the candidates that apply to it."""
    import numpy as np
    import hl
    from hl import ops
    ci, h, co, k, s, p, _ = layer
    oh = (h + 2 * p - k) // s + 1
    rng = np.random.default_rng(0)
    x = hl.tensor(rng.standard_normal((batch, ci, h, h), dtype=np.float32))
    w = hl.tensor(rng.standard_normal((co, ci, k, k), dtype=np.float32) * (2 / (ci * k * k)) ** .5)
    dy = hl.tensor(rng.standard_normal((batch, co, oh, oh), dtype=np.float32))
    winograd_fits = k == 3 and s == 1 and ci >= 16 and co >= 16
    fwd = lambda: ops.conv2d_forward(x, w, stride=s, padding=p)  # noqa: E731
    gi = lambda: ops.conv2d_grad_input(dy, w, (batch, ci, h, h), stride=s, padding=p)  # noqa
    gw = lambda: ops.conv2d_grad_weight(dy, x, (co, ci, k, k), stride=s, padding=p)  # noqa

    def packed(layout):
        return lambda: ops.conv_fused_forward(x, w, stride=s, padding=p,
                                              packed=ops.conv_pack(w, layout=layout))
    out = {"forward": {"default": fwd, "im2col": with_env(fwd, HL_WINOGRAD="0"),
                       "packed": with_env(packed("panels"), HL_CONV_PACKED="1")},
           "grad_input": {"default": gi, "im2col": with_env(gi, HL_WINOGRAD="0")},
           "grad_weight": {"default": gw, "im2col": with_env(gw, HL_WINOGRAD="0")}}
    if winograd_fits:
        out["forward"]["winograd"] = with_env(fwd, HL_WINOGRAD="1")
        out["forward"]["wino-packed"] = packed("winograd")
    return out


def time_all(fns, rounds):
    """Median CPU seconds of each fn, the fns alternating round by round."""
    times = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm-up: scratch memory, pages
    for _ in range(rounds):
        for name, fn in fns.items():
            t0 = time.process_time()
            fn()
            times[name].append(time.process_time() - t0)
    return {name: statistics.median(v) for name, v in times.items()}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args()
    _common.setup(args.threads)
    import hl
    from graph_overhead import _cpu
    hl.set_num_threads(args.threads)
    print(f"CPU: {_cpu()}, load average {os.getloadavg()[0]:.1f}, threads {args.threads}, "
          f"batch {args.batch}, CPU ms per call (median of {args.rounds} rounds)")
    passes = ("forward", "grad_input", "grad_weight")
    totals = {p: [0.0, 0.0] for p in passes}  # default, best
    for layer in LAYERS:
        ci, h, co, k, s, _, count = layer
        name = f"{ci}x{h}x{h} -> {co}, {k}x{k}/{s} (x{count})"
        for ps, fns in candidates(args.batch, layer).items():
            t = time_all(fns, args.rounds)
            best = min(t, key=t.get)
            totals[ps][0] += count * t["default"]
            totals[ps][1] += count * t[best]
            cells = "  ".join(f"{c} {v * 1e3:7.2f}" for c, v in t.items())
            print(f"{name:30} {ps:11} {cells}   best: {best} "
                  f"({t['default'] / t[best]:.2f}x)", flush=True)
    d = sum(v[0] for v in totals.values())
    b = sum(v[1] for v in totals.values())
    for ps, (dv, bv) in totals.items():
        print(f"{ps:11} per step: default {dv * 1e3:8.1f} ms, best per layer {bv * 1e3:8.1f} ms")
    print(f"all convolutions of a step: default {d * 1e3:.1f} ms, best per layer "
          f"{b * 1e3:.1f} ms: the oracle choice saves {(d - b) * 1e3:.1f} ms "
          f"({(d - b) / d * 100:.1f}% of the convolutions)")


if __name__ == "__main__":
    main()
