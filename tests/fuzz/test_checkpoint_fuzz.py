"""Fuzzing hl's loaders (issue 17) with hypothesis: truncated files, bytes flipped with the zip
CRCs recomputed (so the flip gets past the checksum into the parsers), crafted states.json
documents, crafted HDF5 datasets. Every case must either load or raise a CheckpointError
naming the file: never another exception, a crash or a hang. HL_FUZZ_EXAMPLES raises the
number of examples (docs/checkpoints.md)."""
import io
import json
import os
import struct
import zipfile
import zlib

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hl
from hl import layers as L
from hl.checkpoint import archive
from hl.errors import CheckpointError

EXAMPLES = int(os.environ.get("HL_FUZZ_EXAMPLES", "40"))
SETTINGS = settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


class Net(hl.Module):
    def __init__(self):
        super().__init__()
        self.fc = L.Linear(3)
        self.bn = L.BatchNorm1d() if hasattr(L, "BatchNorm1d") else L.LayerNorm()

    def forward(self, x):
        return self.bn(self.fc(x))


def _net():
    m = Net()
    m(hl.ones(2, 3))
    return m


_FILES = {}


def _originals(folder):
    """The bytes of a states archive, a whole-model file and a SINGA archive (made once)."""
    if not _FILES:
        m = _net()
        m.save_states(folder / "s.zip", {"epoch": 3, "lr": [0.1, float("nan")],
                                         "arr": np.arange(5)})
        hl.save(m, folder / "m.hl")
        m.save_states(folder / "g.zip", {"step": 2}, format="singa")
        for k in ("s.zip", "m.hl", "g.zip"):
            _FILES[k] = (folder / k).read_bytes()
    return _FILES


def _load(kind, path):
    if kind == "m.hl":
        return hl.load(path)
    return _net().load_states(path)


def _expect_load_or_checkpoint_error(kind, path):
    try:
        _load(kind, path)
    except CheckpointError as e:
        assert str(path) in str(e), e


def _members(data):
    """[(name, data start, data size, local header offset, central entry offset)]."""
    end = data.rindex(b"PK\x05\x06")
    n, cd_size, cd_offset = struct.unpack("<HII", data[end + 10:end + 20])
    out, pos = [], cd_offset
    for _ in range(n):
        name_len, extra_len, comment_len = struct.unpack("<HHH", data[pos + 28:pos + 34])
        size, = struct.unpack("<I", data[pos + 20:pos + 24])
        local, = struct.unpack("<I", data[pos + 42:pos + 46])
        lname, lextra = struct.unpack("<HH", data[local + 26:local + 30])
        out.append((data[pos + 46:pos + 46 + name_len].decode(), local + 30 + lname + lextra,
                    size, local, pos))
        pos += 46 + name_len + extra_len + comment_len
    return out


def flip_with_crc(data, pos, value):
    """data with byte `pos` set to `value` and the CRC-32 of the member holding it recomputed
    in both its local header and its central directory entry (stored members)."""
    data = bytearray(data)
    data[pos] = value
    for name, start, size, local, central in _members(bytes(data)):
        if start <= pos < start + size:
            crc = zlib.crc32(bytes(data[start:start + size])) & 0xFFFFFFFF
            data[local + 14:local + 18] = struct.pack("<I", crc)
            data[central + 16:central + 20] = struct.pack("<I", crc)
    return bytes(data)


@SETTINGS
@given(kind=st.sampled_from(["s.zip", "m.hl", "g.zip"]), cut=st.floats(0, 1))
def test_truncated_files(tmp_path_factory, kind, cut):
    folder = tmp_path_factory.mktemp("f")
    data = _originals(folder)[kind]
    path = folder / "cut"
    path.write_bytes(data[:min(int(len(data) * cut), len(data) - 1)])
    with pytest.raises(CheckpointError):
        _load(kind, path)


@SETTINGS
@given(kind=st.sampled_from(["s.zip", "m.hl"]), where=st.floats(0, 1),
       value=st.integers(0, 255), member=st.sampled_from([0, 1, 2]))
