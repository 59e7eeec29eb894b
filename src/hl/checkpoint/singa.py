"""Apache SINGA's checkpoint zip, read by ``load_states`` and written by
``save_states(path, aux, format="singa")``, so SINGA users bring their checkpoints both ways.

SINGA's ``Model.save_states`` writes a zip (deflated) with two members:

    tensor_dict.npz    numpy.savez of every tensor, keyed by its dotted state name
    states_attr.json   {name: {"state_type": 0 model state | 1 auxiliary,
                               "shape": [...], "dtype": SINGA's DataType code}}

DataType codes (SINGA's core.proto): 0 float32, 1 float16, 2 int (32-bit), 3 char (int8),
4 double, 5 unsigned char. SINGA's auxiliary states are tensors only. Writing, hl therefore
turns numbers into 0-d arrays (int32 or float32) and flattens dicts, lists and optimisers into
names joined by "/" (``optim/conv1.W:momentum``); reading, names with "/" are nested back into
dicts, so ``optim.set_states(aux["optim"])`` works after either format. int64 tensors are
written as int32 (SINGA has no 64-bit integers) when their values fit, and bool as unsigned
char. Nothing else fits the format, and saying so is better than guessing: strings, None, and
other objects raise CheckpointError.
"""
import io
import json
import numbers
import zipfile

import numpy as np

from .. import errors
from .. import dtypes as _dt
from .._tensor import Tensor
from .atomic import atomic_output
from .matching import device_of, match, module_states, read_into

TENSOR_DICT = "tensor_dict.npz"
STATES_ATTR = "states_attr.json"
MODEL_STATE, AUX_STATE = 0, 1
_CODES = {0: np.float32, 1: np.float16, 2: np.int32, 3: np.int8, 4: np.float64, 5: np.uint8}
_CODE_OF = {np.dtype(v): k for k, v in _CODES.items()}


def is_singa(reader):
    return TENSOR_DICT in reader.names and STATES_ATTR in reader.names


# ---- writing -------------------------------------------------------------------------------

def _as_singa_array(v, path, what):
    """A numpy array of a dtype SINGA has, for a tensor, array or number."""
    if isinstance(v, Tensor):
        if v.dtype is _dt.bfloat16:
            raise errors.CheckpointError(f"{what}: {path} is bfloat16, which SINGA's format "
                                         f"has no code for; cast it to float32 or float16")
        v = v.numpy() if v.device.kind == "cpu" else v.cpu().numpy()
    elif isinstance(v, bool) or isinstance(v, np.bool_):
        v = np.array(v, dtype=np.uint8)
    elif isinstance(v, numbers.Integral):
        v = np.array(v, dtype=np.int64)
    elif isinstance(v, numbers.Real):
        v = np.array(v, dtype=np.float32)
    arr = np.asarray(v)
    if arr.dtype == np.bool_:
        arr = arr.astype(np.uint8)
    elif arr.dtype == np.int64:
        if arr.size and (arr.min() < -2 ** 31 or arr.max() >= 2 ** 31):
            raise errors.CheckpointError(f"{what}: {path} holds int64 values beyond int32, and "
                                         f"SINGA's format has no 64-bit integers")
        arr = arr.astype(np.int32)
    if arr.dtype not in _CODE_OF:
        raise errors.CheckpointError(f"{what}: {path} has dtype {arr.dtype}, which SINGA's "
                                     f"format cannot hold (it has float32, float16, float64, "
                                     f"int32, int8 and uint8)")
    return arr


def _flatten(value, prefix, out, what):
    from ..opt.optimizer import Optimizer

    if isinstance(value, Optimizer):
        value = value.get_states()
    if isinstance(value, dict):
        for k, v in value.items():
            _flatten(v, f"{prefix}/{k}" if prefix else str(k), out, what)
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _flatten(v, f"{prefix}/{i}", out, what)
    elif isinstance(value, (Tensor, np.ndarray, np.generic, numbers.Number)):
        out[prefix] = _as_singa_array(value, f"aux_states[{prefix!r}]", what)
    else:
        raise errors.CheckpointError(
            f"{what}: aux_states[{prefix!r}] is a {type(value).__name__}; SINGA's format holds "
            f"only tensors (and numbers, dicts, lists and optimisers, flattened into them). "
            f"Use the default format to keep it")


