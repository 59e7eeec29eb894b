"""The data sets shipped inside the package: handwritten digits and diabetes progression.

Both come with a fixed train/test split (see _split.py): 20% of the rows are test rows,
chosen by a hash of the row number, stratified by class for digits. The same rows every
time, on every machine. The arrays returned are fresh copies: change them freely.
"""
import functools
import gzip
import os

import numpy as np

from .. import errors
from .._tensor import as_tensor
from ..autograd.resize import interpolate
from ._split import select, split_indices

_HERE = os.path.dirname(os.path.abspath(__file__))
TEST_FRACTION = 0.2


def _path(name):
    return os.path.join(_HERE, name)


@functools.lru_cache(maxsize=None)
def _digits_raw():
    with gzip.open(_path("digits.csv.gz"), "rt") as f:
        table = np.loadtxt(f, delimiter=",", dtype=np.int64)
    return table[:, :-1], table[:, -1]


@functools.lru_cache(maxsize=None)
def _diabetes_raw():
    with gzip.open(_path("diabetes_data_raw.csv.gz"), "rt") as f:
        x = np.loadtxt(f, dtype=np.float64)
    with gzip.open(_path("diabetes_target.csv.gz"), "rt") as f:
        y = np.loadtxt(f, dtype=np.float64)
    return x, y


def digits(split=None, flat=False, size=8, upsample=None):
    """UCI's handwritten digits (1797 images of 8x8 pixels, labels 0..9; CC BY 4.0,
    E. Alpaydin and C. Kaynak). Returns ``(x_train, y_train), (x_test, y_test)``: 1438
    training and 359 test images, the test set 20% of each class.

    x is float32 in [0, 1] (pixel / 16) shaped (n, 1, 8, 8), or (n, 64) with ``flat=True``;
    y is int64. ``size=28`` (or ``upsample=28``; also ``(h, w)``) resizes the images to
    28x28 (MNIST's size) by bilinear interpolation with half-pixel centres (hl.interpolate, as
    PyTorch's ``F.interpolate(mode='bilinear', align_corners=False)``); values stay in
    [0, 1].
    ``split='train'``, ``'test'`` or ``'all'`` (file order) returns one ``(x, y)`` pair.
    """
    pixels, labels = _digits_raw()
    x = (pixels.astype(np.float32) / np.float32(16.0)).reshape(-1, 1, 8, 8)
    if upsample is not None:
        size = upsample
    if size not in (8, (8, 8)):
        x = _upsample(x, size)
    if flat:
        x = x.reshape(len(x), -1)
    y = labels.copy()
    train, test = split_indices(len(y), TEST_FRACTION, labels)
    return select(split, (x[train], y[train]), (x[test], y[test]), (x, y))


def _upsample(x, size):
    if isinstance(size, int):
        size = (size, size)
    size = tuple(int(s) for s in size)
    if len(size) != 2 or min(size) < 1:
        raise errors.ValueError(f"digits: size (upsample) must be a size such as 28 or "
                                f"(28, 28), got {size!r}")
    return interpolate(as_tensor(x), size=size, mode="bilinear").numpy().copy()


def diabetes(split=None, standardize=False, standardize_target=False):
    """Diabetes progression (442 patients; Efron, Hastie, Johnstone and Tibshirani, "Least
    Angle Regression", 2004): ten baseline variables (age, sex, bmi, bp, s1..s6, raw units)
    and the disease progression one year later. Returns ``(x_train, y_train), (x_test,
    y_test)``: 354 training and 88 test rows; x float32 (n, 10), y float32 (n,).

    ``standardize=True`` scales every feature to zero mean and unit variance with the
    training rows' statistics (applied to both sides, so no test information leaks in);
    ``standardize_target=True`` does the same for y. ``split`` as for digits.
    """
    x, y = _diabetes_raw()
    x, y = x.copy(), y.copy()
    train, test = split_indices(len(y), TEST_FRACTION)
    if standardize:
        x = (x - x[train].mean(axis=0)) / x[train].std(axis=0)
    if standardize_target:
        y = (y - y[train].mean()) / y[train].std()
    x, y = x.astype(np.float32), y.astype(np.float32)
    return select(split, (x[train], y[train]), (x[test], y[test]), (x, y))
