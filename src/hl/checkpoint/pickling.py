"""Whole models on disk: ``hl.save(obj, path)`` and ``hl.load(path)``.

The file is an archive (archive.py) with three members:

    model.json   {"format": "hl.model", "version": 1, "hl_version", "class", "tensors": n}
    model.pkl    the pickled object graph (classes, attributes, sub-layers, optimiser), with
                 every Tensor and numeric numpy array replaced by a reference ("persistent id")
    tensors.h5   the tensors and arrays, datasets t/0, t/1, ...

**Loading is safe by default**: with ``trusted=False`` the pickle runs on the restricted
unpickler of unpickler.py (classes only, hl's own reconstruction paths, checked BUILDs), and
every tensor comes from a reference to a dataset checked against the reference's dtype and
shape and against its own stored size (archive.py) before any memory is allocated.
``trusted=True`` uses Python's own unpickler, for files the caller made.
"""
import io
import json
import pickle
import struct

import numpy as np

from .. import _core, errors
from .. import devices as _dev
from .. import dtypes as _dt
from .._tensor import Tensor
from . import archive
from .matching import read_into, stored_dtype
from .unpickler import RestrictedUnpickler

FORMAT = "hl.model"
VERSION = 1
MODEL_JSON, MODEL_PKL = "model.json", "model.pkl"

# ---- saving -----------------------------------------------------------------------------

class _Pickler(pickle.Pickler):
    def __init__(self, file):
        super().__init__(file, protocol=5)
        self.tensors = []   # (dataset, tensor or array)
        self._ids = {}      # id(obj) -> persistent id (a tensor kept twice is stored once)

    def persistent_id(self, obj):
        if isinstance(obj, Tensor):
            kind = "tensor"
        elif type(obj) is np.ndarray and obj.dtype.kind in "biuf":
            kind = "ndarray"
        else:
            return None
        pid = self._ids.get(id(obj))
        if pid is None:
            index = len(self.tensors)
            self.tensors.append((f"t/{index}", obj))
            if kind == "tensor":
                pid = ("tensor", index, obj.dtype.name, tuple(obj.shape), str(obj.device),
                       bool(obj.requires_grad), bool(obj.stores_grad), obj.name)
            else:
                pid = ("ndarray", index, obj.dtype.str, obj.shape)
            self._ids[id(obj)] = pid  # obj stays alive in self.tensors, so its id stays unique
        return pid


def save(obj, path, overwrite=True):
    buf = io.BytesIO()
    p = _Pickler(buf)
    try:
        p.dump(obj)
    except (pickle.PicklingError, TypeError, AttributeError) as e:
        raise errors.CheckpointError(
            f"hl.save: {path}: cannot pickle {type(obj).__name__}: {e}. Lambdas, functions "
            f"defined inside functions, open files and locks cannot be saved: keep them out "
            f"of the model's attributes, or define them at module level") from None
    meta = {"format": FORMAT, "version": VERSION, "hl_version": _core.version(),
            "class": f"{type(obj).__module__}.{type(obj).__qualname__}",
            "tensors": len(p.tensors)}

    archive.write(path, {MODEL_JSON: json.dumps(meta, indent=1).encode(),
                         MODEL_PKL: buf.getbuffer()}, p.tensors, {"hl_format": FORMAT},
                  overwrite, "hl.save")


# ---- loading ----------------------------------------------------------------------------

class _References:
    """Loads the tensors and arrays model.pkl refers to, each once, checked against its
    dataset."""

    def __init__(self, reader, device):
        self.reader, self.device = reader, device
        self.loaded = {}

    def __call__(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 2 or pid[0] not in ("tensor", "ndarray") \
                or type(pid[1]) is not int:
            raise self.reader.error(f"{MODEL_PKL} has an unknown tensor reference {pid!r}")
        index = pid[1]
        if index in self.loaded:
            return self.loaded[index]
        name = f"t/{index}"
        ds = self.reader.dataset(name)
        try:
            if pid[0] == "tensor":
                _, _, dtype, shape, device, requires_grad, stores_grad, tname = pid
                expected = stored_dtype(dtype)
            else:
                _, _, dtype, shape = pid
                expected = np.dtype(dtype)
            shape = tuple(shape)
            if not all(type(s) is int and s >= 0 for s in shape) or not isinstance(dtype, str) \
                    or (pid[0] == "tensor" and not (
                        isinstance(device, str) and type(requires_grad) is bool and
                        type(stores_grad) is bool and (tname is None or isinstance(tname, str)))):
                raise errors.ValueError("a field has the wrong type")
        except (ValueError, TypeError, errors.HLError) as e:
            raise self.reader.error(f"{MODEL_PKL} has a bad tensor reference {pid!r:.200} "
                                    f"({e})") from None
        if tuple(ds.shape) != tuple(shape) or ds.dtype != expected:
            raise self.reader.error(f"the dataset {name} is {ds.dtype}{list(ds.shape)}, but "
                                    f"{MODEL_PKL} expects {expected}{list(shape)}")
        if pid[0] == "ndarray":
            obj = ds[()]
        else:
            dev = self.device if self.device is not None else _saved_device(device, self.reader)
            from ..ops import empty
            obj = empty(*shape, dtype=_dt.dtype(dtype), device=dev) if shape else \
                Tensor(ds[()], dtype=dtype, device=dev)
            if shape:
                read_into(ds, obj)
            obj.requires_grad, obj.stores_grad, obj.name = requires_grad, stores_grad, tname
        self.loaded[index] = obj
        return obj


def _saved_device(name, reader):
    d = _dev.device(name)
    if d.kind != "cpu":
        if not _dev.cuda_available():
            raise reader.error(f"it was saved on {name}, which this machine does not have; "
                               f"pass device='cpu' to load it there")
    return d


def load(path, device=None, allowed=(), trusted=False):
    device = _dev.device(device) if device is not None else None
    with archive.Reader(path, "hl.load") as r:
        if MODEL_PKL not in r.names:
            if "states.json" in r.names or "states_attr.json" in r.names:
                raise r.error("this is a states archive (save_states); build the model and "
                              "call model.load_states(path)")
            r.require(MODEL_JSON, MODEL_PKL, archive.TENSORS)
        meta = r.json(MODEL_JSON) if MODEL_JSON in r.names else {}
        if meta.get("format") != FORMAT:
            raise r.error(f"not a model saved by hl.save (format {meta.get('format')!r})")
        if not isinstance(meta.get("version"), int) or meta["version"] > VERSION:
            raise r.error(f"written by a newer hl (model format version {meta.get('version')}, "
                          f"this hl reads up to {VERSION}); upgrade hl")
        data = r.read(MODEL_PKL)
        refs = _References(r, device)
        if trusted:
            u = pickle.Unpickler(io.BytesIO(data))
            u.persistent_load = refs
        else:
            u = RestrictedUnpickler(io.BytesIO(data), r, refs, allowed)
        try:
            return u.load()
        except errors.CheckpointError:
            raise
        except errors.HLError as e:  # a check of an object's state, say: name the file
            raise r.error(f"{MODEL_PKL} holds a bad object ({type(e).__name__}: {e})") \
                from None
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, LookupError,
                TypeError, ValueError, ArithmeticError, RecursionError, MemoryError,
                UnicodeError, struct.error) as e:
            raise r.error(f"{MODEL_PKL} cannot be unpickled ({type(e).__name__}: "
                          f"{str(e)[:200]})") from None

