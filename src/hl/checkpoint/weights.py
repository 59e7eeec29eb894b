"""``Layer.save_weights(path.h5)`` / ``Layer.load_weights(path.h5)``: the states as a plain
HDF5 file, one group per layer, readable by h5py with no hl installed:

    /                       attrs: hl_format = "hl.weights", version = 1
    /conv1/W, /conv1/b      the states of the sub-layer conv1
    /blk1/conv1/W           nested layers are nested groups
    /W                      the states of the layer itself (when it has its own)

Each dataset also carries its full state name in the attribute ``name`` (``blk1.conv1.W``),
which is what loading goes by. bfloat16 states are stored as float32 (exactly).
"""
import os

import h5py

from .. import errors
from .archive import _LIBVER, checked_dataset, host_array
from .atomic import atomic_output
from .matching import describe, match, module_states, read_into

FORMAT = "hl.weights"
VERSION = 1


def save(layer, path, overwrite=True):
    what = f"{type(layer).__name__}.save_weights"
    states = module_states(layer, what)
    with atomic_output(path, overwrite, what) as tmp:
        with h5py.File(tmp, "w", libver=_LIBVER) as f:
            f.attrs["hl_format"] = FORMAT
            f.attrs["version"] = VERSION
            for name, t in states.items():
                ds = f.create_dataset("/".join(name.split(".")), data=host_array(t))
                ds.attrs["name"] = name
                ds.attrs["dtype"] = describe(t)["dtype"]


def load(layer, path, strict=True):
    what = f"{type(layer).__name__}.load_weights"

    def error(problem):
        return errors.CheckpointError(f"{what}: {path}: {problem}")

    try:
        f = h5py.File(path, "r")
    except FileNotFoundError:
        raise errors.CheckpointIOError(f"{what}: {path}: no such file") from None
    except (OSError, ValueError, RuntimeError) as e:
        raise error(f"not a readable HDF5 file ({e})") from None
    try:
        with f:
            _load(layer, f, os.path.getsize(path), strict, error)
    except errors.HLError:
        raise
    except Exception as e:  # noqa: BLE001 - whatever a hostile file provokes, named
        raise error(f"the file is damaged or hostile ({type(e).__name__}: {str(e)[:200]})") \
            from None


def _load(layer, f, file_size, strict, error):
    if f.attrs.get("hl_format") != FORMAT:
        raise error(f"not an hl weights file (hl_format {f.attrs.get('hl_format')!r}); "
                    f"states archives load with load_states, whole models with hl.load")
    found = {}

    def visit(path_in_file, obj):
        if isinstance(obj, h5py.Dataset):
            checked_dataset(obj.id, file_size, error, path_in_file)
            name = obj.attrs.get("name", path_in_file.replace("/", "."))
            if isinstance(name, bytes):
                name = name.decode()
            found[str(name)] = obj

    try:
        f.visititems(visit)
    except (OSError, RuntimeError, KeyError) as e:
        raise error(f"the file is damaged ({e})") from None
    for name, ds in found.items():
        if ds.dtype.kind not in "biuf":
            raise error(f"the dataset {ds.name} holds {ds.dtype}, not numbers")
    targets = match(layer, found, strict, error)
    for name, (t, ds) in targets.items():
        try:
            read_into(ds, t)
        except (OSError, TypeError) as e:
            raise error(f"reading {name} failed ({e}); the layer is partly loaded") \
                from None

