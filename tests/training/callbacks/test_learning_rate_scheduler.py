import numpy as np
import pytest

import hl
from hl.callbacks import LambdaCallback, LearningRateScheduler

from ..models import blobs, mlp


def test_sets_each_epochs_rate_and_the_update_uses_it():
    x, y = blobs(16)
    m = mlp()
    used = []
    # the rate the optimiser reports during each epoch's first batch
    spy = LambdaCallback(on_train_batch_begin=lambda b, logs: used.append(m.optim.lr))
    h = m.fit(x, y, epochs=4, batch_size=16, verbose=0,
              callbacks=[LearningRateScheduler(lambda epoch, lr: lr * 0.5 if epoch else lr),
                         spy])
    np.testing.assert_allclose(used, [0.1, 0.05, 0.025, 0.0125])
    np.testing.assert_allclose(h.history["learning_rate"], used)


def test_a_function_of_the_epoch_alone_and_a_zero_rate():
    x, y = blobs(16)
    m = mlp()
    before = m.get_states()["1.W"].numpy().copy()
    m.fit(x, y, epochs=2, verbose=0, callbacks=[LearningRateScheduler(lambda epoch: 0.0)])
    np.testing.assert_array_equal(before, m.get_states()["1.W"].numpy())  # lr 0: no change


def test_bad_schedules():
    x, y = blobs(16)
    with pytest.raises(hl.errors.ValueError, match="must return a number"):
        mlp().fit(x, y, verbose=0, callbacks=[LearningRateScheduler(lambda e, lr: "fast")])
    with pytest.raises(hl.errors.ValueError, match="must be a function"):
        LearningRateScheduler(0.1)
