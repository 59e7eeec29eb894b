import numpy as np
import pytest

import hl
from hl.callbacks import LambdaCallback, ReduceLROnPlateau

from ..models import blobs, mlp
from .keras_ref import StandIn, drive, keras, sequences


def test_lowers_the_optimisers_rate_in_fit():
    x, y = blobs(40)
    m = mlp()
    vals = [1.0, 0.9, 0.9, 0.9, 0.9, 0.9, 0.9]
    put = LambdaCallback(on_epoch_end=lambda e, logs: logs.update(val_loss=vals[e]))
    h = m.fit(x, y, epochs=7, verbose=0,
              callbacks=[put, ReduceLROnPlateau(factor=0.5, patience=2, min_lr=0.03)])
    np.testing.assert_allclose(h.history["learning_rate"],
                               [0.1, 0.1, 0.1, 0.1, 0.05, 0.05, 0.03])  # the rate each epoch ran at
    assert m.optim.lr == pytest.approx(0.03)


def test_factor_must_lower():
    with pytest.raises(hl.errors.ValueError, match=r"factor must be in \(0, 1\)"):
        ReduceLROnPlateau(factor=1.5)


@pytest.mark.parametrize("kw", [dict(patience=0), dict(patience=2, factor=0.5),
                                dict(patience=1, cooldown=2, factor=0.3),
                                dict(patience=2, min_delta=0.05, min_lr=0.02),
                                dict(patience=3, mode="max", factor=0.7)])
def test_same_rates_as_keras(kw):
    k = keras()
    for values in sequences():
        ours = drive(ReduceLROnPlateau(**kw), StandIn(0.1), values)[1]
        theirs = drive(k.callbacks.ReduceLROnPlateau(**kw), StandIn(0.1), values)[1]
        np.testing.assert_allclose(ours, theirs, rtol=1e-6, err_msg=str((kw, values)))
