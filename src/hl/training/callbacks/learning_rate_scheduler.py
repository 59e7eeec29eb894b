"""LearningRateScheduler: the learning rate of each epoch from a function."""
import inspect
import numbers

from ... import errors
from .callback import Callback
from .monitor import optimizer_of


class LearningRateScheduler(Callback):
    """Before each epoch sets the optimiser's learning rate to ``schedule(epoch, lr)``
    (epoch 0-based, lr the current rate; a function of the epoch alone works too). The rate
    of each epoch goes into the logs as 'learning_rate'."""

    def __init__(self, schedule, verbose=0):
        super().__init__()
        if not callable(schedule):
            raise errors.ValueError(f"LearningRateScheduler: schedule must be a function "
                                    f"(epoch, lr) -> lr, got {type(schedule).__name__}")
        self.schedule = schedule
        self.verbose = verbose
        try:
            params = inspect.signature(schedule).parameters.values()
            self._takes_lr = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                                 for p in params) >= 2 or any(p.kind == p.VAR_POSITIONAL
                                                              for p in params)
        except (TypeError, ValueError):  # builtins without a signature
            self._takes_lr = True

    def on_epoch_begin(self, epoch, logs=None):
        optim = optimizer_of(self.model, "LearningRateScheduler")
        lr = float(optim.lr)
        new = self.schedule(epoch, lr) if self._takes_lr else self.schedule(epoch)
        if not isinstance(new, numbers.Real) or isinstance(new, bool):
            raise errors.ValueError(f"LearningRateScheduler: the schedule returned "
                                    f"{new!r} for epoch {epoch}; it must return a number")
        optim.lr = float(new)
        if self.verbose > 0:
            print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to "
                  f"{float(new)}.")

    def on_epoch_end(self, epoch, logs=None):
        if logs is not None:
            logs["learning_rate"] = float(optimizer_of(self.model, "LearningRateScheduler").lr)
