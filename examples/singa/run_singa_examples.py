"""Runs Apache SINGA's own example programs on hl, with only their imports changed.

    python examples/singa/run_singa_examples.py /path/to/singa-checkout \
        [--models cnn mlp] [--epochs 3] [--batch 32] [--graph both] [--verbosity 1]
    python examples/singa/run_singa_examples.py CHECKOUT --smoke     # alexnet, resnet,
        # xceptionnet (224x224 and 299x299) on 12 images, batch 4, one epoch: a smoke run
    python examples/singa/run_singa_examples.py CHECKOUT --mpi 2 --models cnn
        # train_mpi.py on 2 ranks (python -m hl.distributed), graph on and off

Nothing is fetched and SINGA's code is not part of this repository: the script copies
``examples/cnn`` and ``examples/mlp`` from the checkout into a temporary folder and changes

  * ``from singa import X`` -> ``from hl.singa import X`` (the door),
  * ``device.create_cuda_gpu_on(local_rank)`` / ``create_cuda_gpu_on(0)`` /
    ``create_cuda_gpu()`` -> ``device.create_cpu_device()``, the change SINGA's own comment
    asks for on machines without a GPU ("need to change to CPU device for CPU-only machines"),
  * the hard-coded ``/tmp/...-ubyte.gz`` paths of ``data/mnist.py`` -> the temporary folder
    (SINGA's comment: "need to change to local disk"),
  * ``np.zeros(shape=[1], dtype=np.float32)`` accumulators -> ``np.float32(0)``: numpy 2
    refuses ``'%f' % array([x])``, which train_cnn.py prints (a numpy change, not SINGA's),

then writes an MNIST-format data set there (the four gzipped IDX files) made from hl's
shipped digits (1438 training and 359 test images, resized to 28x28) and runs
``train_cnn.py MODEL mnist`` for each model, with graph mode on (SINGA's default) and off
(``-g``), and ``mlp/native.py`` and ``mlp/model.py``. It prints each program's accuracy and
loss lines, its wall time, and the time profile it prints (``--verbosity``: train_cnn.py's
``-v``, SINGA's dev.SetVerbosity, printed by dev.PrintTimeProfiling at the end).
"""
import argparse
import gzip
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import time

import numpy as np


def write_idx(path, arr):
    """A gzipped IDX file of uint8 values (MNIST's layout)."""
    arr = np.ascontiguousarray(arr, dtype=np.uint8)
    header = struct.pack(">BBBB", 0, 0, 0x08, arr.ndim) + b"".join(
        struct.pack(">I", d) for d in arr.shape)
    with gzip.open(path, "wb") as f:
        f.write(header + arr.tobytes())


def make_mnist(folder, limit=None):
    import hl
    (x, y), (xt, yt) = hl.data.digits(size=28)
    if limit:
        x, y, xt, yt = x[:limit], y[:limit], xt[:limit], yt[:limit]
    for name, images, labels in (("train", x, y), ("t10k", xt, yt)):
        write_idx(os.path.join(folder, f"{name}-images-idx3-ubyte.gz"),
                  np.round(np.asarray(images)[:, 0] * 255))
        write_idx(os.path.join(folder, f"{name}-labels-idx1-ubyte.gz"), np.asarray(labels))
    return len(x), len(xt)


def port(text, data_dir):
    text = re.sub(r"^(\s*)from singa(\.[\w.]+)? import", r"\1from hl.singa\2 import", text,
                  flags=re.M)
    text = re.sub(r"device\.create_cuda_gpu(_on)?\([^)]*\)", "device.create_cpu_device()", text)
    text = text.replace("np.zeros(shape=[1], dtype=np.float32)", "np.float32(0)")
    # the same numpy-2 change in train_cnn.py's reduce_variable (train_mpi.py prints its
    # one-element result with '%f')
    text = text.replace("    output = tensor.to_numpy(reducer)\n    return output\n",
                        "    output = tensor.to_numpy(reducer)\n    return output[0]\n")
    return re.sub(r"'/tmp/((train|t10k)-[a-z0-9-]+\.gz)'",
                  lambda m: repr(os.path.join(data_dir, m.group(1))), text)


def copy_ported(src, dst, data_dir):
    shutil.copytree(src, dst)
    for root, _, files in os.walk(dst):
        for f in files:
            if f.endswith(".py"):
                p = os.path.join(root, f)
                with open(p, encoding="utf-8") as fh:
                    text = port(fh.read(), data_dir)
                with open(p, "w", encoding="utf-8") as fh:
                    fh.write(text)


