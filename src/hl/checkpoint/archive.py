"""The archive hl saves into: one zip file holding a JSON (or pickle) description and an HDF5
tensor file, ``tensors.h5``.

Layout. ``tensors.h5`` is the first member, stored (not compressed), and its bytes start at
offset 512 of the zip file: its local zip header is padded to fill exactly the 512-byte
"user block" that HDF5 lets a file reserve in front of its superblock. So the zip member is
also a valid HDF5 file *in place*: h5py writes the tensors straight from their memory into
the final file, and reads them straight back into the tensors' memory, with no copy of the
archive in between. Any zip tool still sees an ordinary zip; extracting ``tensors.h5`` gives a
plain HDF5 file.

Integrity. Every member carries its CRC-32, as zip requires. Reading checks it before a single
value reaches a model (hl's CRC-32 runs at several GB/s, so this costs little), so a flipped
bit anywhere in the file is an error, never a silently wrong weight. A truncated file has no
zip directory at its end and is refused at once.

Archives from other zip writers (a user who unpacked and re-zipped one, compressed) still load:
the HDF5 member is then read through zipfile into memory.

Hostile files (docs/checkpoints.md, "What trusted=False guarantees"). Before a member is read,
its declared sizes are checked against the file's real size: no member may claim more than
MAX_RATIO times its compressed size plus SLACK_BYTES (a zip bomb is refused having read
nothing), and compressed sizes cannot exceed the file. Inside tensors.h5, every dataset is
checked before a byte of it is read or a byte allocated for it (checked_dataset): stored in the
file (contiguous, or chunked with every chunk allocated), no external storage, no virtual
dataset, no filter but deflate, shuffle and Fletcher-32, a numeric dtype, and a size its stored
bytes account for. Paths are walked link by link: soft and external links are refused. Any
other exception while reading becomes a CheckpointError naming the file (Reader.__exit__).
"""
import io
import json
import mmap
import os
import struct
import zipfile
import zlib

import h5py
import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from .atomic import atomic_output

TENSORS = "tensors.h5"
_USERBLOCK = 512            # HDF5's smallest user block; the zip header of TENSORS fills it
_LIBVER = ("v110", "v110")   # superblock v3 (checksummed metadata), readable by HDF5 >= 1.10
_ZIP64_LIMIT = 0xFFFFFFFF
_DOS_DATE = (1 << 5) | 1    # 1980-01-01: archives are byte-for-byte reproducible
_PAD_ID = 0x6C68            # extra-field id of the padding record ("hl"); readers skip it
_CRC_IN_MEMORY = 1 << 16    # datasets from this size up are checksummed from memory

# Limits on what a file may make hl allocate (settable: hl.checkpoint.archive.MAX_RATIO = ...).
# Deflate reaches ~1000:1 on zeros; hl's own members are stored (1:1) and a re-zipped archive
# of trained weights compresses ~1.1:1, so 16:1 beyond 16 MiB refuses only bombs.
MAX_RATIO = 16
SLACK_BYTES = 16 << 20
_FILTERS = {h5py.h5z.FILTER_DEFLATE: "deflate", h5py.h5z.FILTER_SHUFFLE: "shuffle",
            h5py.h5z.FILTER_FLETCHER32: "fletcher32"}


# ---- writing -------------------------------------------------------------------------------

def write(path, members, tensors, attrs=None, overwrite=True, what="save"):
    """Writes the archive at `path` atomically. `members` maps names to bytes (small: JSON or
    a pickle); `tensors` lists (dataset name, Tensor or numpy array) for TENSORS, and `attrs`
    its root attributes."""
    with atomic_output(path, overwrite, what) as tmp:
        regions = []  # (file offset, bytes, CRC-32) of the datasets' raw data
        with h5py.File(tmp, "w", userblock_size=_USERBLOCK, libver=_LIBVER) as h5:
            for k, v in (attrs or {}).items():
                h5.attrs[k] = v
            for name, value in tensors:
                arr = host_array(value)
                ds = _create_dataset(h5, name, arr)
                if arr.nbytes >= _CRC_IN_MEMORY:
                    regions.append((ds.get_offset(), arr.nbytes, _core.crc32(arr)))
        zip_around_hdf5(tmp, members, regions)


