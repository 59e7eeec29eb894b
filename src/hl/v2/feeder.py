"""Feeding: a batch of v2 samples (tuples of fields) turned into one value per data layer,
checked field by field.

``feeding`` maps data layer names to sample positions: a dict name -> position, a list of
names (position = index), or None for v2's default (the data layers in the order of a
depth-first walk from the targets, positions 0, 1, ...). Every error names the data layer,
the batch and the sample's position in it."""
import numpy as np

from .. import errors
from .._tensor import tensor
from .operators.values import Seq


class Feeder:
    def __init__(self, data_layers, feeding, what):
        self.what = what
        self.layers = list(data_layers)
        by_name = {v.name: v for v in self.layers}
        if feeding is None:
            positions = {v.name: i for i, v in enumerate(self.layers)}
        elif isinstance(feeding, dict):
            positions = dict(feeding)
        elif isinstance(feeding, (list, tuple)):
            positions = {n: i for i, n in enumerate(feeding)}
        else:
            raise errors.ValueError(f"{what}: feeding must be a dict {{data layer name: "
                                    f"position}} or a list of names, got "
                                    f"{type(feeding).__name__}")
        unknown = sorted(set(positions) - set(by_name))
        # a feeding may name data layers other subgraphs use (a label, for infer): ignored,
        # unless it is no data layer of the graph at all
        missing = [n for n in by_name if n not in positions]
        if missing:
            raise errors.ValueError(f"{what}: feeding gives no position for the data layers "
                                    f"{missing}; it names {sorted(positions)}; the data layers "
                                    f"needed are {list(by_name)}")
        self.unknown = unknown
        for n, p in positions.items():
            if isinstance(p, bool) or not isinstance(p, (int, np.integer)) or p < 0:
                raise errors.ValueError(f"{what}: feeding[{n!r}] must be a sample position "
                                        f"(an int >= 0), got {p!r}")
        self.fields = [(v, int(positions[v.name])) for v in self.layers]
        self.width = max((p for _, p in self.fields), default=-1) + 1

    def check_names(self, graph_data_names):
        """Feeding names that are no data layer of the graph at all are an error."""
        bad = [n for n in self.unknown if n not in graph_data_names]
        if bad:
            raise errors.ValueError(f"{self.what}: feeding names {bad}, which are no data "
                                    f"layers; the data layers are {sorted(graph_data_names)}")

    def arrays(self, batch, index):
        """name -> numpy array (or (padded array, lengths) for a sequence), all checked."""
        if not isinstance(batch, (list, tuple)) or not batch:
            raise errors.ValueError(f"{self.what}: batch {index} is "
                                    f"{'empty' if isinstance(batch, (list, tuple)) else 'a ' + type(batch).__name__}; "
                                    f"a reader given to train / test must yield lists of "
                                    f"samples: wrap it with paddle.batch(reader, batch_size)")
        for i, s in enumerate(batch):
            if not isinstance(s, (tuple, list)):
                raise errors.ValueError(
                    f"{self.what}: batch {index}, sample {i} is a {type(s).__name__}, not a "
                    f"tuple of fields; is the reader batched? A reader given to train / test "
                    f"must yield lists of samples: wrap it with paddle.batch(reader, "
                    f"batch_size)")
            if len(s) < self.width:
                raise errors.ValueError(f"{self.what}: batch {index}, sample {i} has {len(s)} "
                                        f"fields; the "
                                        f"feeding reads fields up to position "
                                        f"{self.width - 1} "
                                        f"({', '.join(f'{v.name!r}: {p}' for v, p in self.fields)})")
        return {v.name: _field(v, [s[p] for s in batch], f"{self.what}: batch {index}", p)
                for v, p in self.fields}

    def values(self, arrays):
        """The arrays as hl values (tensors, or Seq for sequences)."""
        out = {}
        for v, _ in self.fields:
            a = arrays[v.name]
            if isinstance(a, tuple):
                data, lengths = a
                n, t = data.shape[:2]
                mask = (np.arange(t)[None, :] < lengths[:, None]).astype(np.float32)
                out[v.name] = Seq(tensor(data), tensor(mask.reshape(n, t, 1)), lengths)
            else:
                out[v.name] = tensor(a)
        return out


def _field(layer, column, where, pos):
    t = layer.op.type
    if t.seq:
        return _sequence(layer, column, where, pos)
    return _rows(layer, column, where, pos)


def _describe(layer):
    t = layer.op.type
    kinds = {"dense": "dense_vector", "index": "integer_value",
             "sparse_binary": "sparse_binary_vector", "sparse": "sparse_vector"}
    return f"data layer {layer.name!r} ({kinds[t.kind]}{'_sequence' if t.seq else ''}({t.dim}))"


