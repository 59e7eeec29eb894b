"""The CUDA backend beside PyTorch CUDA (eager), same model, same batch, same machine.

    python bench/gpu.py                        # on a GPU: sgemm, MNIST CNN, ResNet-18 (CIFAR)
    python bench/gpu.py --only sgemm --steps 50
    python bench/gpu.py --only hgemm,cnn,cnn_amp,resnet18,resnet18_amp   # the AMP speed-up
    HL_CUDA_EMULATE=1 python bench/gpu.py --tiny   # a smoke run on the emulated backend

Items: sgemm and hgemm (hl.matmul on cuda vs torch.matmul on cuda, float32 / float16 N x N,
in GFLOP/s); adam and matmul_gelu, the fused optimiser update and product epilogue; the MNIST
CNN of SINGA's documentation at batch 128 and a CIFAR ResNet-18 at batch 128 (bench/train.py's
models), each step forward, softmax cross-entropy, backward and SGD with momentum. The goal of
issue 23 is hl >= 0.9x PyTorch's speed on the training steps.

Each (library, item) runs in a process of its own, after warm-up steps; a step's time is
measured between device synchronisations (hl.cuda.synchronize / torch.cuda.synchronize), and
the figure is the median over the timed steps. The ratio is PyTorch's step time over hl's
(above 1: hl is faster). PyTorch's column reads n/a where torch has no CUDA device (always
under HL_CUDA_EMULATE=1, whose figures time the host emulation, not a GPU: a smoke test only).
--tiny shrinks every size so the whole script runs in seconds.
"""
import argparse
import statistics
import sys

from _common import report, run_worker, setup, time_steps

ITEMS = {  # name: (description, full size, tiny size)
    "sgemm": ("sgemm float32, N x N", 4096, 64),
    "cnn": ("MNIST CNN training step, batch", 128, 4),
    "resnet18": ("ResNet-18 (CIFAR) training step, batch", 128, 2),
    # mixed precision (docs/amp.md): autocast float16 + GradScaler on both sides; the AMP
    # speed-up is each *_amp row's step time beside its float32 row's
    "hgemm": ("hgemm float16 (float32 sums), N x N", 4096, 64),
    "cnn_amp": ("MNIST CNN training step, autocast float16 + GradScaler, batch", 128, 4),
    "resnet18_amp": ("ResNet-18 (CIFAR) step, autocast float16 + GradScaler, batch", 128, 2),
    # the fused ops (libcore/cuda/optim.cu, fused.cu): an Adam step over 64 tensors of N
    # elements (hl: one optim_update launch per tensor; torch: its default foreach Adam), and
    # a transformer MLP's first product with its bias and GELU (hl: matmul_fused; torch:
    # gelu(linear))
    "adam": ("Adam step, 64 float32 tensors of N elements, N", 1 << 17, 64),
    "matmul_gelu": ("matmul_fused bias + GELU, M x 768 @ 768 x 3072, M", 2048, 16),
}


def _hl_item(name, size):
    import numpy as np
    import hl
    sync = hl.cuda.synchronize
    rng = np.random.default_rng(0)
    if name in ("sgemm", "hgemm"):
        dt = "float32" if name == "sgemm" else "float16"
        a = hl.tensor(rng.standard_normal((size, size)).astype(np.float32), device="cuda")
        b = hl.tensor(rng.standard_normal((size, size)).astype(np.float32), device="cuda")
        a, b = a.astype(dt), b.astype(dt)
        return (lambda: a @ b), sync
    if name == "adam":
        ps = [hl.tensor(rng.standard_normal(size).astype(np.float32), device="cuda")
              for _ in range(64)]
        gs = [hl.tensor(rng.standard_normal(size).astype(np.float32), device="cuda")
              for _ in range(64)]
        opt = hl.opt.Adam(lr=1e-3)

        def adam_step():
            for p, g in zip(ps, gs):
                opt.update(p, g)
            opt.step()
        return adam_step, sync
    if name == "matmul_gelu":
        a = hl.tensor(rng.standard_normal((size, 768)).astype(np.float32), device="cuda")
        w = hl.tensor(rng.standard_normal((768, 3072)).astype(np.float32), device="cuda")
        bias = hl.tensor(rng.standard_normal(3072).astype(np.float32), device="cuda")
        return (lambda: hl.ops.matmul_fused_forward(a, w, bias, act="gelu")), sync
    amp, name = name.endswith("_amp"), name.removesuffix("_amp")
    from train import hl_model
    shape = (1, 28, 28) if name == "cnn" else (3, 32, 32)
    hl.manual_seed(0)
    model = hl_model(name)
    x = hl.tensor(rng.standard_normal((size, *shape)).astype(np.float32), device="cuda")
    y = hl.tensor(rng.integers(0, 10, size).astype(np.int64), device="cuda")
    model.train()
    model.to("cuda")
    model(hl.Placeholder(x.shape, device="cuda"))
    opt = hl.opt.SGD(lr=0.01, momentum=0.9)
    scaler = hl.amp.GradScaler("cuda", enabled=amp)

    def step():
        with hl.amp.autocast("cuda", dtype=hl.float16, enabled=amp):
            loss = hl.losses.softmax_cross_entropy(model(x), y)
        scaler.backward_and_update(opt, loss)
    return step, sync


