"""MNIST's IDX files: a reader that checks what it reads, and the four-file MNIST folder.

An IDX file is a 4-byte magic number (two zero bytes, a type code, the number of
dimensions), one big-endian uint32 per dimension, then the values, big-endian, row-major.
Files may be gzipped (recognised by their content, whatever their name).
"""
import gzip
import os
import zlib

import numpy as np

from .. import errors

_TYPES = {0x08: np.dtype(">u1"), 0x09: np.dtype(">i1"), 0x0B: np.dtype(">i2"),
          0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"), 0x0E: np.dtype(">f8")}

_MNIST = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
          "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def _read_bytes(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (EOFError, OSError, zlib.error) as e:
            raise errors.ValueError(f"{path}: truncated or corrupt gzip data ({e})") from None
    return data


def read_idx(path):
    """The array stored in an IDX file (gzipped or not), in the native byte order.
    A wrong magic number, a type code IDX does not define, or a size that does not match
    the header raises hl.errors.ValueError naming the file and what was wrong."""
    data = _read_bytes(path)
    if len(data) < 4:
        raise errors.ValueError(f"{path}: {len(data)} bytes, too short for an IDX header "
                                f"(4 bytes of magic number)")
    if data[0] != 0 or data[1] != 0 or data[2] not in _TYPES:
        raise errors.ValueError(f"{path}: not an IDX file (magic number 0x{data[:4].hex()}; "
                                f"expected 0x0000 then a type code in "
                                f"{[hex(t) for t in _TYPES]} and the number of dimensions)")
    dtype, ndim = _TYPES[data[2]], data[3]
    header = 4 + 4 * ndim
    if ndim == 0:
        raise errors.ValueError(f"{path}: the IDX header declares 0 dimensions")
    if len(data) < header:
        raise errors.ValueError(f"{path}: truncated header: {ndim} dimensions need {header} "
                                f"bytes, the file has {len(data)}")
    shape = tuple(int(d) for d in np.frombuffer(data, ">u4", ndim, 4))
    expected = header + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
    if len(data) < expected:
        raise errors.ValueError(f"{path}: truncated: shape {shape} of {dtype.str[1:]} needs "
                                f"{expected} bytes, the file has {len(data)}")
    if len(data) > expected:
        raise errors.ValueError(f"{path}: {len(data) - expected} bytes after the data of "
                                f"shape {shape} (expected {expected} bytes in all)")
    arr = np.frombuffer(data, dtype, offset=header).reshape(shape)
    return arr.astype(dtype.newbyteorder("="))


def _find(folder, name):
    """The file for one of MNIST's names: as named, gzipped, or with '-idx' written '.idx'
    as some mirrors do (train-images.idx3-ubyte)."""
    dotted = name.replace("-idx", ".idx")
    tried = []
    for base in (name, dotted):
        for candidate in (base, base + ".gz"):
            path = os.path.join(folder, candidate)
            tried.append(candidate)
            if os.path.isfile(path):
                return path
    raise FileNotFoundError(f"mnist: no {name} in {folder} (looked for {', '.join(tried)})")


def _expect(path, arr, magic_ndim, what):
    if arr.dtype != np.uint8 or arr.ndim != magic_ndim:
        raise errors.ValueError(
            f"{path}: expected MNIST {what} (unsigned bytes, {magic_ndim} dimensions, magic "
            f"number {0x800 + magic_ndim}), found {arr.dtype} with shape {arr.shape}")


def _load_pair(folder, part, flat):
    images_path, labels_path = (_find(folder, n) for n in _MNIST[part])
    images, labels = read_idx(images_path), read_idx(labels_path)
    _expect(images_path, images, 3, "images")
    _expect(labels_path, labels, 1, "labels")
    if len(images) != len(labels):
        raise errors.ValueError(f"{images_path} holds {len(images)} images but {labels_path} "
                                f"{len(labels)} labels")
    x = images.astype(np.float32) / np.float32(255.0)
    x = x.reshape(len(x), -1) if flat else x[:, None]
    return x, labels.astype(np.int64)


def mnist(path, flat=False):
    """MNIST from a folder holding the four IDX files (train-images-idx3-ubyte,
    train-labels-idx1-ubyte, t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte, each gzipped or
    not). Returns ``(x_train, y_train), (x_test, y_test)`` as hl.data.digits does: x float32
    in [0, 1] (pixel / 255) shaped (n, 1, 28, 28), or (n, 784) with ``flat=True``; y int64.
    The split is MNIST's own (60000 / 10000). Files that are not what they should be raise
    hl.errors.ValueError naming the file and the problem."""
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise FileNotFoundError(f"mnist: {path} is not a folder")
    return _load_pair(path, "train", flat), _load_pair(path, "test", flat)
