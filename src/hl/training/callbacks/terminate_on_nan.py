"""TerminateOnNaN: stop training at the first NaN or infinite loss."""
import math

from .callback import Callback


class TerminateOnNaN(Callback):
    """Stops fit when a batch's loss is NaN or infinite, after printing ``Batch N: Invalid
    loss, terminating training``. With the built-in step (no train_one_batch override) the
    update of that batch is not applied, so the weights are those before it; the epoch still
    ends as usual (validation, callbacks). Without this callback fit raises
    hl.errors.NonFiniteLossError instead."""

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is not None and not math.isfinite(loss):
            print(f"Batch {batch}: Invalid loss, terminating training")
            self.model.stop_training = True
