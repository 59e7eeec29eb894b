"""States archives: ``Module.save_states`` / ``Module.load_states``.

One zip (see archive.py) holding

    states.json   {"format": "hl.states", "version": 1, "hl_version": ...,
                   "states": {name: {"dataset", "shape", "dtype"}},   # the module's states
                   "aux": ...}                                        # the auxiliary values
    tensors.h5    one dataset per tensor: states/<name> for the module, aux/<n> for aux tensors

No pickle inside: loading a states archive from anywhere cannot run code.

Auxiliary values are stored as JSON where JSON can hold them. The rest are tagged objects
``{"__hl__": kind, ...}``: "tensor" and "ndarray" (a dataset), "optimizer" (its get_states(),
restored as that dict), "tuple", "float" (NaN and the infinities, which JSON cannot spell), and
"dict" (a dict that itself has a key "__hl__", so it cannot be mistaken for a tag).
"""
import json
import numbers

import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from .._tensor import Tensor
from . import archive
from .matching import (describe, device_of, match, module_states, read_into,
                       stored_dtype)

FORMAT = "hl.states"
VERSION = 1
STATES_JSON = "states.json"
_TAG = "__hl__"


# ---- the module's tensors as datasets -----------------------------------------------------

def dataset_name(group, name):
    """An HDF5 path for a state name: '/' separates HDF5 groups, so it is escaped."""
    safe = name.replace("%", "%25").replace("/", "%2F")
    if safe in ("", ".", ".."):
        safe = "%" + safe
    return f"{group}/{safe}"


def read_new(ds, dtype_name, device):
    """A new tensor holding dataset ds."""
    return Tensor(ds[()], dtype=_dt.dtype(dtype_name), device=device)


# ---- auxiliary values --------------------------------------------------------------------

class _AuxWriter:
    def __init__(self, what):
        self.what = what
        self.tensors = []  # (dataset name, array-producing tensor or ndarray)

    def encode(self, v, path):
        from ..opt.optimizer import Optimizer
        from ..ops.random import Generator

        if v is None or isinstance(v, (bool, str)):
            return v
        if isinstance(v, numbers.Integral) and not isinstance(v, np.generic):
            return int(v)
        if isinstance(v, numbers.Real) and not isinstance(v, np.generic):
            v = float(v)
            return v if np.isfinite(v) else {_TAG: "float", "value": repr(v)}
        if isinstance(v, Tensor):
            return self._dataset(v, "tensor", describe(v))
        if isinstance(v, (np.ndarray, np.generic)):
            if v.dtype.kind not in "biuf":
                raise errors.CheckpointError(f"{self.what}: {path} is a numpy array of "
                                             f"{v.dtype}; only numeric and bool arrays fit")
            kind = "ndarray" if isinstance(v, np.ndarray) else "scalar"
            return self._dataset(v, kind, {"shape": list(np.shape(v)), "dtype": v.dtype.str})
        if isinstance(v, Optimizer):
            return {_TAG: "optimizer", "class": type(v).__name__,
                    "states": self.encode(v.get_states(), f"{path}.get_states()")}
        if isinstance(v, Generator):
            return {_TAG: "generator", "states": v.get_state()}
        if isinstance(v, tuple):
            return {_TAG: "tuple", "items": [self.encode(x, f"{path}[{i}]")
                                             for i, x in enumerate(v)]}
        if isinstance(v, list):
            return [self.encode(x, f"{path}[{i}]") for i, x in enumerate(v)]
        if isinstance(v, dict):
            out = {}
            for k, x in v.items():
                if not isinstance(k, str):
                    raise errors.CheckpointError(
                        f"{self.what}: {path} has the key {k!r} ({type(k).__name__}); keys "
                        f"of auxiliary dicts must be strings")
                out[k] = self.encode(x, f"{path}[{k!r}]")
            return {_TAG: "dict", "items": out} if _TAG in out else out
        raise errors.CheckpointError(
            f"{self.what}: {path} is a {type(v).__module__}.{type(v).__qualname__}; auxiliary "
            f"values may be numbers, strings, None, tensors, numpy arrays, optimisers, "
            f"hl.random generators, and lists, tuples and dicts of these (a states archive "
            f"holds no pickle). Save whole objects with hl.save")

    def _dataset(self, v, kind, desc):
        name = f"aux/{len(self.tensors)}"
        self.tensors.append((name, v))
        return {_TAG: kind, "dataset": name, **desc}


