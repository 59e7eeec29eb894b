"""Reading a model file's large initializers straight into hl tensors.

onnx.load reads the whole file into a bytes object, protobuf copies every weight into its
own message, numpy_helper.to_array copies it again and hl.tensor once more: four fresh
copies of every weight (2.6 GB of new memory for GPT-2's 650 MB), and on this VM fresh
memory, not the copying, is what costs (the kernel zeroes each new page: ~1.3 s of system
time per GB under load). Here the file is walked at the protobuf wire level instead: the
model's bytes are copied except the raw_data of the top-level graph's large initializers,
whose places in the file are noted; protobuf parses that small remainder, and each noted
weight is read from the file into the memory of a new hl tensor, one copy. For inference
that memory comes in ordinary pages, not the huge pages hl asks for large blocks: the
weights are read once more, by packing or by small kernels, and on a VM fresh huge pages made
GPT-2's read 0.5-1 s slower and twice as variable (hl_tensor_plain_pages). Parameters to be
trained keep huge pages: every step's update streams over them.

Only what this walker understands is taken this way; anything else (external data, a
field repeated where protobuf would merge, a group, an element type hl would convert) makes
``read`` return None and the caller use onnx.load, which then reports what is wrong. Every
length is checked against the file's size before it is used, so a hostile file costs at
most its own size in memory, as with onnx.load.
"""
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import onnx

from .. import _core, errors
from ..ops.creation import empty
from .types import elem_type_name

# ModelProto.graph, GraphProto.initializer, TensorProto.raw_data / external_data /
# data_location (onnx.proto's field numbers).
MODEL_GRAPH, GRAPH_INITIALIZER = 7, 5
TENSOR_RAW_DATA, TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION = 9, 13, 14
# Initializers smaller than this stay in the parsed message (not worth a read of their own).
MIN_BYTES = 1 << 16
# Weights read on several threads from this many bytes in all (below, starting the threads
# cost more than they saved: MobileNetV2's 14 MB read in 5.4-7.4 ms on one, 6.5-10.7 on two).
PARALLEL_MIN_BYTES = 64 << 20
# Element types whose bytes hl keeps as they are (the others are converted on the way in).
DIRECT = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.DOUBLE: np.float64,
          onnx.TensorProto.INT32: np.int32, onnx.TensorProto.INT64: np.int64,
          onnx.TensorProto.FLOAT16: np.float16}


class _Unsupported(Exception):
    """Something this walker leaves to onnx.load."""


class _Reader:
    """Wire-format reads from a file, each bounded by the end of the enclosing message."""

    def __init__(self, f, size):
        self.f, self.size, self.pos = f, size, 0

    def varint(self, end):
        shift, value = 0, 0
        while True:
            if self.pos >= end or shift > 63:
                raise _Unsupported
            b = self.f.read(1)
            if not b:
                raise _Unsupported
            self.pos += 1
            value |= (b[0] & 0x7F) << shift
            if b[0] < 0x80:
                return value
            shift += 7

    def take(self, n, end):
        if n < 0 or self.pos + n > end:
            raise _Unsupported
        data = self.f.read(n)
        if len(data) != n:
            raise _Unsupported
        self.pos += n
        return data

    def skip(self, n, end):
        if n < 0 or self.pos + n > end:
            raise _Unsupported
        self.pos += n
        self.f.seek(self.pos)

    def field(self, end):
        """(field number, wire type, the field's bytes as written or None for a LEN field
        whose payload is left unread, the payload's length)."""
        start = self.pos
        tag = self.varint(end)
        number, wire = tag >> 3, tag & 7
        if wire == 0:
            self.varint(end)
        elif wire == 1 or wire == 5:
            self.pos += 8 if wire == 1 else 4
            if self.pos > end:
                raise _Unsupported
            self.f.seek(self.pos)
        elif wire == 2:
            n = self.varint(end)
            if self.pos + n > end:
                raise _Unsupported
            return number, wire, start, n
        else:  # groups (3, 4) and invalid wire types
            raise _Unsupported
        return number, wire, start, None

    def raw_since(self, start):
        self.f.seek(start)
        data = self.f.read(self.pos - start)
        self.f.seek(self.pos)
        return data


