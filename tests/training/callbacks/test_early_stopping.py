import numpy as np
import pytest

from hl.callbacks import EarlyStopping, LambdaCallback

from ..models import blobs, mlp, states
from .keras_ref import StandIn, drive, keras, sequences


def _inject(values, key="val_loss"):
    """A callback placing a chosen value in each epoch's logs before the others read it."""
    def put(epoch, logs):
        logs[key] = float(values[epoch])
    return LambdaCallback(on_epoch_end=put)


def test_stops_at_the_right_epoch_and_restores_the_best_weights():
    x, y = blobs(40)
    m = mlp()
    taken = []
    record = LambdaCallback(on_epoch_end=lambda e, logs: taken.append(states(m)))
    es = EarlyStopping(monitor="val_loss", patience=2, restore_best_weights=True)
    # best at epoch 1 (0-based); epochs 2 and 3 do not improve: stop after epoch 3
    h = m.fit(x, y, epochs=10, verbose=0,
              callbacks=[_inject([1.0, 0.5, 0.6, 0.55, 0.1, 0.1]), record, es])
    assert len(h.history["loss"]) == 4 and es.stopped_epoch == 3 and es.best_epoch == 1
    now = states(m)
    assert all(np.array_equal(now[k], taken[1][k]) for k in now)
    assert not all(np.array_equal(now[k], taken[3][k]) for k in now)


def test_min_delta_mode_and_baseline():
    x, y = blobs(40)
    es = EarlyStopping(monitor="val_acc", min_delta=0.05, patience=1, mode="auto")
    assert es.monitor.mode == "max"
    h = mlp().fit(x, y, epochs=10, verbose=0,
                  callbacks=[_inject([0.5, 0.52, 0.7, 0.72], "val_acc"), es])
    assert len(h.history["loss"]) == 2  # +0.02 is not an improvement of more than 0.05
    vals = [0.9, 0.8, 0.85, 0.85, 0.85, 0.85]
    h = mlp().fit(x, y, epochs=6, verbose=0,
                  callbacks=[_inject(vals), EarlyStopping(patience=2)])
    assert len(h.history["loss"]) == 4
    # improvements that do not beat the baseline do not restart the count (Keras's rule)
    h = mlp().fit(x, y, epochs=6, verbose=0,
                  callbacks=[_inject(vals), EarlyStopping(patience=2, baseline=0.3)])
    assert len(h.history["loss"]) == 3


def test_a_missing_monitor_warns_and_trains_on():
    x, y = blobs(40)
    with pytest.warns(UserWarning, match="no 'val_loss' to monitor"):
        h = mlp().fit(x, y, epochs=3, verbose=0, callbacks=[EarlyStopping(patience=0)])
    assert len(h.history["loss"]) == 3


@pytest.mark.parametrize("kw", [dict(patience=0), dict(patience=3), dict(patience=2,
                                min_delta=0.04), dict(patience=1, start_from_epoch=4),
                                dict(patience=2, baseline=1.8), dict(patience=4, mode="max")])
def test_same_decisions_as_keras(kw):
    k = keras()
    for values in sequences():
        ours = drive(EarlyStopping(**kw), StandIn(), values)[0]
        theirs = drive(k.callbacks.EarlyStopping(**kw), StandIn(), values)[0]
        assert ours == theirs, (kw, values)
