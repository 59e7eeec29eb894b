"""Whole models on disk: ``hl.save(obj, path)`` and ``hl.load(path)``.

The file is an archive (archive.py) with three members:

    model.json   {"format": "hl.model", "version": 1, "hl_version", "class", "tensors": n}
    model.pkl    the pickled object graph (classes, attributes, sub-layers, optimiser), with
                 every Tensor and numeric numpy array replaced by a reference ("persistent id")
    tensors.h5   the tensors and arrays, datasets t/0, t/1, ...

**Loading is safe by default.** Unpickling can call any function a file names, so hl.load
resolves each global through an allow-list, and refuses anything else with
UnsafeCheckpointError naming it:
- hl's own classes, and functions of hl's computing modules (activations stored as
  attributes, initialisers, schedules): nothing in hl that writes files, reads paths or
  reaches the C binding (hl._core, hl.checkpoint, hl.data, hl.demo), where only subclasses
  of the extension points below are allowed (hl.demo's CNN);
- builtin containers and numbers; numpy arrays, dtypes and scalars;
- user subclasses of hl's extension points (Layer, and so Module; Optimizer, Schedule, Loss,
  Metric), but only from modules the process has already imported: a file never causes an
  import, since importing a module runs its code;
- whatever the caller passes in ``allowed=[...]``.
``trusted=True`` turns the allow-list off, for files the caller made.
"""
import builtins
import io
import json
import pickle
import sys
import types

import numpy as np

from .. import _core, errors
from .. import devices as _dev
from .. import dtypes as _dt
from .._tensor import Tensor
from . import archive
from .states import read_into, stored_dtype

FORMAT = "hl.model"
VERSION = 1
MODEL_JSON, MODEL_PKL = "model.json", "model.pkl"

_BUILTINS = frozenset({"dict", "list", "tuple", "set", "frozenset", "int", "float", "complex",
                       "bool", "str", "bytes", "bytearray", "slice", "range"})
_OTHER = frozenset({("collections", "OrderedDict"), ("collections", "deque"),
                    ("collections", "defaultdict"), ("numpy", "dtype"), ("numpy", "ndarray"),
                    ("numpy.core.multiarray", "_reconstruct"),
                    ("numpy._core.multiarray", "_reconstruct"),
                    ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
                    ("numpy.core.numeric", "_frombuffer"),
                    ("numpy._core.numeric", "_frombuffer")})
# hl modules whose globals a file may never name: the C binding and the build, and the code
# that reads or writes files.
_HL_DENIED = ("hl._core", "hl._build", "hl._hl_core", "hl.checkpoint", "hl.data", "hl.demo")


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

def _extension_points():
    from ..layers.layer import Layer
    from ..losses import Loss
    from ..metrics import Metric
    from ..opt.optimizer import Optimizer
    from ..opt.schedules import Schedule
    return (Layer, Optimizer, Schedule, Loss, Metric)


def _resolve(module, qualname):
    """module.qualname for an already imported module: a class (nested classes included) or
    a module-level function; None otherwise. Methods are never returned: ``Module.save_states``
    reached through its class would let a file call it on objects of its choosing."""
    obj = sys.modules.get(module)
    parts = qualname.split(".")
    for i, part in enumerate(parts):
        if obj is None or (i > 0 and not isinstance(obj, type)):
            return None
        obj = obj.__dict__.get(part) if isinstance(obj, (types.ModuleType, type)) else None
    if isinstance(obj, type) or (isinstance(obj, types.FunctionType) and len(parts) == 1):
        return obj
    return None


class _Unpickler(pickle.Unpickler):
    def __init__(self, file, reader, device, allowed, trusted):
        super().__init__(file)
        self.reader, self.device, self.trusted = reader, device, trusted
        self.allowed = {}
        for a in allowed:
            if not hasattr(a, "__qualname__"):
                raise errors.ValueError(f"hl.load: allowed= takes classes and functions, got "
                                        f"{a!r}")
            self.allowed[(a.__module__, a.__qualname__)] = a
        self.loaded = {}

    def find_class(self, module, name):
        if self.trusted:
            return super().find_class(module, name)
        key = (module, name)
        if key in self.allowed:
            return self.allowed[key]
        if module == "builtins" and name in _BUILTINS:
            return getattr(builtins, name)
        if key in _OTHER:
            mod = sys.modules.get(module) or (np if module == "numpy" else None)
            obj = getattr(mod, name, None) if mod is not None else None
            if obj is not None:
                return obj
        if module == "numpy" and isinstance(getattr(np, name, None), type) and \
                issubclass(getattr(np, name), np.generic):
            return getattr(np, name)
        if module == "hl" or module.startswith("hl."):
            obj = _resolve(module, name)
            if obj is not None and obj.__module__.split(".")[0] == "hl" and \
                    not obj.__module__.startswith(_HL_DENIED) and \
                    not module.startswith(_HL_DENIED) and obj.__qualname__ == name:
                return obj
            if isinstance(obj, type) and issubclass(obj, _extension_points()) and \
                    obj.__qualname__ == name:
                return obj  # a model class defined in a denied module (hl.demo's CNN)
            self._refuse(module, name, "it is not one of hl's classes or computing functions")
        if module not in sys.modules:
            self._refuse(module, name, f"its module '{module}' is not imported, and loading "
                                       f"never imports a module a file names (an import runs "
                                       f"code). Import it yourself first if you trust it")
        obj = _resolve(module, name)
        if isinstance(obj, type) and issubclass(obj, _extension_points()):
            return obj
        self._refuse(module, name, "it is not on the allow-list")

    def _refuse(self, module, name, why):
        g = f"{module}.{name}"
        raise errors.UnsafeCheckpointError(
            f"hl.load: {self.reader.path}: refusing the global '{g}': {why}. hl.load allows "
            f"hl's classes, builtin containers and numbers, numpy arrays and dtypes, and "
            f"subclasses of hl.Layer / hl.Module (and Optimizer, Schedule, Loss, Metric) from "
            f"imported modules. To allow it, pass allowed=[{name.split('.')[-1]}]; if you "
            f"trust this file completely, pass trusted=True", global_name=g)

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or len(pid) < 2 or pid[0] not in ("tensor", "ndarray"):
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
        except (ValueError, TypeError, errors.HLError) as e:
            raise self.reader.error(f"{MODEL_PKL} has a bad tensor reference {pid!r} ({e})") \
                from None
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
        from .. import cuda_available
        if not cuda_available():
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
        u = _Unpickler(io.BytesIO(data), r, device, allowed, trusted)
        try:
            return u.load()
        except errors.HLError:
            raise
        except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, IndexError,
                KeyError, TypeError, ValueError, OverflowError) as e:
            raise r.error(f"{MODEL_PKL} cannot be unpickled ({type(e).__name__}: {e})") \
                from None

