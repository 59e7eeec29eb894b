"""What fit / evaluate / predict accept, turned into batches.

- Arrays: a numpy array or hl Tensor; a list/tuple of them (a model whose forward takes
  several inputs); a dict of them (passed to forward by keyword). y and sample_weight are
  arrays. They are batched here (shuffled per epoch when asked).
- Batches: any other iterable or generator yielding ``(x, y)`` or ``(x, y, sample_weight)``
  (for predict, ``x`` alone or a tuple starting with x), e.g. an hl.data.DataLoader. A
  re-iterable object (a list, a DataLoader) is iterated afresh each epoch; a one-shot
  generator is read on from where the last epoch stopped.

An epoch is one pass over the data, or ``steps`` batches when steps is given (the stream
then continues across epochs, starting the data again when it runs out and can be).
"""
import collections
import itertools

import numpy as np

from .. import errors
from .._tensor import Tensor
from ..data.loader import DataLoader

# global_size: the samples of the whole batch when this is one rank's slice of it
# (distributed fit), else None
Batch = collections.namedtuple("Batch", "x y sample_weight global_size", defaults=(None,))


def is_array(a):
    return isinstance(a, (np.ndarray, Tensor)) or np.isscalar(a)


def is_arrays(x):
    """Arrays (or structures of arrays) rather than a source of batches."""
    if isinstance(x, (list, tuple)):
        return all(is_array(a) for a in x)
    if isinstance(x, dict):
        return all(is_array(a) for a in x.values())
    return is_array(x)


def host(a):
    """A numpy view (CPU) or copy (other devices) of an array or tensor."""
    if isinstance(a, Tensor):
        return a.numpy() if a.device.kind == "cpu" else a.cpu().numpy()
    return np.asarray(a)


class Structure:
    """How x's arrays fit together: one array, a list of them, or a dict by name."""

    def __init__(self, x):
        if isinstance(x, dict):
            self.kind, self.keys, parts = "dict", list(x), list(x.values())
        elif isinstance(x, (list, tuple)):
            self.kind, self.keys, parts = "list", None, list(x)
        else:
            self.kind, self.keys, parts = "single", None, [x]
        self.parts = parts

    def names(self):
        if self.kind == "dict":
            return [f"x[{k!r}]" for k in self.keys]
        if self.kind == "list":
            return [f"x[{i}]" for i in range(len(self.parts))]
        return ["x"]

    def rebuild(self, parts):
        if self.kind == "dict":
            return dict(zip(self.keys, parts))
        if self.kind == "list":
            return list(parts)
        return parts[0]


def check_batch_size(batch_size, what):
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) \
            or batch_size < 1:
        raise errors.ValueError(f"{what}: batch_size must be an integer >= 1, got "
                                f"{batch_size!r}")
    return int(batch_size)


class ArrayData:
    """x (structure of arrays), y and sample_weight, checked for matching lengths."""

    def __init__(self, x, y, sample_weight, what):
        self.what = what
        self.structure = Structure(x)
        self.x_parts = [host(a) for a in self.structure.parts]
        for name, a in zip(self.structure.names(), self.x_parts):
            if a.ndim == 0:
                raise errors.ShapeError(f"{what}: {name} is a single number; give one row per "
                                        f"sample (an array whose first axis is the samples)")
        self.y = None if y is None else host(y)
        self.sample_weight = None if sample_weight is None else host(sample_weight)
        named = list(zip(self.structure.names(), self.x_parts))
        if self.y is not None:
            named.append(("y", self.y))
        if self.sample_weight is not None:
            named.append(("sample_weight", self.sample_weight))
        lengths = {name: len(a) if a.ndim else 1 for name, a in named}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"{k} has {n}" for k, n in lengths.items())
            raise errors.ShapeError(f"{what}: x, y and sample_weight need one entry per sample "
                                    f"and the same number of samples; {listed}")
        self.n = len(self.x_parts[0])
        if self.n == 0:
            raise errors.ValueError(f"{what}: the data set is empty (x has 0 samples)")

    def arrays(self):
        out = list(self.x_parts)
        if self.y is not None:
            out.append(self.y)
        if self.sample_weight is not None:
            out.append(self.sample_weight)
        return out

    def _from_arrays(self, arrays):
        k = len(self.x_parts)
        x = self.structure.rebuild(arrays[:k])
        rest = arrays[k:]
        y = rest.pop(0) if self.y is not None else None
        sw = rest.pop(0) if self.sample_weight is not None else None
        return Batch(x, y, sw)

    def split(self, fraction):
        """(first part, last `fraction` of the samples), as Keras's validation_split: the
        split is taken before any shuffling."""
        if not 0.0 < fraction < 1.0:
            raise errors.ValueError(f"{self.what}: validation_split must be in (0, 1), got "
                                    f"{fraction!r}")
        cut = int(self.n * (1.0 - fraction))
        if cut == 0 or cut == self.n:
            raise errors.ValueError(f"{self.what}: validation_split={fraction} of {self.n} "
                                    f"samples leaves one side empty")
        parts = (self._from_arrays([a[:cut] for a in self.arrays()]),
                 self._from_arrays([a[cut:] for a in self.arrays()]))
        return tuple(ArrayData(b.x, b.y, b.sample_weight, self.what) for b in parts)

    def whole(self):
        """All the samples as one Batch (train_on_batch and test_on_batch)."""
        return self._from_arrays(self.arrays())

    def source(self, batch_size, shuffle=False, seed=None, steps=None):
        loader = DataLoader(*self.arrays(), batch_size=batch_size, shuffle=shuffle,
                            seed=0 if seed is None else seed)

        def epoch_batches(epoch):
            loader.set_epoch(epoch)
            for arrays in loader:
                yield self._from_arrays(list(arrays) if isinstance(arrays, tuple) else [arrays])
        return Source(epoch_batches, reiterable=True, steps=steps, length=len(loader))


