"""Checkpoint speed: hl's save_states / load_states beside torch.save / torch.load of the same
tensors, in the same run.

    python bench/checkpoint.py            # ResNet-18 (ImageNet size, 11.7M parameters) and
    python bench/checkpoint.py --reps 9   #   the MNIST CNN

Save: hl's figure includes what makes its write durable and atomic (a temporary file, fsync,
rename, fsync of the folder); torch.save does none of that, so PyTorch is shown both as it is
and with an fsync added, and the two ratios are hl's speed over each. Load: hl checks every byte's CRC-32 before loading; torch.load is
timed as it is (it reads the whole file too). Each figure is the median over --reps runs,
the libraries alternating, files in a temporary folder on the same disk.

Memory while saving: each library saves once in a process of its own; the growth of the
peak resident set (VmHWM, reset just before the save) over the size before it, against the
size of the tensors. "One extra copy" would be a ratio of 1.0.
"""
import argparse
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
sys.path.insert(0, HERE)
from _common import report, run_worker  # noqa: E402

MODELS = {"resnet18": ("resnet18_imagenet", (1, 3, 224, 224), "ResNet-18 (ImageNet)"),
          "cnn": ("cnn", (1, 1, 28, 28), "MNIST CNN")}


def hl_module(name):
    import hl
    from train import hl_model
    kind, shape, _ = MODELS[name]
    hl.manual_seed(0)

    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.net = hl_model(kind)

        def forward(self, x):
            return self.net(x)

    m = Net()
    m.compile([hl.Placeholder(shape)], is_train=True)
    return m


def torch_states(module):
    import torch
    return {k: torch.from_numpy(v.numpy().copy()) for k, v in module.get_states().items()}


def fsync(path):
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def memory_worker(lib, name, path):
    from train import _status_kib
    import hl.checkpoint.states  # noqa: F401 - imported before measuring, as torch is
    module = hl_module(name)
    nbytes = sum(t.size * t.dtype.itemsize for t in module.get_states().values())
    if lib == "torch":
        import torch
        sd = torch_states(module)
        del module
        save = lambda: torch.save(sd, path)  # noqa: E731
    else:
        save = lambda: module.save_states(path)  # noqa: E731
    rss0 = _status_kib("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    save()
    return {"extra_mib": (_status_kib("VmHWM") - rss0) / 1024, "tensor_mib": nbytes / 2 ** 20}


def run(args):
    import torch
    folder = tempfile.mkdtemp(dir=args.dir)
    print(f"median of {args.reps} runs; files in {folder}")
    head = (f"{'model':22} {'MB':>6}   {'save MB/s: hl':>13} {'torch':>7} {'torch+fsync':>11} "
            f"{'ratios':>11}   {'load MB/s: hl':>13} {'torch':>7} {'ratio':>6}")
    print(head)
    print("-" * len(head))
    for name in args.only.split(","):
        module = hl_module(name)
        sd = torch_states(module)
        mb = sum(t.size * t.dtype.itemsize for t in module.get_states().values()) / 1e6
        hp, tp = os.path.join(folder, f"{name}.zip"), os.path.join(folder, f"{name}.pt")
        t = {k: [] for k in ("hl_save", "torch_save", "torch_save_fsync", "hl_load",
                             "torch_load")}
        for _ in range(args.reps):
            t0 = time.perf_counter()
            module.save_states(hp)
            t["hl_save"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.save(sd, tp)
            t1 = time.perf_counter()
            fsync(tp)
            t["torch_save"].append(t1 - t0)
            t["torch_save_fsync"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            module.load_states(hp)
            t["hl_load"].append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            torch.load(tp)
            t["torch_load"].append(time.perf_counter() - t0)
        r = {k: mb / statistics.median(v) for k, v in t.items()}
        print(f"{MODELS[name][2]:22} {mb:6.1f}   {r['hl_save']:13.0f} {r['torch_save']:7.0f} "
              f"{r['torch_save_fsync']:11.0f} {r['hl_save'] / r['torch_save']:5.2f} "
              f"{r['hl_save'] / r['torch_save_fsync']:5.2f}   "
              f"{r['hl_load']:13.0f} {r['torch_load']:7.0f} "
              f"{r['hl_load'] / r['torch_load']:6.2f}", flush=True)
    print("\nmemory while saving (peak growth over the tensors' size):")
    for name in args.only.split(","):
        line = f"{MODELS[name][2]:22}"
        for lib in ("hl", "torch"):
            m = run_worker(__file__, ["--worker", lib, "--only", name, "--dir", folder],
                           f"{lib} memory")
            line += (f"   {lib}: +{m['extra_mib']:6.1f} MiB for {m['tensor_mib']:5.1f} MiB of "
                     f"tensors ({m['extra_mib'] / m['tensor_mib']:.2f}x)")
        print(line)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="resnet18,cnn")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--dir", default=None, help="folder for the files (default: the temp dir)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        path = os.path.join(args.dir, f"mem-{args.worker}-{args.only}")
        report(memory_worker(args.worker, args.only, path))
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
