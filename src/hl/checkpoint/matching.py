"""What loading shares: pairing a layer's tensors with the values to load, by name and
shape (set_states, load_state_dict, and every file format), and moving tensors to and from
HDF5 datasets (states archives, weight files, SINGA's zip, whole models). It sits here, below
hl.layers and beside the formats, so that layers and formats reach it without importing one
another.
"""
import warnings

import numpy as np

from .. import dtypes as _dt
from .. import errors
from ..autograd import no_grad
from ..devices import get_default_device


def compare(targets, values):
    """Matches a layer's tensors ({name: Tensor}) with values to load ({name: anything with a
    shape}): the names missing from values, the names values has in excess, (name, target
    shape, value shape) for each shape that differs, and the (tensor, value) pairs that fit."""
    missing = [k for k in targets if k not in values]
    unexpected = [k for k in values if k not in targets]
    wrong, ready = [], []
    for k, t in targets.items():
        if k not in values:
            continue
        v = values[k]
        shape = tuple(v.shape) if hasattr(v, "shape") else np.shape(v)
        if shape != t.shape:
            wrong.append((k, t.shape, shape))
        else:
            ready.append((t, v))
    return missing, unexpected, wrong, ready


def describe_problems(missing, unexpected, wrong, labels):
    """The phrases of an error listing what compare found wrong. labels name the missing,
    the unexpected and the mis-shaped names, then the two sides of a shape: ("missing",
    "unexpected", "wrong shape", "expected", "got")."""
    lost, extra, shaped, want, got = labels
    out = []
    if missing:
        out.append(f"{lost} {missing}")
    if unexpected:
        out.append(f"{extra} {unexpected}")
    if wrong:
        out.append(f"{shaped} [" + "; ".join(f"{k}: {want} {a}, {got} {b}" for k, a, b in wrong)
                   + "]")
    return out


def module_states(module, what):
    states = module.get_states()
    unbuilt = module._unbuilt_layers()
    if unbuilt:
        raise errors.CheckpointError(
            f"{what}: the layers {unbuilt} have not been called yet, so their parameters do "
            f"not exist and would be missing from the file; call the model once or compile "
            f"it (model.compile([hl.Placeholder(shape)])) before saving")
    return states


def match(module, found, strict, error):
    """Pairs the module's states with what the file has ({name: dataset-like with .shape}),
    checking names and shapes: {name: (tensor, dataset)}. Strict, any difference raises an
    error listing all of them and nothing is loaded; otherwise a warning lists them."""
    states = module.get_states()
    missing, unexpected, wrong, ready = compare(states, found)
    problems = describe_problems(missing, unexpected, wrong, (
        "missing from the file:", "not in the model:", "different shapes:", "the model has",
        "the file"))
    if problems:
        unbuilt = module._unbuilt_layers()
        hint = (f" (the layers {unbuilt} have not been called yet, so their parameters do not "
                f"exist: compile the model first)" if unbuilt else "")
        if strict:
            raise error("the states do not match the model: " + "; ".join(problems) + hint +
                        ". Nothing was loaded (strict=False loads what matches)")
        warnings.warn("load_states: loading what matches; " + "; ".join(problems) + hint,
                      stacklevel=4)
    names = {id(t): k for k, t in states.items()}
    return {names[id(t)]: (t, ds) for t, ds in ready}


def device_of(targets):
    """The device the module's states are on (the default device for a module without)."""
    for t, _ in targets.values():
        return t.device
    return get_default_device()


# ---- tensors as datasets -----------------------------------------------------------------

def describe(t):
    return {"shape": list(t.shape), "dtype": t.dtype.name}


def stored_dtype(name):
    """The numpy dtype a dataset of hl dtype `name` has in the file."""
    d = _dt.dtype(name)
    return np.dtype(np.float32) if d is _dt.bfloat16 else d.np


def read_into(ds, t):
    """Reads dataset ds into tensor t in place (straight into its memory when t is a
    contiguous CPU tensor of the stored dtype)."""
    if t.size == 0:
        return
    if (t.device.kind == "cpu" and t.is_contiguous() and t.dtype.np == ds.dtype
            and t.dtype is not _dt.bfloat16):
        ds.read_direct(t.numpy())
        return
    with no_grad():
        t.copy_(ds[()])