def _varint_bytes(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(number, payload):
    return _varint_bytes(number << 3 | 2) + _varint_bytes(len(payload)) + payload


def _tensor(r, n, places):
    """A TensorProto's bytes without its raw_data, whose (offset, length) is appended to
    ``places`` (None where it has none)."""
    end = r.pos + n
    out, place = [], None
    while r.pos < end:
        number, wire, start, length = r.field(end)
        if number in (TENSOR_EXTERNAL_DATA, TENSOR_DATA_LOCATION):
            raise _Unsupported
        if number == TENSOR_RAW_DATA and wire == 2:
            if place is not None:
                raise _Unsupported  # protobuf keeps the last; leave that to it
            place = (r.pos, length)
            r.skip(length, end)
            continue
        if length is not None:
            r.skip(length, end)
        out.append(r.raw_since(start))
    places.append(place)
    return b"".join(out)


def _graph(r, n, places):
    end = r.pos + n
    out = []
    while r.pos < end:
        number, wire, start, length = r.field(end)
        if number == GRAPH_INITIALIZER and wire == 2 and length >= MIN_BYTES:
            out.append(_len_field(GRAPH_INITIALIZER, _tensor(r, length, places)))
            continue
        if number == GRAPH_INITIALIZER and wire == 2:
            places.append(None)
        if length is not None:
            r.skip(length, end)
        out.append(r.raw_since(start))
    return b"".join(out)


def _walk(f, size):
    """(the model's bytes without the large initializers' raw_data, their places in the
    file, one per initializer in order: (offset, length) or None)."""
    r = _Reader(f, size)
    out, places, graphs = [], [], 0
    while r.pos < size:
        number, wire, start, length = r.field(size)
        if number == MODEL_GRAPH and wire == 2:
            graphs += 1
            if graphs > 1:
                raise _Unsupported  # protobuf merges repeated messages; leave it to it
            out.append(_len_field(MODEL_GRAPH, _graph(r, length, places)))
            continue
        if length is not None:
            r.skip(length, size)
        out.append(r.raw_since(start))
    return b"".join(out), places


def read(path, for_training=False):
    """(ModelProto with the large initializers' data left out, {initializer name: hl tensor
    holding its data}) for the model file at ``path``, or None where onnx.load should read it.
    The ModelProto's other initializers keep their data. ``for_training``: the tensors will
    be trained (huge pages where large)."""
    if sys.byteorder != "little":
        return None
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        try:
            rest, places = _walk(f, size)
        except _Unsupported:
            return None
        if not any(places):
            return None
        model = onnx.ModelProto()
        try:
            model.ParseFromString(rest)
        except Exception:  # noqa: BLE001 - protobuf's DecodeError; onnx.load will say
            return None
        inits = model.graph.initializer
        if len(inits) != len(places) or len({t.name for t in inits}) != len(inits):
            return None  # (repeated names: which one wins is left to the usual path)
        taken = [(t, place) for t, place in zip(inits, places) if place is not None]
        if any(t.data_type not in DIRECT or t.HasField("segment") for t, _ in taken):
            return None
        weights = {t.name: _new_tensor(t, length, for_training) for t, (_, length) in taken}
        _read_all(f.fileno(), [(weights[t.name], t.name, place) for t, place in taken], path)
    return model, weights


def _new_tensor(t, length, for_training):
    """An empty hl tensor for initializer t, whose raw_data holds ``length`` bytes."""
    np_dtype = np.dtype(DIRECT[t.data_type])
    dims = tuple(int(d) for d in t.dims)
    count = 1
    for d in dims:
        count *= d
    if any(d < 0 for d in dims) or count * np_dtype.itemsize != length:
        raise errors.ONNXError(
            f"initializer {t.name!r} ({elem_type_name(t.data_type)} {list(dims)}) cannot be "
            f"read: its raw_data holds {length} bytes, its dims ask for "
            f"{max(count, 0) * np_dtype.itemsize}")
    x = empty(*dims, dtype=np_dtype.name)
    if not for_training:
        _core.plain_pages(x._h)
    return x


def _read_all(fd, jobs, path):
    """Reads each (tensor, name, (offset, length)) of ``jobs`` from fd, on as many threads
    as hl computes with where they hold PARALLEL_MIN_BYTES or more: the time goes to the
    kernel's page faults on the new memory, which two cores take at nearly twice the rate of
    one (GPT-2's 600 MB: 0.21 s against 0.36)."""
    def read_one(job):
        x, name, (offset, length) = job
        view = memoryview(x.numpy().reshape(-1).view(np.uint8))
        got = 0
        while got < length:
            n = os.preadv(fd, [view[got:]], offset + got)  # (releases the GIL)
            if not n:
                raise errors.ONNXError(f"{path!r}: initializer {name!r} ends early (the file "
                                       f"changed while it was read?)")
            got += n

    threads = min(_core.get_num_threads(), len(jobs))
    if threads <= 1 or sum(length for _, _, (_, length) in jobs) < PARALLEL_MIN_BYTES:
        for job in jobs:
            read_one(job)
        return
    with ThreadPoolExecutor(threads) as pool:
        for _ in pool.map(read_one, jobs):  # (re-raises the first error, in file order)
            pass
