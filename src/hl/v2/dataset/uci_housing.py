"""v2's ``paddle.dataset.uci_housing``: Boston house prices, from a local ``housing.data``.

The file (UCI's, 506 rows) holds 14 whitespace-separated numbers a row: 13 features, then the
median price in $1000s. As v2 did, every feature is normalised over the whole file to
``(x - mean) / (max - min)``, the first 80% of the rows are the training set and the rest
the test set. Samples are ``(features float32[13], price float32[1])``.

v2 downloaded the file; hl reads it from the ``path`` argument or, for scripts written for
v2 (``uci_housing.train()``), from the environment variable HL_UCI_HOUSING.
"""
import os

import numpy as np

from ... import errors

__all__ = ["train", "test", "feature_names", "ENV_VAR"]

ENV_VAR = "HL_UCI_HOUSING"
feature_names = ["CRIM", "ZN", "INDUS", "CHAS", "NOX", "RM", "AGE", "DIS", "RAD", "TAX",
                 "PTRATIO", "B", "LSTAT"]
_COLUMNS = len(feature_names) + 1  # the price last
_TRAIN_FRACTION = 0.8


def train(path=None):
    """A reader of the first 80% of the rows of ``path`` (else $HL_UCI_HOUSING)."""
    data = _load(path)
    return _reader(data[:_split_row(data)])


def test(path=None):
    """A reader of the last 20% of the rows of ``path`` (else $HL_UCI_HOUSING)."""
    data = _load(path)
    return _reader(data[_split_row(data):])


def _split_row(data):
    return int(len(data) * _TRAIN_FRACTION)


def _reader(rows):
    features, prices = rows[:, :-1], rows[:, -1:]

    def reader():
        return zip(features, prices)
    return reader


def _load(path):
    """The file's rows, features normalised, float32 and read-only (samples are views)."""
    source = "the path argument"
    if path is None:
        path, source = os.environ.get(ENV_VAR) or None, f"the environment variable {ENV_VAR}"
    if path is None:
        raise errors.ValueError(
            f"uci_housing: no file given: pass uci_housing.train(path=FILE) or set the "
            f"environment variable {ENV_VAR} to the path of UCI's housing.data; hl does not "
            f"download data")
    path = os.fspath(path)
    if not os.path.isfile(path):
        raise errors.ValueError(f"uci_housing: {path!r} (from {source}) is not a file; pass "
                                f"path=FILE or set {ENV_VAR} to the path of housing.data")
    data = _parse(path)
    features = data[:, :-1]
    low, high = features.min(axis=0), features.max(axis=0)
    flat = np.flatnonzero(high == low)
    if flat.size:
        names = [feature_names[i] for i in flat]
        raise errors.ValueError(f"uci_housing: {path}: feature(s) {names} take one value in "
                                f"every row, so (x - mean) / (max - min) divides by zero")
    data[:, :-1] = (features - features.mean(axis=0)) / (high - low)
    data = data.astype(np.float32)
    data.flags.writeable = False
    return data


def _parse(path):
    rows = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != _COLUMNS:
                raise errors.ValueError(f"uci_housing: {path}, line {number}: {len(fields)} "
                                        f"values, expected {_COLUMNS} (13 features, then the "
                                        f"price)")
            try:
                rows.append([float(v) for v in fields])
            except ValueError:
                raise errors.ValueError(f"uci_housing: {path}, line {number}: not all numbers: "
                                        f"{line.strip()!r}") from None
    if not rows:
        raise errors.ValueError(f"uci_housing: {path} holds no rows")
    return np.array(rows, dtype=np.float64)
