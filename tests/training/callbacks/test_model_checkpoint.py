import os

import numpy as np
import pytest

import hl
from hl.callbacks import LambdaCallback, ModelCheckpoint

from ..models import blobs, mlp, states


def _inject(values):
    return LambdaCallback(on_epoch_end=lambda e, logs: logs.update(val_loss=values[e]))


def test_writes_only_improving_epochs(tmp_path):
    x, y = blobs(40)
    m = mlp()
    taken = []
    record = LambdaCallback(on_epoch_end=lambda e, logs: taken.append(states(m)))
    ck = ModelCheckpoint(str(tmp_path / "ck-{epoch:02d}-{val_loss:.2f}.zip"),
                         save_best_only=True)
    m.fit(x, y, epochs=5, verbose=0,
          callbacks=[_inject([0.9, 0.7, 0.8, 0.6, 0.65]), record, ck])
    assert sorted(os.listdir(tmp_path)) == ["ck-01-0.90.zip", "ck-02-0.70.zip",
                                            "ck-04-0.60.zip"]
    fresh = mlp(seed=9)
    aux = fresh.load_states(tmp_path / "ck-04-0.60.zip")
    got = states(fresh)
    assert all(np.array_equal(got[k], taken[3][k]) for k in got)
    assert aux["epoch"] == 4 and aux["logs"]["val_loss"] == 0.6
    fresh.optim.set_states(aux["optim"])
    assert fresh.optim.step_count == m.optim.step_count * 4 // 5  # 2 steps per epoch


def test_one_file_keeps_the_best(tmp_path):
    x, y = blobs(40)
    m = mlp()
    taken = []
    record = LambdaCallback(on_epoch_end=lambda e, logs: taken.append(states(m)))
    path = tmp_path / "best.zip"
    m.fit(x, y, epochs=4, verbose=0, callbacks=[
        _inject([0.5, 0.4, 0.45, 0.41]), record,
        ModelCheckpoint(path, save_best_only=True, save_weights_only=True)])
    fresh = mlp(seed=9)
    assert fresh.load_states(path) == {}
    got = states(fresh)
    assert all(np.array_equal(got[k], taken[1][k]) for k in got)


def test_every_epoch_and_every_n_batches(tmp_path):
    x, y = blobs(40)
    mlp().fit(x, y, epochs=3, batch_size=10, verbose=0,
              callbacks=[ModelCheckpoint(tmp_path / "e{epoch}.zip", monitor="loss")])
    assert sorted(os.listdir(tmp_path)) == ["e1.zip", "e2.zip", "e3.zip"]
    ck = ModelCheckpoint(tmp_path / "b-{epoch}-{batch}.zip", save_freq=3)
    mlp().fit(x, y, epochs=2, batch_size=10, verbose=0, callbacks=[ck])
    assert [os.path.basename(p) for p in ck.saved] == ["b-1-3.zip", "b-2-2.zip"]


def test_a_name_the_logs_lack(tmp_path):
    x, y = blobs(40)
    with pytest.raises(hl.errors.ValueError, match="names 'val_acc', which the logs do not"):
        mlp().fit(x, y, verbose=0, callbacks=[ModelCheckpoint(tmp_path / "{val_acc}.zip")])
