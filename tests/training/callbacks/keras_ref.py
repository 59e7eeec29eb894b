"""Keras 3 (on its PyTorch backend) as the reference for callbacks' decisions: its callbacks
are driven on the same sequence of logs as hl's, with a stand-in model."""
import os

import numpy as np
import pytest


def keras():
    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras")


class StandIn:
    """What the callbacks touch on a model: stop_training and an optimiser's rate."""

    def __init__(self, lr=0.1):
        self.stop_training = False
        self.optimizer = self.optim = _Rate(lr)


class _Rate:
    def __init__(self, lr):
        self.learning_rate = lr

    @property
    def lr(self):  # hl's name
        return self.learning_rate

    @lr.setter
    def lr(self, value):
        self.learning_rate = value


def drive(cb, model, values, monitor="val_loss"):
    """on_epoch_end for each value until the callback stops training; returns the number of
    epochs run and the learning rate after each."""
    cb.set_model(model)
    cb.on_train_begin({})
    rates = []
    for epoch, v in enumerate(values):
        cb.on_epoch_begin(epoch, {})
        cb.on_epoch_end(epoch, {monitor: float(v)})
        rates.append(float(model.optimizer.learning_rate))
        if model.stop_training:
            return epoch + 1, rates
    return len(values), rates


def sequences(n=40, length=25, seed=0):
    """Noisy, mostly falling loss curves with plateaus."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        steps = rng.choice([0.0, -0.05, 0.02, -0.3], size=length, p=[0.3, 0.4, 0.2, 0.1])
        yield np.round(2.0 + np.cumsum(steps), 3)
