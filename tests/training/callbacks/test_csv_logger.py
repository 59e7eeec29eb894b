import csv

import pytest

import hl
from hl.callbacks import CSVLogger

from ..models import blobs, mlp


def test_one_row_per_epoch(tmp_path):
    x, y = blobs(40)
    path = tmp_path / "log.csv"
    h = mlp().fit(x, y, epochs=3, verbose=0, validation_split=0.25,
                  callbacks=[CSVLogger(path)])
    rows = list(csv.DictReader(open(path)))
    assert [r["epoch"] for r in rows] == ["0", "1", "2"]
    assert list(rows[0]) == ["epoch", "accuracy", "loss", "val_accuracy", "val_loss"]
    assert [float(r["val_loss"]) for r in rows] == h.history["val_loss"]


def test_append_resumes_and_other_columns_refused(tmp_path):
    x, y = blobs(40)
    path = tmp_path / "log.csv"
    m = mlp()
    m.fit(x, y, epochs=2, verbose=0, callbacks=[CSVLogger(path)])
    m.fit(x, y, epochs=4, initial_epoch=2, verbose=0, callbacks=[CSVLogger(path, append=True)])
    rows = list(csv.DictReader(open(path)))
    assert [r["epoch"] for r in rows] == ["0", "1", "2", "3"]
    with pytest.raises(hl.errors.ValueError, match="other columns"):
        m.fit(x, y, verbose=0, validation_split=0.2, callbacks=[CSVLogger(path, append=True)])
    assert len(list(csv.DictReader(open(path)))) == 4  # the file is as it was
    m.fit(x, y, epochs=1, verbose=0, callbacks=[CSVLogger(path, separator=";")])
    assert open(path).read().splitlines()[0] == "epoch;accuracy;loss"