def save(module, path, aux_states=None, overwrite=True):
    what = f"{type(module).__name__}.save_states(format='singa')"
    arrays, attrs = {}, {}
    for name, t in module_states(module, what).items():
        arrays[name] = _as_singa_array(t, name, what)
    aux = {}
    _flatten(dict(aux_states or {}), "", aux, what)
    for name, arr in aux.items():
        if name in arrays:
            raise errors.CheckpointError(f"{what}: the auxiliary name {name!r} is also a state "
                                         f"of the model; SINGA's file keeps one namespace")
        arrays[name] = arr
    for name, arr in arrays.items():
        attrs[name] = {"state_type": AUX_STATE if name in aux else MODEL_STATE,
                       "shape": list(arr.shape), "dtype": _CODE_OF[arr.dtype]}
    npz = io.BytesIO()
    np.savez(npz, **arrays)
    with atomic_output(path, overwrite, what) as tmp:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as zf:
            zf.writestr(TENSOR_DICT, npz.getbuffer())
            zf.writestr(STATES_ATTR, json.dumps(attrs))


# ---- reading -------------------------------------------------------------------------------

def load(module, reader, strict=True):
    attrs = reader.json(STATES_ATTR)
    data = reader.read(TENSOR_DICT)
    _check_npz(data, reader)
    try:
        npz = np.load(io.BytesIO(data), allow_pickle=False)
        arrays = {k: npz[k] for k in npz.files}
    except (ValueError, OSError, zipfile.BadZipFile, EOFError) as e:
        raise reader.error(f"{TENSOR_DICT} is not a readable numpy archive ({e})") from None
    model, aux = {}, {}
    for name, arr in arrays.items():
        a = attrs.get(name)
        if not isinstance(a, dict):
            raise reader.error(f"{STATES_ATTR} does not describe the tensor {name!r}")
        try:
            kind, shape, code = a["state_type"], tuple(a["shape"]), a["dtype"]
        except (KeyError, TypeError) as e:
            raise reader.error(f"{STATES_ATTR} describes {name!r} badly ({e})") from None
        if kind not in (MODEL_STATE, AUX_STATE):
            raise reader.error(f"{name!r} has state_type {kind!r}; SINGA uses 0 (model) and "
                               f"1 (auxiliary)")
        if code not in _CODES:
            raise reader.error(f"{name!r} has dtype code {code!r}; SINGA's codes are "
                               f"{sorted(_CODES)}")
        if arr.shape != shape or arr.dtype != _CODES[code]:
            raise reader.error(f"{name!r} is {arr.dtype}{list(arr.shape)} in {TENSOR_DICT} "
                               f"but {np.dtype(_CODES[code])}{list(shape)} in {STATES_ATTR}")
        (model if kind == MODEL_STATE else aux)[name] = arr
    listed = [k for k in attrs if k not in arrays]
    if listed:
        raise reader.error(f"{STATES_ATTR} lists {listed}, which {TENSOR_DICT} does not hold")
    targets = match(module, model, strict, reader.error)
    for name, (t, arr) in targets.items():
        read_into(_ArrayDataset(arr), t)
    device = device_of(targets)
    return _nest({k: Tensor(v, device=device) for k, v in aux.items()})


def _check_npz(data, reader):
    """Every array of the npz, before numpy allocates it from its header's shape: a numeric
    dtype, and exactly the bytes its member holds, the member within the ratio limit."""
    from .archive import MAX_RATIO, SLACK_BYTES
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as inner:
            for info in inner.infolist():
                if info.compress_size > len(data) or \
                        info.file_size > MAX_RATIO * info.compress_size + SLACK_BYTES:
                    raise reader.error(f"{TENSOR_DICT}: the member {info.filename!r} claims "
                                       f"{info.file_size} bytes from {info.compress_size}")
                with inner.open(info) as f:
                    version = np.lib.format.read_magic(f)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(f, max_header_size=10000)
                    header = f.tell()
                nbytes = dtype.itemsize
                for n in shape:
                    nbytes *= int(n)
                if dtype.kind not in "biuf" or dtype.hasobject or \
                        nbytes != info.file_size - header:
                    raise reader.error(f"{TENSOR_DICT}: {info.filename!r} declares "
                                       f"{dtype}{list(shape)} ({nbytes} bytes) in "
                                       f"{info.file_size - header} bytes of data")
    except (ValueError, OSError, zipfile.BadZipFile, EOFError, TypeError,
            SyntaxError) as e:
        raise reader.error(f"{TENSOR_DICT} is not a readable numpy archive ({e})") from None


class _ArrayDataset:
    """A numpy array behind the two calls read_into makes of an HDF5 dataset."""

    def __init__(self, arr):
        self.arr, self.dtype, self.shape = arr, arr.dtype, arr.shape

    def read_direct(self, out):
        np.copyto(out, self.arr)

    def __getitem__(self, key):
        return self.arr[key]


def _nest(flat):
    out = {}
    for name, v in flat.items():
        parts = name.split("/")
        node = out
        for p in parts[:-1]:
            nxt = node.setdefault(p, {})
            if not isinstance(nxt, dict):  # "a" and "a/b" both present: keep the flat name
                node = None
                break
            node = nxt
        if node is None or parts[-1] in node:
            out[name] = v
        else:
            node[parts[-1]] = v
    return out
