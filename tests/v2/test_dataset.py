"""hl.v2.dataset: mnist and uci_housing from files written here, digits and diabetes shipped."""
import gzip
import struct

import numpy as np
import pytest

import hl
from hl import errors
from hl.v2 import dataset

# --- mnist --------------------------------------------------------------------------------


def idx_bytes(array):
    """An IDX file of unsigned bytes, built from the spec: two zero bytes, type code 0x08,
    the number of dimensions, one big-endian uint32 per dimension, then the values."""
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    return header + array.astype(np.uint8).tobytes()


def write_mnist(folder, rng, n_train=5, n_test=3, gzipped_test=False):
    parts = {}
    for part, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        images[0, 0, :3] = [0, 255, 51]  # both ends of the scale, and one in between
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        for kind, data in (("images-idx3", images), ("labels-idx1", labels)):
            raw = idx_bytes(data)
            name = f"{prefix}-{kind}-ubyte"
            if gzipped_test and part == "test":
                raw, name = gzip.compress(raw), name + ".gz"
            (folder / name).write_bytes(raw)
        parts[part] = images, labels
    return parts


def test_mnist_samples_are_scaled_images_and_int_labels(tmp_path, rng):
    expected = write_mnist(tmp_path, rng, gzipped_test=True)
    for part in ("train", "test"):
        samples = list(getattr(dataset.mnist, part)(str(tmp_path))())
        images, labels = expected[part]
        assert len(samples) == len(labels)
        for (image, label), raw, raw_label in zip(samples, images, labels):
            assert image.dtype == np.float32 and image.shape == (784,)
            want = raw.reshape(-1).astype(np.float32) / 255 * 2 - 1
            np.testing.assert_allclose(image, want, rtol=0, atol=1e-6)
            assert type(label) is int and label == raw_label
        assert samples[0][0][:3].tolist() == pytest.approx([-1.0, 1.0, 51 / 255 * 2 - 1])


def test_mnist_reads_the_folder_from_the_environment(tmp_path, rng, monkeypatch):
    write_mnist(tmp_path, rng)
    monkeypatch.setenv("HL_MNIST_DIR", str(tmp_path))
    reader = dataset.mnist.test()
    assert len(list(reader())) == 3
    assert len(list(reader())) == 3  # a second pass yields the same


def test_mnist_without_a_folder_names_the_argument_and_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("HL_MNIST_DIR", raising=False)
    with pytest.raises(errors.ValueError, match="HL_MNIST_DIR") as caught:
        dataset.mnist.train()
    assert "path=" in str(caught.value)
    monkeypatch.setenv("HL_MNIST_DIR", str(tmp_path / "missing"))
    with pytest.raises(errors.ValueError, match="not a folder.*HL_MNIST_DIR"):
        dataset.mnist.train()
    with pytest.raises(errors.ValueError, match="train-images-idx3-ubyte.*HL_MNIST_DIR"):
        dataset.mnist.train(tmp_path)  # a folder, but empty


# --- uci_housing --------------------------------------------------------------------------

def write_housing(path, rng, rows=10):
    data = rng.uniform(0, 100, size=(rows, 14)).round(3)
    path.write_text("\n".join(" ".join(f"{v:9.3f}" for v in row) for row in data) + "\n")
    return data


def test_uci_housing_normalises_features_and_splits_80_20(tmp_path, rng):
    path = tmp_path / "housing.data"
    data = write_housing(path, rng)
    features = data[:, :13]
    normed = (features - features.mean(0)) / (features.max(0) - features.min(0))
    train = list(dataset.uci_housing.train(str(path))())
    test = list(dataset.uci_housing.test(path)())
    assert len(train) == 8 and len(test) == 2
    for (x, y), want_x, want_y in zip(train + test, normed, data[:, 13]):
        assert x.dtype == np.float32 and x.shape == (13,)
        assert y.dtype == np.float32 and y.shape == (1,)
        np.testing.assert_allclose(x, want_x, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(y, [want_y], rtol=1e-6)


def test_uci_housing_reads_the_file_from_the_environment(tmp_path, rng, monkeypatch):
    path = tmp_path / "housing.data"
    write_housing(path, rng, rows=5)
    monkeypatch.setenv("HL_UCI_HOUSING", str(path))
    assert len(list(dataset.uci_housing.train()())) == 4


def test_uci_housing_reports_missing_and_malformed_files(tmp_path, rng, monkeypatch):
    monkeypatch.delenv("HL_UCI_HOUSING", raising=False)
    with pytest.raises(errors.ValueError, match="HL_UCI_HOUSING"):
        dataset.uci_housing.train()
    with pytest.raises(errors.ValueError, match="not a file"):
        dataset.uci_housing.train(tmp_path / "nope.data")
    path = tmp_path / "housing.data"
    write_housing(path, rng, rows=3)
    with open(path, "a") as f:
        f.write("1 2 3\n")
    with pytest.raises(errors.ValueError, match="line 4: 3 values, expected 14"):
        dataset.uci_housing.train(path)
    path.write_text(" ".join(["1"] * 13 + ["x"]) + "\n")
    with pytest.raises(errors.ValueError, match="line 1: not all numbers"):
        dataset.uci_housing.train(path)
    path.write_text("\n".join(" ".join(["1"] * 14) for _ in range(3)))
    with pytest.raises(errors.ValueError, match="divides by zero"):
        dataset.uci_housing.train(path)


# --- digits and diabetes, shipped ---------------------------------------------------------

@pytest.mark.parametrize("part", ["train", "test"])
def test_digits_match_hl_data_scaled_to_plus_minus_one(part):
    x, y = hl.data.digits(split=part, flat=True)
    samples = list(getattr(dataset.digits, part)()())
    assert len(samples) == len(y)
    pixels = np.stack([s[0] for s in samples])
    assert pixels.dtype == np.float32 and pixels.shape == (len(y), 64)
    np.testing.assert_allclose(pixels, x * 2 - 1, atol=1e-6)
    assert pixels.min() == -1.0 and pixels.max() == 1.0
    assert [s[1] for s in samples] == y.tolist()
    assert all(type(s[1]) is int for s in samples)


def test_digits_upsampled_to_mnist_size():
    image, label = next(iter(dataset.digits.test(size=28)()))
    assert image.shape == (784,) and image.dtype == np.float32
    assert -1.0 <= image.min() and image.max() <= 1.0


@pytest.mark.parametrize("part", ["train", "test"])
def test_diabetes_matches_hl_data_with_train_statistics(part):
    x, y = hl.data.diabetes(split=part, standardize=True)
    samples = list(getattr(dataset.diabetes, part)()())
    assert len(samples) == len(y)
    for (features, target), want_x, want_y in zip(samples, x, y):
        assert features.dtype == np.float32 and features.shape == (10,)
        assert target.dtype == np.float32 and target.shape == (1,)
        np.testing.assert_array_equal(features, want_x)
        assert target[0] == want_y
    if part == "train":  # standardised with these rows' own statistics
        features = np.stack([s[0] for s in samples])
        np.testing.assert_allclose(features.mean(0), 0, atol=1e-5)
        np.testing.assert_allclose(features.std(0), 1, atol=1e-5)


def test_samples_are_read_only_so_a_pass_cannot_change_the_next():
    image, _ = next(iter(dataset.digits.train()()))
    with pytest.raises(ValueError):
        image[0] = 5.0


def test_v2_data_sets_that_needed_a_download_say_so():
    with pytest.raises(AttributeError, match="never downloads"):
        dataset.cifar
