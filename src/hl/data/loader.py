"""DataLoader: batches of arrays, in order or shuffled reproducibly."""
import math

import numpy as np

from .. import errors
from .._tensor import Tensor, tensor


class DataLoader:
    """Iterates over batches of one or several arrays of the same length (inputs, labels,
    sample weights...): ``for x, y in DataLoader(x, y, batch_size=64, shuffle=True,
    seed=0)`` (``y=`` may also be given by keyword; it comes after the positional arrays).
    One array gives its batches alone; several give a tuple per batch.

    Arrays are numpy arrays (or hl Tensors, read through numpy). Batches are numpy arrays,
    or hl Tensors with ``as_tensor=True`` (on ``device``).

    Shuffling: the order of epoch e is a permutation drawn from ``seed`` and e, so a run
    with the same seed sees the same orders, and every epoch a different one. Without a
    seed, one is drawn when the loader is made. An epoch is one pass of ``iter()``;
    ``epoch`` counts the passes begun, and ``set_epoch(e)`` makes the next pass epoch e
    (to resume a run). ``drop_last`` leaves out a last batch smaller than batch_size.
    """

    def __init__(self, *arrays, y=None, batch_size=32, shuffle=False, seed=None,
                 drop_last=False, as_tensor=False, device=None):
        if y is not None:  # DataLoader(x, y=y): y comes after the positional arrays
            arrays = arrays + (y,)
        if not arrays:
            raise errors.ValueError("DataLoader: give at least one array")
        self.arrays = [_as_array(a, i) for i, a in enumerate(arrays)]
        n = len(self.arrays[0])
        lengths = [len(a) for a in self.arrays]
        if any(m != n for m in lengths):
            raise errors.ShapeError(f"DataLoader: the arrays have different lengths {lengths}; "
                                    f"every array needs one entry per sample")
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
                or batch_size < 1:
            raise errors.ValueError(f"DataLoader: batch_size must be an integer >= 1, got "
                                    f"{batch_size!r}")
        self.n = n
        self.batch_size = int(batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(np.random.SeedSequence().entropy) if seed is None else int(seed)
        self.drop_last = bool(drop_last)
        self.as_tensor = bool(as_tensor)
        self.device = device
        self.epoch = 0

    def __len__(self):
        """Batches per epoch."""
        if self.drop_last:
            return self.n // self.batch_size
        return math.ceil(self.n / self.batch_size)

    def set_epoch(self, epoch):
        self.epoch = int(epoch)

    def order(self, epoch):
        """The sample order of an epoch."""
        if not self.shuffle:
            return np.arange(self.n)
        return np.random.default_rng([self.seed, int(epoch)]).permutation(self.n)

    def __iter__(self):
        order = self.order(self.epoch)
        self.epoch += 1
        shuffled = self.shuffle
        for b in range(len(self)):
            start = b * self.batch_size
            if shuffled:
                rows = order[start:start + self.batch_size]
                batch = [a[rows] for a in self.arrays]
            else:
                batch = [a[start:start + self.batch_size] for a in self.arrays]
            if self.as_tensor:
                batch = [tensor(np.ascontiguousarray(a), device=self.device) for a in batch]
            yield batch[0] if len(batch) == 1 else tuple(batch)


def _as_array(a, i):
    if isinstance(a, Tensor):
        a = a.numpy() if a.device.kind == "cpu" else a.cpu().numpy()
    a = np.asarray(a)
    if a.ndim == 0:
        raise errors.ShapeError(f"DataLoader: array {i} is 0-d; every array needs a first "
                                f"axis over the samples")
    return a
