"""The shipped data sets: shapes, dtypes, value ranges, the fixed split, standardisation,
upsampling (against numpy and PyTorch), and that the files are declared as package data."""
import fnmatch
import gzip
import hashlib
import os
import tomllib

import numpy as np
import pytest

import hl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DATA = os.path.join(ROOT, "src", "hl", "data")


def _digest(*arrays):
    h = hashlib.sha256()
    for a in arrays:
        h.update(np.ascontiguousarray(a).tobytes())
    return h.hexdigest()[:16]


def test_digits_shapes_ranges_and_stratified_split():
    (xtr, ytr), (xte, yte) = hl.data.digits()
    assert xtr.shape == (1438, 1, 8, 8) and xte.shape == (359, 1, 8, 8)
    assert xtr.dtype == np.float32 and ytr.dtype == np.int64
    assert xtr.min() == 0.0 and xtr.max() == 1.0
    assert np.all(np.isin(np.round(xtr * 16), np.arange(17)))  # pixel / 16 exactly
    counts_all = np.bincount(np.concatenate([ytr, yte]), minlength=10)
    np.testing.assert_array_equal(np.bincount(yte, minlength=10), np.round(0.2 * counts_all))


def test_digits_matches_the_file_and_split_is_disjoint():
    with gzip.open(os.path.join(DATA, "digits.csv.gz"), "rt") as f:
        table = np.loadtxt(f, delimiter=",")
    x_all, y_all = hl.data.digits(split="all", flat=True)
    np.testing.assert_array_equal(x_all * 16, table[:, :-1])
    np.testing.assert_array_equal(y_all, table[:, -1])
    (xtr, ytr), (xte, yte) = hl.data.digits(flat=True)
    rows = {r.tobytes(): i for i, r in enumerate(x_all)}
    train_rows = [rows[r.tobytes()] for r in xtr]
    assert len(xtr) + len(xte) == len(x_all)
    # every training image is one of the file's rows, and in file order
    assert train_rows == sorted(train_rows)


def test_digits_split_is_fixed():
    """The split is part of hl's contract (results in docs compare across versions): these
    digests pin the exact test rows."""
    _, (xte, yte) = hl.data.digits()
    assert _digest(xte, yte) == _digest(*hl.data.digits(split="test"))
    assert _digest(yte) == "54da26d2aae809db"
    _, (_, dy_te) = hl.data.diabetes()
    assert _digest(dy_te) == "49efc2bdf58316ab"


def test_digits_flat_and_split_options():
    (xtr, _), _ = hl.data.digits(flat=True)
    assert xtr.shape == (1438, 64)
    x, y = hl.data.digits(split="train")
    np.testing.assert_array_equal(x.reshape(len(x), -1), xtr)
    with pytest.raises(hl.errors.ValueError, match="split"):
        hl.data.digits(split="validation")


def test_returned_arrays_are_fresh():
    x, _ = hl.data.digits(split="train")
    x[:] = -1
    assert hl.data.digits(split="train")[0].min() == 0.0


def _bilinear_half_pixel(img, size):
    """Reference: separable linear interpolation with half-pixel centres, clamped at the
    edges (PyTorch's bilinear, align_corners=False)."""
    def weights(n_in, n_out):
        src = np.maximum((np.arange(n_out) + 0.5) * n_in / n_out - 0.5, 0.0)
        i0 = np.minimum(np.floor(src).astype(int), n_in - 1)
        i1 = np.minimum(i0 + 1, n_in - 1)
        w = src - i0
        m = np.zeros((n_out, n_in))
        m[np.arange(n_out), i0] += 1 - w
        m[np.arange(n_out), i1] += w
        return m
    wh, ww = weights(img.shape[-2], size), weights(img.shape[-1], size)
    return np.einsum("ph,nchw,qw->ncpq", wh, img.astype(np.float64), ww)