def _torch_item(name, size):
    import numpy as np
    import torch
    if not torch.cuda.is_available():
        return None, None
    sync = torch.cuda.synchronize
    rng = np.random.default_rng(0)
    if name in ("sgemm", "hgemm"):
        dt = torch.float32 if name == "sgemm" else torch.float16
        a = torch.tensor(rng.standard_normal((size, size)).astype(np.float32), device="cuda")
        b = torch.tensor(rng.standard_normal((size, size)).astype(np.float32), device="cuda")
        a, b = a.to(dt), b.to(dt)
        return (lambda: a @ b), sync
    if name == "adam":
        ps = [torch.tensor(rng.standard_normal(size).astype(np.float32), device="cuda",
                           requires_grad=True) for _ in range(64)]
        for p in ps:
            p.grad = torch.tensor(rng.standard_normal(size).astype(np.float32), device="cuda")
        opt = torch.optim.Adam(ps, lr=1e-3)
        return opt.step, sync
    if name == "matmul_gelu":
        f = torch.nn.functional
        a = torch.tensor(rng.standard_normal((size, 768)).astype(np.float32), device="cuda")
        w = torch.tensor(rng.standard_normal((3072, 768)).astype(np.float32), device="cuda")
        bias = torch.tensor(rng.standard_normal(3072).astype(np.float32), device="cuda")

        def mlp():
            with torch.no_grad():
                return f.gelu(f.linear(a, w, bias))
        return mlp, sync
    amp, name = name.endswith("_amp"), name.removesuffix("_amp")
    from train import torch_model
    shape = (1, 28, 28) if name == "cnn" else (3, 32, 32)
    torch.manual_seed(0)
    model = torch_model(name).cuda().train()
    x = torch.tensor(rng.standard_normal((size, *shape)).astype(np.float32), device="cuda")
    y = torch.tensor(rng.integers(0, 10, size).astype(np.int64), device="cuda")
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = torch.nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda", enabled=amp)

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.float16, enabled=amp):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    return step, sync


def worker(lib, name, size, steps, warmup):
    step, sync = (_hl_item if lib == "hl" else _torch_item)(name, size)
    if step is None:
        report({"median": None, "device": None})
        return

    def synced():
        step()
        sync()
    times = time_steps(synced, steps, warmup)
    if lib == "hl":
        import hl
        device = ("hl CUDA emulation on the host CPU" if hl.cuda.is_emulated() else
                  _gpu_name())
    else:
        import torch
        device = torch.cuda.get_device_name(0)
    report({"median": statistics.median(times), "device": device})


def _gpu_name():
    import subprocess
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip()
        return out.splitlines()[0] if out else "unknown GPU"
    except (OSError, subprocess.SubprocessError):
        return "unknown GPU"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default=",".join(ITEMS))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--tiny", action="store_true", help="tiny sizes: a smoke run")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    ap.add_argument("--size", type=int, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(args.worker[0], args.worker[1], args.size, args.steps, args.warmup)
        return
    print(f"{'item':44s} {'hl':>12s} {'PyTorch':>12s} {'ratio':>7s}")
    devices = set()
    for name in args.only.split(","):
        desc, full, tiny = ITEMS[name]
        size = tiny if args.tiny else full
        res = {lib: run_worker(__file__, ["--worker", lib, name, "--size", size, "--steps",
                                          args.steps, "--warmup", args.warmup], f"{lib} {name}")
               for lib in ("hl", "torch")}
        devices |= {f"{lib}: {r['device']}" for lib, r in res.items() if r["device"]}
        h, t = res["hl"]["median"], res["torch"]["median"]
        if name in ("sgemm", "hgemm"):
            flops = 2 * size ** 3
            fmt = lambda s: f"{flops / s / 1e9:9.1f} GF/s" if s else "n/a"  # noqa: E731
        else:
            fmt = lambda s: f"{s * 1e3:9.2f} ms" if s else "n/a"  # noqa: E731
        ratio = f"{t / h:6.2f}x" if h and t else "n/a"
        print(f"{desc + ' ' + str(size):44s} {fmt(h):>12s} {fmt(t):>12s} {ratio:>7s}")
    print("devices: " + "; ".join(sorted(devices)))


if __name__ == "__main__":
    setup(None)
    sys.exit(main())