def _rows(layer, column, where, pos):
    """One field of every sample, as (N, dim) float32 or (N,) int64."""
    t = layer.op.type
    if t.kind == "dense":
        try:
            a = np.asarray(column, dtype=np.float32)
        except (ValueError, TypeError):
            a = None
        if a is None or a.ndim != 2 or a.shape[1] != t.dim:
            if a is not None and a.ndim == 1 and t.dim == 1:
                return a.reshape(-1, 1)
            for i, x in enumerate(column):
                x = np.asarray(x)
                if x.size != t.dim or x.dtype.kind not in "fiub":
                    raise errors.ShapeError(f"{where}, sample {i}: field {pos} for "
                                            f"{_describe(layer)} has {x.size} values of dtype "
                                            f"{x.dtype} (shape {x.shape}); expected {t.dim} "
                                            f"numbers")
            a = np.asarray([np.asarray(x, np.float32).reshape(-1) for x in column])
        return a
    if t.kind == "index":
        a = _ints(column, layer, where, pos)
        bad = np.flatnonzero((a < 0) | (a >= t.dim))
        if bad.size:
            i = int(bad[0])
            raise errors.IndexError(f"{where}, sample {i}: field {pos} for {_describe(layer)} "
                                    f"is {int(a[i])}; expected an integer in [0, {t.dim})")
        return a
    return _sparse(layer, column, where, pos)


def _ints(column, layer, where, pos):
    try:
        a = np.asarray(column)
    except (ValueError, TypeError):
        a = None
    if a is None or a.ndim > 2 or (a.ndim == 2 and a.shape[1] != 1) or a.dtype.kind not in "iub":
        for i, x in enumerate(column):
            x = np.asarray(x)
            if x.size != 1 or x.dtype.kind not in "iub":
                raise errors.ValueError(f"{where}, sample {i}: field {pos} for "
                                        f"{_describe(layer)} is {x!r:.60}; expected one integer")
    return np.asarray(column).reshape(-1).astype(np.int64)


def _sparse(layer, column, where, pos):
    t = layer.op.type
    out = np.zeros((len(column), t.dim), np.float32)
    for i, x in enumerate(column):
        if t.kind == "sparse_binary":
            idx, val = np.asarray(x, dtype=np.int64).reshape(-1), 1.0
        else:
            pairs = list(x)
            idx = np.asarray([p[0] for p in pairs], dtype=np.int64)
            val = np.asarray([p[1] for p in pairs], dtype=np.float32)
        if idx.size and (idx.min() < 0 or idx.max() >= t.dim):
            raise errors.IndexError(f"{where}, sample {i}: field {pos} for {_describe(layer)} "
                                    f"holds index {int(idx.max() if idx.max() >= t.dim else idx.min())}; "
                                    f"expected indices in [0, {t.dim})")
        out[i, idx] = val
    return out


def _sequence(layer, column, where, pos):
    """Sequences padded to the longest: ((N, T, dim) float32 or (N, T) int64, lengths)."""
    t = layer.op.type
    lengths = np.asarray([len(x) if hasattr(x, "__len__") else -1 for x in column])
    bad = np.flatnonzero(lengths < 1)
    if bad.size:
        i = int(bad[0])
        raise errors.ValueError(f"{where}, sample {i}: field {pos} for {_describe(layer)} is "
                                f"{'empty' if lengths[i] == 0 else 'not a list'}; expected a "
                                f"sequence of at least one step")
    steps = int(lengths.max())
    if t.kind == "index":
        out = np.zeros((len(column), steps), np.int64)
        for i, x in enumerate(column):
            out[i, :len(x)] = _ints(list(x), layer, f"{where}, sample {i}", pos)
        bad = np.flatnonzero(((out < 0) | (out >= t.dim)).any(axis=1))
        if bad.size:
            i = int(bad[0])
            raise errors.IndexError(f"{where}, sample {i}: field {pos} for {_describe(layer)} "
                                    f"holds {int(out[i][(out[i] < 0) | (out[i] >= t.dim)][0])}; "
                                    f"expected integers in [0, {t.dim})")
        return out, lengths
    out = np.zeros((len(column), steps, t.dim), np.float32)
    for i, x in enumerate(column):
        rows = _rows(layer, list(x), f"{where}, sample {i}, steps", pos) if t.kind == "dense" \
            else _sparse(layer, list(x), f"{where}, sample {i}, steps", pos)
        out[i, :len(x)] = rows
    return out, lengths