def test_digits_upsample_is_bilinear_half_pixel():
    (x8, y8), _ = hl.data.digits()
    (x28, y28), (xt28, _) = hl.data.digits(upsample=28)
    assert x28.shape == (1438, 1, 28, 28) and xt28.shape == (359, 1, 28, 28)
    assert x28.dtype == np.float32 and 0.0 <= x28.min() and x28.max() <= 1.0
    np.testing.assert_array_equal(y28, y8)
    np.testing.assert_allclose(x28[:50], _bilinear_half_pixel(x8[:50], 28), rtol=0, atol=1e-6)
    assert hl.data.digits(upsample=(28, 28), flat=True)[0][0].shape == (1438, 784)
    np.testing.assert_array_equal(hl.data.digits(size=28, split="test")[0], xt28)  # alias
    np.testing.assert_array_equal(hl.data.digits(size=8, split="test")[0],
                                  hl.data.digits(split="test")[0])
    with pytest.raises(hl.errors.ValueError, match="upsample"):
        hl.data.digits(upsample=(0, 28))


def test_digits_upsample_matches_torch_interpolate():
    torch = pytest.importorskip("torch")
    (x8, _), _ = hl.data.digits()
    (x28, _), _ = hl.data.digits(upsample=28)
    ref = torch.nn.functional.interpolate(torch.tensor(x8[:100]), size=(28, 28),
                                          mode="bilinear", align_corners=False)
    np.testing.assert_allclose(x28[:100], ref.numpy(), rtol=0, atol=1e-6)


def test_diabetes_shapes_and_file_values():
    (xtr, ytr), (xte, yte) = hl.data.diabetes()
    assert xtr.shape == (354, 10) and xte.shape == (88, 10)
    assert ytr.shape == (354,) and yte.shape == (88,)
    assert xtr.dtype == ytr.dtype == np.float32
    with gzip.open(os.path.join(DATA, "diabetes_data_raw.csv.gz"), "rt") as f:
        raw = np.loadtxt(f)
    with gzip.open(os.path.join(DATA, "diabetes_target.csv.gz"), "rt") as f:
        target = np.loadtxt(f)
    x_all, y_all = hl.data.diabetes(split="all")
    np.testing.assert_allclose(x_all, raw.astype(np.float32))
    np.testing.assert_allclose(y_all, target.astype(np.float32))


def test_diabetes_standardize_uses_training_statistics_only():
    (xtr, ytr), (xte, yte) = hl.data.diabetes()
    (str_, sytr), (ste, syte) = hl.data.diabetes(standardize=True, standardize_target=True)
    np.testing.assert_allclose(str_.mean(axis=0), 0, atol=1e-5)
    np.testing.assert_allclose(str_.std(axis=0), 1, rtol=1e-5)
    mu, sd = xtr.astype(np.float64).mean(axis=0), xtr.astype(np.float64).std(axis=0)
    np.testing.assert_allclose(ste, (xte - mu) / sd, rtol=1e-5, atol=1e-5)
    assert abs(ste.mean()) > 1e-3  # the test side is not re-centred on its own statistics
    np.testing.assert_allclose(syte, (yte - ytr.mean()) / ytr.std(), rtol=1e-5, atol=1e-5)
    (_, y_raw), _ = hl.data.diabetes(standardize=True)
    np.testing.assert_array_equal(y_raw, ytr)  # the target only with standardize_target


def test_data_files_are_package_data():
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        patterns = tomllib.load(f)["tool"]["setuptools"]["package-data"]["hl.data"]
    shipped = [n for n in os.listdir(DATA) if not n.endswith((".py", ".pyc"))
               and n != "__pycache__"]
    assert {"digits.csv.gz", "diabetes_data_raw.csv.gz", "diabetes_target.csv.gz",
            "README.md"} <= set(shipped)
    for name in shipped:
        assert any(fnmatch.fnmatch(name, p) for p in patterns), name