def zip_around_hdf5(path, members, regions=()):
    """Turns the HDF5 file at `path` (made with a 512-byte user block) into the archive: its
    zip header into the user block, the `members` after it, the zip directory at the end.
    `regions` are (offset, size, CRC-32) of dataset bytes whose checksum is known."""
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END) - _USERBLOCK
        crc = _member_crc(f, _USERBLOCK, size, regions)
        f.seek(0)
        entries = [(TENSORS, 0, crc, size)]
        f.write(_local_header(TENSORS, crc, size, pad_to=_USERBLOCK))
        f.seek(_USERBLOCK + size)
        for name, data in members.items():
            offset, crc = f.tell(), _core.crc32(data)
            f.write(_local_header(name, crc, len(data)))
            f.write(data)
            entries.append((name, offset, crc, len(data)))
        _write_directory(f, entries)


_LINKS = h5py.h5p.create(h5py.h5p.LINK_CREATE)
_LINKS.set_create_intermediate_group(True)  # "states/conv1.W" makes the group "states"


def _create_dataset(h5, name, arr):
    """One dataset written from arr's memory, through h5py's low-level API (its high-level
    create_dataset costs ~100 us of Python per call, which a small model's save notices)."""
    space = h5py.h5s.create_simple(arr.shape) if arr.ndim else h5py.h5s.create(h5py.h5s.SCALAR)
    dsid = h5py.h5d.create(h5.id, name.encode(), h5py.h5t.py_create(arr.dtype, logical=True),
                           space, lcpl=_LINKS)
    if arr.size:
        dsid.write(h5py.h5s.ALL, h5py.h5s.ALL, arr)
    return dsid


def host_array(v):
    """What a dataset is written from: a CPU tensor's own memory when it is contiguous, else
    a copy of that one tensor (GPU tensors, views; bfloat16 as float32, which holds it
    exactly)."""
    if isinstance(v, (np.ndarray, np.generic)):
        return np.asarray(v, order="C")  # keeps 0-d (ascontiguousarray makes 1-d)
    if v.dtype is _dt.bfloat16:
        v = v.astype(_dt.float32)
    arr = v.numpy() if v.device.kind == "cpu" else np.asarray(v.cpu().numpy())
    return np.asarray(arr, order="C")


def _member_crc(f, start, size, regions):
    """The CRC-32 of the member's `size` bytes from `start`. The regions whose CRC is already
    known (the tensors', computed from memory as they were written) are combined in rather
    than read back; only the HDF5 metadata between them is read from the file."""
    regions = sorted(r for r in regions if r[0] is not None)
    pos, crc = start, 0
    for offset, n, region_crc in regions:
        if offset < pos or offset + n > start + size:  # not the layout expected: read it all
            return _file_crc(f, start, size)
        crc = _file_crc(f, pos, offset - pos, crc)
        crc = _core.crc32_combine(crc, region_crc, n)
        pos = offset + n
    return _file_crc(f, pos, start + size - pos, crc)


def _file_crc(f, start, size, crc=0, chunk=1 << 20):
    """CRC-32 of `size` bytes of file f from `start`, read through one small buffer."""
    buf = bytearray(min(chunk, max(size, 1)))
    view = memoryview(buf)
    f.seek(start)
    while size > 0:
        n = f.readinto(view[:min(size, len(buf))])
        if not n:
            raise EOFError("the file ended early")
        crc = _core.crc32(view[:n], crc)
        size -= n
    return crc


def _local_header(name, crc, size, pad_to=None):
    raw = name.encode("ascii")
    extra = b""
    if size >= _ZIP64_LIMIT:
        extra = struct.pack("<HHQQ", 1, 16, size, size)
    fixed = 30 + len(raw)
    if pad_to is not None:
        pad = pad_to - fixed - len(extra)
        extra += struct.pack("<HH", _PAD_ID, pad - 4) + bytes(pad - 4)
    small = min(size, _ZIP64_LIMIT)
    head = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45 if size >= _ZIP64_LIMIT else 20, 0, 0,
                       0, _DOS_DATE, crc, small, small, len(raw), len(extra))
    return head + raw + extra


