"""PaddlePaddle v2's parameter tar (``Parameters.to_tar`` / ``from_tar``), read and written
without Paddle or generated protobuf classes, so files from real v2 load and v2 loads ours.

The format, as v2 wrote it (Python 2 on x86):

* a plain tar in GNU format; every member has TarInfo's defaults (mtime 0, mode 0o644, uid and
  gid 0, no owner names). v2 never closed the TarFile, so its files stop after the last
  member's padding, without the two zero blocks that end a tar; Python's tarfile reads them.
  Scripts often wrapped the file in ``gzip.open``, so ``read`` also takes gzip-compressed tars.
* for each parameter, in order, a member ``<name>``: a 16-byte header (version 0, 4 bytes per
  value, element count; ``struct`` "IIQ", native and so little-endian), then the float32
  values in C order; and a member ``<name>.protobuf``: the serialized ``paddle.ParameterConfig``
  (proto2), whose fields other than the ones ``ParamConfig`` keeps (momentum, device,
  initial_strategy...) are skipped when read.

v2's reader keyed parameters by the config's name, in the order of the ``.protobuf`` members,
and shaped the values by ``dims``, or (1, size) when ``dims`` is empty.

``write`` differs from v2 in two ways every tar reader (v2's included) accepts: it closes the
tar, adding the end blocks and padding to 10 KiB, and, being Python 3's tarfile, leaves a regular
member's device-number fields blank where Python 2 wrote zeros.

The one truncation no reader can see is a cut exactly between two parameters: since v2's files
have no end blocks, what is left is a valid v2 file with fewer parameters. Every other cut (in
a header, in values, between a parameter's two members) raises CheckpointError.
"""
import gzip
import io
import math
import os
import struct
import tarfile
import zlib

import numpy as np

from .. import errors
from ..checkpoint.atomic import atomic_output
from .param_config import ParamConfig

WHAT = "v2 parameters"
CONFIG_SUFFIX = ".protobuf"
HEADER = struct.Struct("<IIQ")   # version, bytes per value, element count
VERSION = 0
VALUE_BYTES = 4
_VALUES = np.dtype("<f4")

# --- writing -------------------------------------------------------------------------------------

class _JoinedReader:
    """A read-only file over several buffers, so a parameter's header and values go into the
    tar without first being copied into one bytes object."""

    def __init__(self, *parts):
        self._parts = [memoryview(p).cast("B") for p in parts]

    def read(self, n=-1):
        pieces = []
        while self._parts and n != 0:
            head = self._parts[0]
            piece = head if n < 0 else head[:n]
            pieces.append(piece)
            if len(piece) == len(head):
                self._parts.pop(0)
            else:
                self._parts[0] = head[len(piece):]
            if n > 0:
                n -= len(piece)
        return b"".join(pieces)


def _member(name, size):
    info = tarfile.TarInfo(name)  # TarInfo's defaults (mtime 0, mode 0o644) are v2's too
    info.size = size
    return info


def _checked_entry(index, entry, seen):
    """(config, flat little-endian float32 values) of one entry, or CheckpointError."""
    try:
        config, values = entry
    except (TypeError, ValueError):
        raise errors.CheckpointError(f"{WHAT}: entry {index} must be a (ParamConfig, values) "
                                     f"pair, received {type(entry).__name__}") from None
    if not isinstance(config, ParamConfig):
        raise errors.CheckpointError(f"{WHAT}: entry {index} must start with a ParamConfig, "
                                     f"received {type(config).__name__}")
    where = f"{WHAT}: parameter {config.name!r}"
    if config.name in seen:
        raise errors.CheckpointError(f"{where} appears twice; names must be unique")
    if config.name.endswith(CONFIG_SUFFIX) or "\0" in config.name:
        raise errors.CheckpointError(
            f"{where}: a name ending in {CONFIG_SUFFIX!r} or holding NUL cannot be stored; "
            f"v2's reader would take the member for a config")
    if config.dims and math.prod(config.dims) != config.size:
        raise errors.CheckpointError(
            f"{where}: dims {config.dims} hold {math.prod(config.dims)} values but size is "
            f"{config.size}; v2 could not shape the values")
    try:
        flat = np.ascontiguousarray(values, dtype=_VALUES).reshape(-1)
    except (TypeError, ValueError) as e:
        raise errors.CheckpointError(
            f"{where}: the values cannot be converted to float32 ({e})") from e
    if flat.size != config.size:
        raise errors.CheckpointError(
            f"{where}: {flat.size} values given (shape {np.shape(values)}) but the config's "
            f"size is {config.size}")
    return config, flat


