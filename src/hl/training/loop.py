"""The one training loop, and the running means it reports.

``Loop.run`` drives epochs of ``step(batch) -> logs`` calls over a Source and fires the
callbacks. Module.fit builds one with TrainStep; hl.v2's trainer builds one with its own
feeding and turns its events into a callback. evaluate and predict are single passes and
live in trainer.py.
"""
import math
import warnings

from .. import errors
from .data import host


class Tracker:
    """Running means over the batches so far: the loss (each batch weighted by its number
    of samples, as Keras) and each metric (weighted by sample_weight when given). ``prefix``
    ('val_') names the values of a validation pass."""

    def __init__(self, metrics=(), prefix=""):
        self.metrics = list(metrics)
        self.prefix = prefix
        self.reset()

    def reset(self):
        self.loss_sum = 0.0
        self.samples = 0
        for m in self.metrics:
            m.reset()

    def update(self, loss, n, out=None, y=None, sample_weight=None):
        self.loss_sum += loss * n
        self.samples += n
        if self.metrics and out is not None:
            pred, labels = host(out), host(y)  # once, however many metrics
            for m in self.metrics:
                m.update(pred, labels, sample_weight)

    def logs(self):
        p = self.prefix
        out = {p + "loss": self.loss_sum / self.samples if self.samples else 0.0}
        for m in self.metrics:
            out[p + m.name] = m.result()
        return out


class Loop:
    """Epochs of steps with callbacks (an hl.callbacks.CallbackList); ``model`` is what the
    callbacks see and what carries ``stop_training``."""

    def __init__(self, model, callbacks):
        self.model = model
        self.callbacks = callbacks

    def run(self, source, step, epochs, initial_epoch=0, validate=None, tracker=None,
            what="fit"):
        """Trains from epoch `initial_epoch` up to `epochs` (exclusive). `step(batch)`
        returns the running logs; `tracker` (the step's Tracker) is reset at each epoch's
        start; `validate(epoch)` gives the epoch's 'val_*' values (or {}). Returns the last
        epoch's logs."""
        model, cbs = self.model, self.callbacks
        model.stop_training = False
        cbs.on_train_begin({})
        logs = {}
        for epoch in range(initial_epoch, epochs):
            if tracker is not None:
                tracker.reset()
            cbs.on_epoch_begin(epoch, {})
            batch_logs, ran = {}, 0
            for i, batch in enumerate(source.epoch(epoch)):
                cbs.on_train_batch_begin(i, {})
                batch_logs = step(batch)
                cbs.on_train_batch_end(i, batch_logs)
                ran += 1
                if not math.isfinite(batch_logs.get("loss", 0.0)) and not model.stop_training:
                    raise _nonfinite(what, epoch, i, batch_logs["loss"],
                                     getattr(step, "skipped", False))
                if model.stop_training:
                    break
            if ran == 0:
                warnings.warn(f"{what}: the data ran out at epoch {epoch + 1} of {epochs}; "
                              f"training stops here. A generator is read once: pass "
                              f"steps_per_epoch with a generator that repeats, or a "
                              f"re-iterable object (a list, an hl.data.DataLoader)",
                              stacklevel=3)
                break
            epoch_logs = dict(batch_logs)
            if validate is not None:
                epoch_logs.update(validate(epoch))
            cbs.on_epoch_end(epoch, epoch_logs)
            logs = epoch_logs
            if model.stop_training:
                break
        cbs.on_train_end(logs)
        return logs


def _nonfinite(what, epoch, batch, value, skipped):
    applied = ("its update was not applied, so the weights are those before it" if skipped
               else "train_one_batch has already applied its update")
    return errors.NonFiniteLossError(
        f"{what}: the loss became {value} at epoch {epoch + 1}, batch {batch}; {applied}. "
        f"Check the data for NaN or infinite values, lower the learning rate, or pass "
        f"callbacks=[hl.callbacks.TerminateOnNaN()] to stop training instead of raising")