class Source:
    """Batches per epoch. ``epoch_batches(epoch)`` starts a pass over the data."""

    def __init__(self, epoch_batches, reiterable, steps=None, length=None):
        self._start = epoch_batches
        self.reiterable = reiterable
        self.steps = steps
        self.length = length  # batches in a pass, when known
        self._stream = None
        self._pass = 0
        self._pending = None  # (first batch, iterator yielding it again)

    @property
    def steps_per_epoch(self):
        return self.steps if self.steps is not None else self.length

    def _continuous(self):
        while True:
            got = False
            for batch in self._start(self._pass):
                got = True
                yield batch
            self._pass += 1
            if not self.reiterable or not got:
                return

    def peek(self, epoch=0):
        """The first batch of `epoch`, which the next ``epoch(epoch)`` still yields (the
        checks before training look at it); None when the data has no batch at all."""
        if self._pending is None:
            it = self._epoch_iter(epoch)
            first = next(it, None)
            if first is None:
                return None
            self._pending = (first, itertools.chain([first], it))
        return self._pending[0]

    def _epoch_iter(self, epoch):
        if self.steps is not None:
            if self._stream is None:
                self._stream = self._continuous()
            return itertools.islice(self._stream, self.steps)
        if self.reiterable:
            return iter(self._start(epoch))
        if self._stream is None:
            self._stream = iter(self._start(0))
        return self._stream

    def epoch(self, epoch):
        """An iterator over the batches of one epoch."""
        if self._pending is not None:
            it, self._pending = self._pending[1], None
            return it
        return self._epoch_iter(epoch)


def iterable_source(data, what, steps=None, for_predict=False):
    """A Source over an iterable or generator of batches."""
    if not hasattr(data, "__iter__"):
        raise errors.ValueError(f"{what}: x must be arrays (numpy, hl Tensors, a list or "
                                f"dict of them) or an iterable of batches; got "
                                f"{type(data).__name__}")
    reiterable = iter(data) is not data

    def epoch_batches(epoch):
        if hasattr(data, "set_epoch"):
            data.set_epoch(epoch)
        for i, item in enumerate(data):
            yield as_batch(item, what, i, for_predict)
    try:
        length = len(data)
    except TypeError:
        length = None
    return Source(epoch_batches, reiterable, steps, length)


def as_batch(item, what, index, for_predict=False):
    """One item of a batch source as a Batch. Training and evaluation take ``(x, y)`` or
    ``(x, y, sample_weight)``; predict takes x alone, or a tuple whose first item is x."""
    if isinstance(item, Batch):
        return item
    if for_predict:
        return Batch(item[0] if isinstance(item, tuple) else item, None, None)
    if not isinstance(item, (tuple, list)) or len(item) not in (2, 3):
        got = f"a {type(item).__name__}" + (f" of {len(item)} items"
                                            if isinstance(item, (tuple, list)) else "")
        raise errors.ValueError(f"{what}: batch {index} of the data is {got}; each batch "
                                f"must be (x, y) or (x, y, sample_weight)")
    return Batch(item[0], item[1], item[2] if len(item) == 3 else None)


def class_weights(class_weight, y, what):
    """One weight per sample from {class: weight} and the labels y (class indices, one-hot
    rows, or 0/1 targets of shape (N,) or (N, 1))."""
    if not isinstance(class_weight, dict):
        raise errors.ValueError(f"{what}: class_weight must be a dict {{class index: "
                                f"weight}}, got {type(class_weight).__name__}")
    y = host(y)
    if y.ndim == 2 and y.shape[1] > 1:
        labels = y.argmax(axis=1)
    elif y.ndim == 2 and y.shape[1] == 1 or y.ndim == 1:
        labels = np.rint(y.reshape(-1)).astype(np.int64)
    else:
        raise errors.ShapeError(f"{what}: class_weight needs one class per sample (y of shape "
                                f"(N,), (N, 1) or one-hot (N, C)); y has shape {y.shape}")
    missing = sorted(set(np.unique(labels).tolist()) - set(int(k) for k in class_weight))
    if missing:
        raise errors.ValueError(f"{what}: class_weight has no weight for the classes "
                                f"{missing[:10]} found in y; give every class a weight")
    table = np.zeros(int(max(max(class_weight), labels.max())) + 1, np.float32)
    for k, w in class_weight.items():
        table[int(k)] = float(w)
    return table[labels]