def _write_directory(f, entries):
    start = f.tell()
    for name, offset, crc, size in entries:
        raw = name.encode("ascii")
        big = [v for v in (size, size) if v >= _ZIP64_LIMIT]
        if offset >= _ZIP64_LIMIT:
            big.append(offset)
        extra = struct.pack("<HH", 1, 8 * len(big)) + struct.pack(f"<{len(big)}Q", *big) \
            if big else b""
        f.write(struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, (3 << 8) | 45,
                            45 if extra else 20, 0, 0, 0, _DOS_DATE, crc,
                            min(size, _ZIP64_LIMIT), min(size, _ZIP64_LIMIT), len(raw),
                            len(extra), 0, 0, 0, 0o100644 << 16, min(offset, _ZIP64_LIMIT)))
        f.write(raw + extra)
    end = f.tell()
    n, dir_size = len(entries), end - start
    if start >= _ZIP64_LIMIT:  # zip64 end of central directory record, and its locator
        f.write(struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, n, n, dir_size,
                            start))
        f.write(struct.pack("<IIQI", 0x07064B50, 0, end, 1))
    f.write(struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, n, n, dir_size,
                        min(start, _ZIP64_LIMIT), 0))


# ---- reading -------------------------------------------------------------------------------

class Reader:
    """An open archive: ``names``, ``read(name)`` (CRC-checked bytes), ``json(name)``, and
    ``tensors()`` (the HDF5 file, CRC-checked). Use it in a with block."""

    def __init__(self, path, what="load"):
        self.path = os.fspath(path)
        self.what = what
        self._h5 = None
        self._h5_size = None  # the bytes the HDF5 file has (its member's size)
        self._links = None    # {path: link type} of TENSORS' soft and external links
        if not os.path.exists(self.path):
            raise errors.CheckpointError(f"{what}: {self.path}: no such file")
        if os.path.isdir(self.path):
            raise errors.CheckpointError(f"{what}: {self.path} is a folder, not a checkpoint")
        try:
            self.zip = zipfile.ZipFile(self.path)
        except zipfile.BadZipFile as e:
            raise self.error(f"not a zip archive, or truncated ({e})") from None
        except OSError as e:
            raise self.error(f"cannot be read ({e})") from None
        self.infos = {}
        for info in self.zip.infolist():
            name = info.filename
            if name.startswith(("/", "\\")) or "\\" in name or ":" in name or \
                    ".." in name.split("/"):
                self.zip.close()
                raise self.error(f"the member {name!r} points outside the archive's folder; "
                                 f"refusing the file")
            if name in self.infos:
                self.zip.close()
                raise self.error(f"the member {name!r} appears twice")
            self.infos[name] = info
        self.names = set(self.infos)
        size = os.path.getsize(self.path)
        for name, info in self.infos.items():
            problem = None
            if info.compress_size > size:
                problem = f"claims {info.compress_size} compressed bytes in a {size}-byte file"
            elif info.file_size > MAX_RATIO * info.compress_size + SLACK_BYTES:
                problem = (f"claims to expand {info.compress_size} bytes to {info.file_size} "
                           f"(more than {MAX_RATIO}:1 beyond {SLACK_BYTES >> 20} MiB: a zip "
                           f"bomb, or a re-zip with extreme compression; store it uncompressed, "
                           f"zip -0)")
            if problem:
                self.zip.close()
                raise self.error(f"the member {name!r} {problem}")

    def error(self, problem):
        return errors.CheckpointError(f"{self.what}: {self.path}: {problem}")

    def require(self, *names):
        missing = [n for n in names if n not in self.names]
        if missing:
            raise self.error(f"the member(s) {missing} are missing (it has {sorted(self.names)})")

    def read(self, name):
        self.require(name)
        try:
            return self.zip.read(name)
        except (zipfile.BadZipFile, zlib.error, OSError, EOFError, ValueError,
                NotImplementedError, RuntimeError) as e:  # CRC mismatch, bad deflate data,
            # an unknown method, an "encrypted" flag
            raise self.error(f"the member {name} is corrupted ({e})") from None

    def json(self, name):
        try:
            value = json.loads(self.read(name))
        except (UnicodeDecodeError, json.JSONDecodeError, RecursionError, ValueError) as e:
            raise self.error(f"{name} is not valid JSON ({e})") from None
        if not isinstance(value, dict):
            raise self.error(f"{name} holds a {type(value).__name__}, not an object")
        return value

    def tensors(self):
        """The HDF5 tensor file, opened in place when the member lies where hl's writer puts
        it, else read into memory."""
        if self._h5 is None:
            self.require(TENSORS)
            info = self.infos[TENSORS]
            try:
                if self._data_offset(info) == _USERBLOCK and \
                        info.compress_type == zipfile.ZIP_STORED:
                    self._h5 = self._open_in_place(info)
                else:
                    data = self.read(TENSORS)
                    self._h5_size = len(data)
                    self._h5 = h5py.File(io.BytesIO(data), "r")
            except (OSError, ValueError, RuntimeError) as e:
                raise self.error(f"{TENSORS} is not a readable HDF5 file ({e})") from None
        return self._h5

    def dataset(self, name):
        """The dataset `name` of TENSORS (a light handle: shape, dtype, read_direct)."""
        h5 = self.tensors()
        if not isinstance(name, str) or not name:
            raise self.error(f"{TENSORS} has no dataset {name!r:.100}")
        parts = name.strip("/").split("/")
        try:
            if self._links is None:  # every link that is not hard, found in one pass
                self._links = {}
                h5.id.links.visit(self._note_link, info=True)
            for i in range(len(parts)):  # every step a hard link: no soft or external ones
                step = "/".join(parts[:i + 1])
                kind = self._links.get(step)
                if kind is not None:
                    raise self.error(f"{TENSORS}: {step} is a "
                                     f"{'soft' if kind == h5py.h5l.TYPE_SOFT else 'external'} "
                                     f"link; hl archives hold datasets only")
            dsid = h5py.h5d.open(h5.id, name.encode())
        except (KeyError, ValueError, OSError, RuntimeError, UnicodeError):
            raise self.error(f"{TENSORS} has no dataset {name!r:.100}") from None
        return Dataset(*checked_dataset(dsid, self._h5_size, self.error, name))

    def _note_link(self, name, info):
        if info.type != h5py.h5l.TYPE_HARD:
            self._links[name.decode("utf-8", "replace")] = info.type

    def _data_offset(self, info):
        with open(self.path, "rb") as f:
            f.seek(info.header_offset)
            head = f.read(30)
        if len(head) < 30 or head[:4] != b"PK\x03\x04":
            raise self.error(f"the local header of {info.filename} is damaged")
        name_len, extra_len = struct.unpack("<HH", head[26:30])
        return info.header_offset + 30 + name_len + extra_len

    def _open_in_place(self, info):
        end = _USERBLOCK + info.file_size
        if os.path.getsize(self.path) < end or info.compress_size != info.file_size:
            raise self.error(f"{TENSORS} is truncated")
        with open(self.path, "rb") as f, \
                mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            view = memoryview(m)[_USERBLOCK:end]
            try:
                crc = _core.crc32(view)
            finally:
                view.release()
        if crc != info.CRC:
            raise self.error(f"{TENSORS} is corrupted (its CRC-32 is {crc:08x}, the zip "
                             f"directory says {info.CRC:08x})")
        self._h5_size = end
        h5 = h5py.File(self.path, "r")
        if h5.userblock_size != _USERBLOCK:  # HDF5 found its superblock somewhere else
            h5.close()
            raise self.error(f"{TENSORS} does not start where its zip header says")
        return h5

    def close(self):
        if self._h5 is not None:
            self._h5.close()
            self._h5 = None
        self.zip.close()

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb):
        self.close()
        if exc is not None and isinstance(exc, Exception) and \
                not isinstance(exc, errors.HLError):
            # the checks above cover what is known; whatever else a hostile file provokes
            # still reaches the caller as a CheckpointError naming the file
            raise self.error(f"the file is damaged or hostile ({type(exc).__name__}: "
                             f"{str(exc)[:200]})") from None


