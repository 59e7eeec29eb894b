"""Kernel launches and cuBLAS calls per training step on the emulated CUDA backend: the models
and step of bench/gpu.py (forward, softmax cross-entropy, backward, SGD with momentum, eager),
counted with the emulation's hooks after one warm-up step. Launch counts are what a GPU would
be given; the time printed is the host emulation's, not a GPU's.

    HL_CUDA_EMULATE=1 python bench/cuda_launches.py --model resnet18 --batch 128
    HL_CUDA_EMULATE=1 python bench/cuda_launches.py --model cnn --batch 128 --amp
"""
import argparse
import ctypes
import sys
import time

sys.path.insert(0, __file__.rsplit("/", 1)[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="resnet18", choices=["cnn", "resnet18"])
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--amp", action="store_true")
    args = ap.parse_args()
    import numpy as np
    import hl
    from hl import _cuda_libs
    if not hl.cuda.is_emulated():
        sys.exit("run with HL_CUDA_EMULATE=1: the counts come from the emulation's hooks")
    lib = ctypes.CDLL(_cuda_libs.library_path())
    gemms = getattr(lib, "hl_cuda_emu_gemm_count", None)  # older builds lack it
    from train import hl_model
    rng = np.random.default_rng(0)
    shape = (1, 28, 28) if args.model == "cnn" else (3, 32, 32)
    hl.manual_seed(0)
    model = hl_model(args.model)
    x = hl.tensor(rng.standard_normal((args.batch, *shape)).astype(np.float32), device="cuda")
    y = hl.tensor(rng.integers(0, 10, args.batch).astype(np.int64), device="cuda")
    model.train()
    model.to("cuda")
    model(hl.Placeholder(x.shape, device="cuda"))
    opt = hl.opt.SGD(lr=0.01, momentum=0.9)
    scaler = hl.amp.GradScaler("cuda", enabled=args.amp)

    def step():
        with hl.amp.autocast("cuda", dtype=hl.float16, enabled=args.amp):
            loss = hl.losses.softmax_cross_entropy(model(x), y)
        scaler.backward_and_update(opt, loss)
        hl.cuda.synchronize()

    step()
    k0, g0, t0 = lib.hl_cuda_emu_launch_count(), gemms() if gemms else 0, time.perf_counter()
    step()
    kernels = lib.hl_cuda_emu_launch_count() - k0
    blas = gemms() - g0 if gemms else None
    print(f"{args.model} batch {args.batch}{' amp' if args.amp else ''}: {kernels} kernel "
          f"launches, {blas if blas is not None else 'n/a'} cuBLAS calls per step "
          f"(emulated step {time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
