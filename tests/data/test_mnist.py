"""The IDX reader and hl.data.mnist, on small IDX files written here (gzipped and plain),
and the errors for wrong or truncated files."""
import gzip
import struct

import numpy as np
import pytest

import hl

NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
         "test": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def idx_bytes(arr, type_code=0x08):
    """An IDX file's bytes, written from the format's definition."""
    header = struct.pack(">BBBB", 0, 0, type_code, arr.ndim)
    header += b"".join(struct.pack(">I", d) for d in arr.shape)
    big = arr.astype(arr.dtype.newbyteorder(">"))
    return header + big.tobytes()


def write(path, data, gz):
    if gz:
        path = path.with_name(path.name + ".gz")
        data = gzip.compress(data)
    path.write_bytes(data)
    return path


def make_mnist(folder, rng, gz, n_train=12, n_test=5, rows=28, cols=28):
    parts = {}
    for part, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, (n, rows, cols), dtype=np.uint8)
        labels = rng.integers(0, 10, n, dtype=np.uint8)
        img_name, lab_name = NAMES[part]
        write(folder / img_name, idx_bytes(images), gz)
        write(folder / lab_name, idx_bytes(labels), gz)
        parts[part] = images, labels
    return parts


@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_mnist_reads_what_was_written(tmp_path, rng, gz):
    parts = make_mnist(tmp_path, rng, gz)
    (xtr, ytr), (xte, yte) = hl.data.mnist(tmp_path)
    for (x, y), part in (((xtr, ytr), "train"), ((xte, yte), "test")):
        images, labels = parts[part]
        assert x.shape == (len(images), 1, 28, 28) and x.dtype == np.float32
        assert y.dtype == np.int64
        np.testing.assert_array_equal(x[:, 0], images.astype(np.float32) / np.float32(255))
        np.testing.assert_array_equal(y, labels)
    (xf, _), _ = hl.data.mnist(str(tmp_path), flat=True)
    assert xf.shape == (12, 784)


def test_mnist_mixed_compression_and_dotted_names(tmp_path, rng):
    images = rng.integers(0, 256, (3, 28, 28), dtype=np.uint8)
    labels = np.array([1, 2, 3], np.uint8)
    write(tmp_path / "train-images.idx3-ubyte", idx_bytes(images), gz=True)
    write(tmp_path / "train-labels.idx1-ubyte", idx_bytes(labels), gz=False)
    write(tmp_path / "t10k-images-idx3-ubyte", idx_bytes(images), gz=False)
    write(tmp_path / "t10k-labels-idx1-ubyte", idx_bytes(labels), gz=True)
    (xtr, ytr), (xte, yte) = hl.data.mnist(tmp_path)
    np.testing.assert_array_equal(ytr, [1, 2, 3])
    np.testing.assert_array_equal(xtr, xte)


@pytest.mark.parametrize("arr,code", [
    (np.arange(24, dtype=np.uint8).reshape(2, 3, 4), 0x08),
    (np.array([-3, 0, 7], np.int8), 0x09),
    (np.array([[-300, 2], [5, 30000]], np.int16), 0x0B),
    (np.array([-70000, 1, 2 ** 31 - 1], np.int32), 0x0C),
    (np.array([1.5, -2.25, 3e-5], np.float32), 0x0D),
    (np.array([[1e300, -1e-300]], np.float64), 0x0E),
])
def test_read_idx_every_type(tmp_path, arr, code):
    path = write(tmp_path / "a.idx", idx_bytes(arr, code), gz=False)
    out = hl.data.read_idx(path)
    assert out.dtype == arr.dtype and out.dtype.isnative
    np.testing.assert_array_equal(out, arr)


def _valid_images(rng):
    return idx_bytes(rng.integers(0, 256, (4, 28, 28), dtype=np.uint8))


@pytest.mark.parametrize("mangle,message", [
    (lambda b: b[:-10], r"truncated: shape \(4, 28, 28\) of u1 needs 3152 bytes, the file has "
                        r"3142"),
    (lambda b: b[:9], r"truncated header: 3 dimensions need 16 bytes, the file has 9"),
    (lambda b: b[:2], r"2 bytes, too short"),
    (lambda b: b + b"\0\0\0", r"3 bytes after the data"),
    (lambda b: b"\x01" + b[1:], r"not an IDX file \(magic number 0x01000803"),
    (lambda b: b[:2] + b"\x07" + b[3:], r"not an IDX file \(magic number 0x00000703"),
    (lambda b: b[:3] + b"\x00" + b[4:], r"declares 0 dimensions"),
])
@pytest.mark.parametrize("gz", [False, True], ids=["plain", "gzip"])
def test_wrong_image_files_name_the_file_and_the_problem(tmp_path, rng, gz, mangle, message):
    make_mnist(tmp_path, rng, gz=False)
    bad = write(tmp_path / "train-images-idx3-ubyte", mangle(_valid_images(rng)), gz=False)
    if gz:
        bad.unlink()
        bad = write(tmp_path / "train-images-idx3-ubyte", mangle(_valid_images(rng)), gz=True)
    with pytest.raises(hl.errors.ValueError, match=message) as e:
        hl.data.mnist(tmp_path)
    assert str(bad) in str(e.value)


def test_truncated_gzip_stream(tmp_path, rng):
    make_mnist(tmp_path, rng, gz=False)
    (tmp_path / "t10k-labels-idx1-ubyte").unlink()
    data = gzip.compress(idx_bytes(np.arange(5, dtype=np.uint8)))
    bad = tmp_path / "t10k-labels-idx1-ubyte.gz"
    bad.write_bytes(data[:-12])
    with pytest.raises(hl.errors.ValueError, match="truncated or corrupt gzip") as e:
        hl.data.mnist(tmp_path)
    assert str(bad) in str(e.value)


def test_mnist_content_errors(tmp_path, rng):
    make_mnist(tmp_path, rng, gz=False)
    labels = tmp_path / "train-labels-idx1-ubyte"
    labels.write_bytes(idx_bytes(np.zeros(11, np.uint8)))  # 12 images, 11 labels
    with pytest.raises(hl.errors.ValueError, match=r"12 images but .*train-labels.* 11 labels"):
        hl.data.mnist(tmp_path)
    labels.write_bytes(idx_bytes(np.zeros((12, 1), np.uint8)))  # labels with 2 dimensions
    with pytest.raises(hl.errors.ValueError, match=r"expected MNIST labels .*magic number "
                                                   r"2049.*shape \(12, 1\)"):
        hl.data.mnist(tmp_path)
    images = tmp_path / "train-images-idx3-ubyte"
    images.write_bytes(idx_bytes(np.zeros((12, 28, 28), np.float32), 0x0D))  # not bytes
    with pytest.raises(hl.errors.ValueError, match="expected MNIST images .*float32"):
        hl.data.mnist(tmp_path)


def test_missing_files(tmp_path, rng):
    with pytest.raises(FileNotFoundError, match="not a folder"):
        hl.data.mnist(tmp_path / "nowhere")
    make_mnist(tmp_path, rng, gz=True)
    (tmp_path / "t10k-images-idx3-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError, match=r"no t10k-images-idx3-ubyte .*looked for "
                                                r"t10k-images-idx3-ubyte, t10k-images-idx3-"
                                                r"ubyte.gz, t10k-images.idx3-ubyte"):
        hl.data.mnist(tmp_path)
