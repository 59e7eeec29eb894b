"""What the rank scripts share: small models and the shipped digits, built the same way on
every rank and in the single-process reference run."""
import argparse

import numpy as np

import hl


class MLP(hl.Module):
    def __init__(self, hidden=32, classes=10, dtype="float32"):
        super().__init__()
        self.hidden, self.classes, self.dtype_name = hidden, classes, dtype
        self.fc1 = hl.layers.Linear(hidden)
        self.fc2 = hl.layers.Linear(classes)

    def forward(self, x):
        return self.fc2(hl.relu(self.fc1(x)))


class CNN(hl.Module):
    def __init__(self):
        super().__init__()
        self.conv = hl.layers.Conv2d(8, 3, padding=1)
        self.fc = hl.layers.Linear(10)

    def forward(self, x):
        h = hl.relu(self.conv(x))
        return self.fc(hl.reshape(h, (h.shape[0], -1)))


def place(device):
    """Where this rank trains: "cuda" becomes the rank's own GPU (cuda:local_rank; NCCL
    needs one per rank), or cuda:0 where there is one device (the emulation: one per
    process)."""
    if device != "cuda":
        return device
    return f"cuda:{hl.distributed.local_rank() % hl.cuda.device_count()}"


def digits(flat=True, n=None):
    (x, y), _ = hl.data.digits(flat=flat)
    if n is not None:
        x, y = x[:n], y[:n]
    return x, y


def args(*extra):
    p = argparse.ArgumentParser()
    p.add_argument("out")
    for name, kind, default in extra:
        p.add_argument("--" + name, type=kind, default=default)
    return p.parse_args()


def save(out, **arrays):
    """Each rank writes its own file (out.rank<r>.npz); rank 0 (or the single process) also
    the plain one."""
    r = hl.distributed.rank()
    np.savez(f"{out}.rank{r}.npz", **arrays)
    if r == 0:
        np.savez(out, **arrays)


def params(model):
    return {k: v.numpy().copy() for k, v in model.get_params().items()}


def shard(a, global_batch, step):
    """Rank r's rows of global batch `step`: equal contiguous slices (SINGA's DistOpt
    averages the ranks' gradients with equal weights)."""
    n, r = hl.distributed.world_size(), hl.distributed.rank()
    rows = a[step * global_batch:(step + 1) * global_batch]
    per = global_batch // n
    return rows[r * per:(r + 1) * per]