def checked_dataset(dsid, file_size, error, name):
    """(dsid, shape, dtype) for an h5py DatasetID once it is known safe to read: stored in
    the file, no external storage or virtual layout, known filters only, numeric, and no bigger
    than its stored bytes allow. Raises error(...) otherwise, having read none of its data."""
    try:
        dtype, shape = dsid.dtype, dsid.shape or ()
        if dtype.kind in "biuf" and dtype.fields is None and dtype.subdtype is None:
            # The common case, cheaply: a contiguous dataset with an address in this file
            # and all its bytes there. (External storage, virtual and compact datasets, and
            # chunked ones, which alone take filters, have no such address.)
            nbytes = dtype.itemsize
            for s in shape:
                nbytes *= int(s)
            offset = dsid.get_offset()
            if nbytes and offset is not None and dsid.get_storage_size() == nbytes and \
                    (file_size is None or offset + nbytes <= file_size):
                return dsid, shape, dtype
        dcpl = dsid.get_create_plist()
        layout = dcpl.get_layout()
        if layout == h5py.h5d.VIRTUAL or layout not in (h5py.h5d.CONTIGUOUS, h5py.h5d.CHUNKED):
            kind = "virtual" if layout == h5py.h5d.VIRTUAL else "compact"
            raise error(f"the dataset {name} is {kind}; "
                        f"hl reads only contiguous or chunked datasets stored in the file")
        if dcpl.get_external_count():
            raise error(f"the dataset {name} keeps its data in external files; refused")
        nfilters = dcpl.get_nfilters()
        filters = [dcpl.get_filter(i)[0] for i in range(nfilters)] if nfilters else []
        unknown = [f for f in filters if f not in _FILTERS]
        if unknown:
            raise error(f"the dataset {name} uses the HDF5 filter(s) {unknown}; hl reads "
                        f"{sorted(_FILTERS.values())} only")
        if dtype.kind not in "biuf" or dtype.fields is not None or dtype.subdtype is not None:
            raise error(f"the dataset {name} holds {dtype}, not numbers")
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= int(s)
        stored = dsid.get_storage_size()
        if nbytes == 0:
            return dsid, shape, dtype
        if layout == h5py.h5d.CONTIGUOUS:
            offset = dsid.get_offset()
            if stored != nbytes or offset is None or \
                    (file_size is not None and offset + nbytes > file_size):
                raise error(f"the dataset {name} is {nbytes} bytes ({dtype}{list(shape)}) but "
                            f"the file stores {stored} for it")
        else:
            chunk = dcpl.get_chunk()
            want = 1
            for s, c in zip(shape, chunk):
                want *= -(-int(s) // int(c))
            if dsid.get_num_chunks() != want or \
                    (not filters and stored < nbytes) or \
                    nbytes > MAX_RATIO * stored + SLACK_BYTES or \
                    (file_size is not None and stored > file_size):
                raise error(f"the dataset {name} is {nbytes} bytes ({dtype}{list(shape)}) but "
                            f"the file stores {stored} for it in {dsid.get_num_chunks()} of "
                            f"its {want} chunks")
        return dsid, shape, dtype
    except errors.HLError:
        raise
    except (ValueError, TypeError, OSError, RuntimeError, KeyError) as e:
        raise error(f"the dataset {name} cannot be inspected ({e})") from None


class Dataset:
    """An HDF5 dataset through h5py's low-level API: h5py's high-level Dataset costs tens of
    microseconds per attribute, which adds up over a model's hundred states."""

    def __init__(self, dsid, shape=None, dtype=None):
        self.id = dsid
        self.shape = dsid.shape if shape is None else shape
        self.dtype = dsid.dtype if dtype is None else dtype

    def read_direct(self, out):
        """Reads everything into the C-contiguous array `out` (converting the dtype)."""
        self.id.read(h5py.h5s.ALL, h5py.h5s.ALL, out)

    def __getitem__(self, key):  # ds[()]: the whole dataset as a new array
        if key != ():
            raise KeyError(key)
        out = np.empty(self.shape, self.dtype)
        if out.size:
            self.read_direct(out)
        return out
