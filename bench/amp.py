"""Mixed precision on the CPU: what bfloat16 autocast costs against float32, in hl and in
PyTorch (the peer), same model, same batch, same run.

    python bench/amp.py                           # mlp64 and cnn, 1 thread
    python bench/amp.py --only mlp64 --steps 30 --threads 2

hl's CPU has no bfloat16 arithmetic: autocast("cpu", bfloat16) computes in float32 on
bfloat16-rounded operands (docs/amp.md), so it can only cost time (the casts); PyTorch's CPU
autocast runs bfloat16 kernels (oneDNN), which pay off only where the CPU has bfloat16
instructions (AVX512-BF16 / AMX). Each line: float32 and bfloat16-autocast step times (median
of --steps, after warm-up), and their ratio (autocast over float32: above 1 is slower), for
hl and for PyTorch, each (library, model, mode) timed in a process of its own. The GPU's
AMP speed-up is bench/gpu.py's *_amp rows.
"""
import argparse
import statistics
import sys

from _common import report, run_worker, setup, time_steps

MODES = ("float32", "bfloat16")


def _hl_step(name, amp):
    import hl
    from train import MODELS, hl_step_fn
    batch, shape, _ = MODELS[name]
    step = hl_step_fn(name, batch, shape)

    def run():
        with hl.amp.autocast("cpu", dtype=hl.bfloat16, enabled=amp):
            return step()
    return run


def _torch_step(name, amp):
    import torch
    from train import MODELS, torch_step_fn
    batch, shape, _ = MODELS[name]
    step = torch_step_fn(name, batch, shape)

    def run():
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            return step()
    return run


def worker(lib, name, mode, steps, warmup, threads):
    if lib == "hl":
        import hl
        hl.set_num_threads(threads)  # hl's own pool does not read OMP_NUM_THREADS
    else:
        import torch
        torch.set_num_threads(threads)
    step = (_hl_step if lib == "hl" else _torch_step)(name, mode == "bfloat16")
    report({"median": statistics.median(time_steps(step, steps, warmup))})


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="mlp64,cnn")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args()
    setup(args.threads)
    if args.worker:
        worker(*args.worker, args.steps, args.warmup, args.threads)
        return
    import platform
    from train import MODELS
    print(f"CPU: {platform.processor() or platform.machine()}, threads {args.threads}, "
          f"median of {args.steps} steps")
    print(f"{'model':34s} {'hl f32':>9s} {'hl bf16':>9s} {'ratio':>6s} "
          f"{'torch f32':>9s} {'torch bf16':>10s} {'ratio':>6s}")
    for name in args.only.split(","):
        t = {(lib, mode): run_worker(__file__, ["--worker", lib, name, mode, "--steps",
                                                args.steps, "--warmup", args.warmup,
                                                "--threads", args.threads],
                                     f"{lib} {name} {mode}")["median"]
             for lib in ("hl", "torch") for mode in MODES}
        ms = lambda s: f"{s * 1e3:7.2f}ms"  # noqa: E731
        print(f"{MODELS[name][2]:34s} {ms(t['hl', 'float32']):>9s} {ms(t['hl', 'bfloat16']):>9s} "
              f"{t['hl', 'bfloat16'] / t['hl', 'float32']:5.2f}x "
              f"{ms(t['torch', 'float32']):>9s} {ms(t['torch', 'bfloat16']):>10s} "
              f"{t['torch', 'bfloat16'] / t['torch', 'float32']:5.2f}x")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