def _decode(v, reader, device):
    if isinstance(v, list):
        return [_decode(x, reader, device) for x in v]
    if not isinstance(v, dict):
        return v
    kind = v.get(_TAG)
    if kind is None:
        return {k: _decode(x, reader, device) for k, x in v.items()}
    if kind == "dict":
        return {k: _decode(x, reader, device) for k, x in v["items"].items()}
    if kind == "tuple":
        return tuple(_decode(x, reader, device) for x in v["items"])
    if kind == "float":
        return float(v["value"])
    if kind == "optimizer":
        return _decode(v["states"], reader, device)
    if kind == "generator":
        return dict(v["states"])
    if kind in ("tensor", "ndarray", "scalar"):
        ds = _checked_dataset(reader, v["dataset"], v["shape"],
                              stored_dtype(v["dtype"]) if kind == "tensor" else
                              np.dtype(v["dtype"]))
        if kind == "tensor":
            return read_new(ds, v["dtype"], device)
        arr = ds[()]
        return arr if kind == "ndarray" else arr[()]
    raise reader.error(f"{STATES_JSON} has an auxiliary value of unknown kind {kind!r}")


def _checked_dataset(reader, name, shape, dtype):
    ds = reader.dataset(name)
    if tuple(ds.shape) != tuple(shape):
        raise reader.error(f"the dataset {name} has shape {tuple(ds.shape)}, but {STATES_JSON} "
                           f"says {tuple(shape)}")
    if ds.dtype != dtype:
        raise reader.error(f"the dataset {name} has dtype {ds.dtype}, but {STATES_JSON} says "
                           f"{dtype}")
    return ds


# ---- save and load -------------------------------------------------------------------------

def save(module, path, aux_states=None, overwrite=True):
    what = f"{type(module).__name__}.save_states"
    states = module_states(module, what)
    aux = _AuxWriter(what)
    encoded_aux = aux.encode(dict(aux_states or {}), "aux_states")
    doc = {"format": FORMAT, "version": VERSION, "hl_version": _core.version(),
           "states": {}, "aux": encoded_aux}
    for name, t in states.items():
        doc["states"][name] = {"dataset": dataset_name("states", name), **describe(t)}

    body = json.dumps(doc, indent=1, allow_nan=False).encode()
    tensors = [(doc["states"][name]["dataset"], t) for name, t in states.items()] + aux.tensors
    archive.write(path, {STATES_JSON: body}, tensors, {"hl_format": FORMAT}, overwrite, what)


def load(module, path, strict=True):
    what = f"{type(module).__name__}.load_states"
    with archive.Reader(path, what) as r:
        if STATES_JSON not in r.names:
            from . import singa
            if singa.is_singa(r):
                return singa.load(module, r, strict)
            if "model.pkl" in r.names:
                raise r.error("this is a whole model saved with hl.save; load it with "
                              "hl.load(path)")
            r.require(STATES_JSON, archive.TENSORS)
        doc = r.json(STATES_JSON)
        if doc.get("format") != FORMAT:
            raise r.error(f"{STATES_JSON} is not an hl states description (format "
                          f"{doc.get('format')!r})")
        if not isinstance(doc.get("version"), int) or doc["version"] > VERSION:
            raise r.error(f"written by a newer hl (states format version {doc.get('version')}, "
                          f"this hl reads up to {VERSION}); upgrade hl")
        entries = doc.get("states")
        if not isinstance(entries, dict):
            raise r.error(f"{STATES_JSON} has no 'states' object")
        found = {}
        for name, e in entries.items():
            try:
                dtype = stored_dtype(e["dtype"])
                shape = tuple(int(s) for s in e["shape"])
                ds_name = e["dataset"]
            except (KeyError, TypeError, ValueError, errors.HLError) as ex:
                raise r.error(f"{STATES_JSON} describes the state {name!r} badly ({ex})") \
                    from None
            found[name] = _checked_dataset(r, ds_name, shape, dtype)
        targets = match(module, found, strict, r.error)
        device = device_of(targets)
        try:
            aux = _decode(doc.get("aux", {}), r, device)
        except (KeyError, TypeError, ValueError) as ex:
            if isinstance(ex, errors.CheckpointError):
                raise
            raise r.error(f"{STATES_JSON} describes the auxiliary values badly ({ex})") \
                from None
        for name, (t, ds) in targets.items():
            try:
                read_into(ds, t)
            except OSError as ex:
                raise r.error(f"reading {name} failed ({ex}); the model is partly loaded") \
                    from None
    return aux