def run(cmd, cwd, timeout, ranks=None):
    env = dict(os.environ, PYTHONWARNINGS="ignore")
    launch = [sys.executable] + (["-m", "hl.distributed", "-n", str(ranks)] if ranks else [])
    p = subprocess.run(launch + cmd, cwd=cwd, env=env, capture_output=True, text=True,
                       timeout=timeout)
    return p.returncode, p.stdout + p.stderr


def summary(out):
    """The lines worth keeping from a program's output: accuracies and losses, errors, and
    the time profile (everything from "Time Profiling:" on)."""
    lines = out.strip().splitlines()
    if "Time Profiling:" in lines:
        cut = lines.index("Time Profiling:")
        lines, profile = lines[:cut], lines[cut:]
    else:
        profile = []
    keep = [ln for ln in lines if "accuracy" in ln or "rror" in ln] or lines[-8:]
    return "\n".join(keep + profile)


def train_cnn(args, tmp, model, graph):
    """train_cnn.py (or, with --mpi, train_mpi.py on that many ranks) for one model."""
    script = "train_mpi.py" if args.mpi else "train_cnn.py"
    cmd = [script, model, "mnist", "-m", str(args.epochs), "-b", str(args.batch)]
    cmd += ["-l", str(args.lr)] + graph
    if args.verbosity:
        cmd += ["-v", str(args.verbosity)]
    start = time.perf_counter()
    rc, out = run(cmd, os.path.join(tmp, "cnn"), args.timeout, args.mpi)
    launch = f"python -m hl.distributed -n {args.mpi} " if args.mpi else "python "
    print(f"\n$ {launch}{' '.join(cmd)}   (rc={rc}, {time.perf_counter() - start:.0f} s)")
    print(summary(out), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkout")
    ap.add_argument("--models", nargs="*", default=["cnn", "mlp"])
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.005)
    ap.add_argument("--graph", choices=["on", "off", "both"], default="both")
    ap.add_argument("--timeout", type=int, default=1800)
    ap.add_argument("--limit", type=int, default=None,
                    help="use only the first N training and N test images (for the 224x224 "
                         "and 299x299 models, which are slow on a CPU)")
    ap.add_argument("--no-mlp-scripts", action="store_true")
    ap.add_argument("--verbosity", type=int, default=0,
                    help="train_cnn.py's -v: 1 or 2 print SINGA's time profile at the end")
    ap.add_argument("--mpi", type=int, default=0, metavar="RANKS",
                    help="run train_mpi.py on RANKS processes (SINGA's DistOpt = hl's)")
    ap.add_argument("--smoke", action="store_true",
                    help="the 224x224 / 299x299 models (alexnet, resnet, xceptionnet) on 12 "
                         "images, batch 4, one epoch")
    args = ap.parse_args(argv)
    if args.smoke:
        args.models, args.epochs, args.batch, args.limit = (["alexnet", "resnet",
                                                             "xceptionnet"], 1, 4, 12)
    if args.mpi or args.smoke:
        args.no_mlp_scripts = True
    tmp = tempfile.mkdtemp(prefix="hl_singa_examples_")
    try:
        data = os.path.join(tmp, "mnist")
        os.makedirs(data)
        n, nt = make_mnist(data, args.limit)
        print(f"MNIST-format data from hl's digits: {n} training, {nt} test images, 28x28")
        ex = os.path.join(args.checkout, "examples")
        copy_ported(os.path.join(ex, "cnn"), os.path.join(tmp, "cnn"), data)
        copy_ported(os.path.join(ex, "mlp"), os.path.join(tmp, "mlp"), data)
        graphs = {"on": [[]], "off": [["-g"]], "both": [[], ["-g"]]}[args.graph]
        for model in args.models:
            for g in graphs:
                train_cnn(args, tmp, model, g)
        scripts = [] if args.no_mlp_scripts else [["native.py", "-m", "301"],
                                                   ["model.py", "-m", "301"]]
        for script in scripts:
            rc, out = run(script, os.path.join(tmp, "mlp"), args.timeout)
            print(f"\n$ python mlp/{' '.join(script)}   (rc={rc})")
            print("\n".join(out.strip().splitlines()[-5:]))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