def write(fileobj, entries):
    """Writes a v2 parameter tar to the open binary file `fileobj`. `entries` is an iterable of
    (ParamConfig, values); values (anything numpy converts, any shape) are stored as float32 in
    C order and must hold ``config.size`` numbers. On an error the file holds a partial tar:
    ``save`` to a path never leaves one behind."""
    tar = tarfile.TarFile(fileobj=fileobj, mode="w", format=tarfile.GNU_FORMAT,
                          encoding="utf-8", copybufsize=1 << 20)
    seen = set()
    for index, entry in enumerate(entries):
        config, flat = _checked_entry(index, entry, seen)
        seen.add(config.name)
        header = HEADER.pack(VERSION, VALUE_BYTES, flat.size)
        tar.addfile(_member(config.name, len(header) + flat.nbytes), _JoinedReader(header, flat))
        blob = config.encode()
        tar.addfile(_member(config.name + CONFIG_SUFFIX, len(blob)), io.BytesIO(blob))
    tar.close()  # writes the end-of-tar blocks (v2 did not); leaves fileobj open


def save(path_or_file, entries):
    """``write`` to an open binary file, or to a path atomically: the file is written beside
    the target and renamed over it, so a failure or a crash mid-save leaves the old file."""
    if isinstance(path_or_file, (str, os.PathLike)):
        with atomic_output(path_or_file, what=WHAT) as tmp:
            with open(tmp, "wb") as f:
                write(f, entries)
    else:
        write(path_or_file, entries)


# --- reading -------------------------------------------------------------------------------------