def test_flipped_bytes_with_recomputed_crcs(tmp_path_factory, kind, where, value, member):
    folder = tmp_path_factory.mktemp("f")
    data = _originals(folder)[kind]
    members = _members(data)
    name, start, size, _, _ = members[member % len(members)]
    pos = start + min(int(size * where), size - 1)
    path = folder / "flipped"
    path.write_bytes(flip_with_crc(data, pos, value))
    _expect_load_or_checkpoint_error(kind, path)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats() |
    st.text(max_size=8) | st.sampled_from(["__hl__", "tensor", "ndarray", "float", "dict",
                                           "tuple", "optimizer", "generator", "aux/0",
                                           "states/fc.W", "float32", "<f8"]),
    lambda inner: st.lists(inner, max_size=4) |
    st.dictionaries(st.sampled_from(["__hl__", "dataset", "shape", "dtype", "items", "value",
                                     "states", "fc.W", "x"]) | st.text(max_size=4),
                    inner, max_size=4),
    max_leaves=20)


@SETTINGS
@given(states=_json, aux=_json, version=st.sampled_from([1, 0, 2, "1", None, 2 ** 80]))
def test_crafted_states_json(tmp_path_factory, states, aux, version):
    folder = tmp_path_factory.mktemp("f")
    doc = {"format": "hl.states", "version": version, "states": states, "aux": aux}
    tmp = str(folder / "a.h5")
    with h5py.File(tmp, "w", userblock_size=512) as h5:
        h5["states/fc.W"] = np.ones((3, 3), np.float32)
        h5["aux/0"] = np.arange(4.0)
    archive.zip_around_hdf5(tmp, {"states.json": json.dumps(doc).encode()})
    _expect_load_or_checkpoint_error("s.zip", tmp)


_dtypes = st.sampled_from(["<f4", ">f8", "<i8", "u1", "?", "<f2", "S3", "O",
                           [("a", "<f4"), ("b", "<i4")], "<c8"])


@SETTINGS
@given(dtype=_dtypes, shape=st.lists(st.integers(0, 5), max_size=3),
       layout=st.sampled_from(["contiguous", "chunked", "gzip", "empty", "compact", "scalar"]),
       declared=st.lists(st.integers(-1, 6), max_size=3), declared_dtype=st.sampled_from(
           ["float32", "float64", "int64", "bool", "bfloat16", "nope", 3]))
def test_crafted_hdf5_datasets(tmp_path_factory, dtype, shape, layout, declared,
                               declared_dtype):
    folder = tmp_path_factory.mktemp("f")
    tmp = str(folder / "a.h5")
    dt = h5py.string_dtype() if dtype == "O" else np.dtype(
        [tuple(f) for f in dtype] if isinstance(dtype, list) else dtype)
    with h5py.File(tmp, "w", userblock_size=512) as h5:
        shape = () if layout == "scalar" else tuple(shape)
        kw = {}
        if layout in ("chunked", "gzip") and shape and all(shape):
            kw["chunks"] = tuple(max(1, s // 2) for s in shape)
            if layout == "gzip":
                kw["compression"] = "gzip"
        ds = h5.create_dataset("states/fc.W", shape, dt, **kw) if layout != "compact" else \
            h5.create_dataset("states/fc.W", shape, dt)
        if layout != "empty" and dt.kind != "O" and ds.size:
            ds[...] = np.zeros(shape, dt)
    doc = {"format": "hl.states", "version": 1,
           "states": {"fc.W": {"dataset": "states/fc.W", "shape": declared,
                               "dtype": declared_dtype}}}
    archive.zip_around_hdf5(tmp, {"states.json": json.dumps(doc).encode()})
    _expect_load_or_checkpoint_error("s.zip", tmp)


def test_the_fuzz_helpers_flip_past_the_checksum(tmp_path):
    """flip_with_crc must produce files that pass the CRC check (else the fuzzing above would
    test only the checksum)."""
    data = _originals(tmp_path)["s.zip"]
    name, start, size, _, _ = _members(data)[0]
    flipped = flip_with_crc(data, start + size - 1, data[start + size - 1] ^ 1)
    with zipfile.ZipFile(io.BytesIO(flipped)) as z:
        assert z.testzip() is None
