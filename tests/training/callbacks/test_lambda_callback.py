import pytest

import hl
from hl.callbacks import Callback, LambdaCallback

from ..models import blobs, mlp


def test_hooks_fire_in_keras_order():
    x, y = blobs(20)
    events = []
    names = ["on_train_begin", "on_epoch_begin", "on_train_batch_begin", "on_train_batch_end",
             "on_test_begin", "on_test_batch_end", "on_test_end", "on_epoch_end",
             "on_train_end"]
    hooks = {n: (lambda n: lambda *a: events.append(n))(n) for n in names}
    mlp().fit(x, y, epochs=1, batch_size=10, verbose=0, validation_data=(x[:5], y[:5]),
              callbacks=[LambdaCallback(**hooks)])
    assert events == ["on_train_begin", "on_epoch_begin", "on_train_batch_begin",
                      "on_train_batch_end", "on_train_batch_begin", "on_train_batch_end",
                      "on_test_begin", "on_test_batch_end", "on_test_end", "on_epoch_end",
                      "on_train_end"]


def test_unknown_hooks_and_objects_refused():
    with pytest.raises(hl.errors.ValueError, match="unknown hook 'on_batch_ending'"):
        LambdaCallback(on_batch_ending=print)
    with pytest.raises(hl.errors.ValueError, match="must be hl.callbacks.Callback"):
        mlp().fit(*blobs(8), verbose=0, callbacks=[print])


def test_stop_training_and_params():
    x, y = blobs(40)
    seen = {}

    class Stop(Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.update(self.params)
            if epoch == 1:
                self.model.stop_training = True

    h = mlp().fit(x, y, epochs=9, batch_size=16, verbose=0, callbacks=[Stop()])
    assert len(h.history["loss"]) == 2
    assert seen == {"verbose": 0, "epochs": 9, "steps": 3}