def read(source):
    """Reads a v2 parameter tar (a path, or an open binary file; plain or gzip-compressed) into
    an insertion-ordered dict: name -> (ParamConfig, float32 array shaped by ``config.shape``).
    Every problem raises CheckpointError naming the file and, when known, the parameter."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            f = open(path, "rb")
        except FileNotFoundError:
            raise errors.CheckpointError(f"{WHAT}: {path}: no such file") from None
        except OSError as e:
            raise errors.CheckpointError(f"{WHAT}: {path}: cannot be opened ({e})") from None
        with f:
            return _read(f, path)
    name = getattr(source, "name", None)
    return _read(source, name if isinstance(name, str) else "<file object>")


def _read(f, label):
    def error(problem):
        return errors.CheckpointError(f"{WHAT}: {label}: {problem}")

    try:
        f, end = _seekable(f, error)
        infos = _members(f, end, error)
        pairs = _pair(infos, error)
        params = {}
        for name, (values_info, config_info) in pairs.items():
            where = f"{WHAT}: {label}: parameter {name!r}"
            blob = _member_bytes(f, config_info, end, where)
            config = ParamConfig.decode(blob, f"{where}: member {config_info.name!r}")
            if config.name != name:
                raise errors.CheckpointError(f"{where}: its config names it {config.name!r}")
            params[name] = (config, _values(f, values_info, config, end, where))
    except OSError as e:  # the disk, not the format
        raise error(f"reading failed ({e})") from None
    return params


def _seekable(f, error):
    """(a seekable binary file positioned where the tar starts, the absolute offset where it
    ends). Streams without seek, and gzip-compressed tars, are read into memory."""
    try:
        start = f.tell()
        end = f.seek(0, os.SEEK_END)
        f.seek(start)
        magic = f.read(2)
        f.seek(start)
    except (AttributeError, OSError, ValueError):  # pipes; GzipFile cannot seek from the end
        data = f.read()
        if not isinstance(data, bytes):
            raise error("the file is open in text mode; open it with 'rb'") from None
        f, start, end, magic = io.BytesIO(data), 0, len(data), data[:2]
    if not isinstance(magic, bytes):
        raise error("the file is open in text mode; open it with 'rb'")
    if magic == b"\x1f\x8b":
        try:
            data = gzip.GzipFile(fileobj=f, mode="rb").read()
        except (OSError, EOFError, zlib.error) as e:
            raise error(f"a gzip-compressed file that is truncated or damaged ({e})") from None
        f, start, end = io.BytesIO(data), 0, len(data)
    if end == start:
        raise error("the file is empty")
    return f, end


def _members(f, end, error):
    """The tar's members, checking that nothing but zeros follows the last one: tarfile stops
    quietly at a header cut short or damaged, which is how a cut file looks."""
    try:
        tar = tarfile.TarFile(fileobj=f, mode="r", encoding="utf-8")
    except (tarfile.TarError, EOFError) as e:
        raise error(f"not a tar file, or one damaged or cut short at its start ({e})") from None
    infos = []
    while True:
        try:
            info = tar.next()
        except (tarfile.TarError, EOFError) as e:
            if not infos:
                raise error(f"the tar is truncated or damaged ({e})") from None
            raise error(f"{_describe(infos[-1])} is cut short, or the tar is damaged after "
                        f"it ({e})") from None
        if info is None:
            break
        infos.append(info)
    if infos:
        last = infos[-1]
        stop = last.offset_data + -(-last.size // tarfile.BLOCKSIZE) * tarfile.BLOCKSIZE
        if stop < end:
            f.seek(stop)
            rest = f.read(min(end - stop, tarfile.BLOCKSIZE))
            if rest.strip(b"\0"):
                raise error(f"the {end - stop} bytes after {_describe(last)} are not a tar "
                            f"header: the file is truncated or damaged there")
    return infos


def _describe(info):
    name = info.name
    if name.endswith(CONFIG_SUFFIX):
        name = name[:-len(CONFIG_SUFFIX)]
    return f"parameter {name!r} (member {info.name!r})"


def _pair(infos, error):
    """{name: (values member, config member)} in the order of the config members (v2's)."""
    values, configs = {}, {}
    for info in infos:
        if info.name.endswith(CONFIG_SUFFIX):
            table, name = configs, info.name[:-len(CONFIG_SUFFIX)]
        else:
            table, name = values, info.name
        if not info.isfile() or info.issparse():
            raise error(f"member {info.name!r} of parameter {name!r} is not a plain file")
        if name in table:
            raise error(f"parameter {name!r} appears twice (member {info.name!r})")
        table[name] = info
    for name in values:
        if name not in configs:
            raise error(f"parameter {name!r} has its values but no {name + CONFIG_SUFFIX!r} "
                        f"member: the file is truncated, or not a v2 parameter tar")
    for name in configs:
        if name not in values:
            raise error(f"parameter {name!r} has its config but no {name!r} member with its "
                        f"values: the file is damaged, or not a v2 parameter tar")
    return {name: (values[name], info) for name, info in configs.items()}


def _member_bytes(f, info, end, where, first=None):
    """`first` bytes of a member (all of it by default), after checking they are in the file,
    so a damaged size field cannot make us allocate more than the file holds."""
    n = info.size if first is None else first
    if info.offset_data + n > end:
        raise errors.CheckpointError(f"{where}: member {info.name!r} is cut short: the file "
                                     f"ends before its {info.size} bytes")
    f.seek(info.offset_data)
    data = f.read(n)
    if len(data) != n:
        raise errors.CheckpointError(f"{where}: member {info.name!r} is cut short")
    return data


def _values(f, info, config, end, where):
    if info.size < HEADER.size:
        raise errors.CheckpointError(f"{where}: member {info.name!r} holds {info.size} bytes, "
                                     f"fewer than its {HEADER.size}-byte header")
    version, width, count = HEADER.unpack(_member_bytes(f, info, end, where, HEADER.size))
    if version != VERSION:
        raise errors.CheckpointError(f"{where}: header version {version}; v2 files have "
                                     f"version {VERSION}")
    if width != VALUE_BYTES:
        hint = (" (a big-endian header? v2 files are little-endian)"
                if width == VALUE_BYTES << 24 else "")
        raise errors.CheckpointError(f"{where}: header says {width} bytes per value{hint}; v2 "
                                     f"files hold {VALUE_BYTES}-byte float32 values")
    held = info.size - HEADER.size
    if count * VALUE_BYTES != held:
        problem = "truncated" if count * VALUE_BYTES > held else "with bytes left over"
        raise errors.CheckpointError(f"{where}: header counts {count} values "
                                     f"({count * VALUE_BYTES} bytes) but the member holds "
                                     f"{held} bytes after it ({problem})")
    if count != config.size:
        raise errors.CheckpointError(f"{where}: the member holds {count} values but its config "
                                     f"says size {config.size}")
    if info.offset_data + info.size > end:
        raise errors.CheckpointError(f"{where}: member {info.name!r} is cut short: the file "
                                     f"ends before its {info.size} bytes")
    values = np.empty(count, dtype=_VALUES)
    f.seek(info.offset_data + HEADER.size)
    if _read_into(f, memoryview(values).cast("B")) != held:
        raise errors.CheckpointError(f"{where}: member {info.name!r} is cut short")
    return values.astype(np.float32, copy=False).reshape(config.shape)


def _read_into(f, view):
    """Fills `view` from `f` (raw files may return less per call); returns the bytes read."""
    done = 0
    while done < len(view):
        if hasattr(f, "readinto"):
            n = f.readinto(view[done:])
        else:
            chunk = f.read(min(len(view) - done, 1 << 24))
            n = len(chunk)
            view[done:done + n] = chunk
        if not n:
            break
        done += n
    return done
