"""EarlyStopping: stop when the monitored value has stopped improving."""
from .callback import Callback
from .monitor import Monitor


class EarlyStopping(Callback):
    """Stops fit once ``monitor`` has not improved by more than ``min_delta`` for
    ``patience`` epochs (checked from epoch ``start_from_epoch`` on). With ``baseline``, the
    count of epochs without improvement only restarts once the value beats the baseline.

    ``restore_best_weights=True`` keeps a copy of the states (parameters and buffers) of the
    best epoch and puts it back when training ends, stopped early or not (Keras 3's rule);
    if no epoch was ever monitored the weights stay as they are. ``stopped_epoch`` is the
    0-based epoch at which training stopped (0 if it did not stop early), ``best_epoch``
    the best one."""

    def __init__(self, monitor="val_loss", min_delta=0.0, patience=0, verbose=0, mode="auto",
                 baseline=None, restore_best_weights=False, start_from_epoch=0):
        super().__init__()
        self.monitor = Monitor("EarlyStopping", monitor, mode, min_delta)
        self.patience = int(patience)
        self.verbose = verbose
        self.baseline = baseline
        self.restore_best_weights = restore_best_weights
        self.start_from_epoch = int(start_from_epoch)

    def on_train_begin(self, logs=None):
        self.monitor.reset()
        self.wait = 0
        self.stopped_epoch = 0
        self.best_epoch = 0
        self.best_weights = None

    def on_epoch_end(self, epoch, logs=None):
        current = self.monitor.value(logs)
        if current is None or epoch < self.start_from_epoch:
            return
        if self.restore_best_weights and self.best_weights is None:
            self.best_weights = _snapshot(self.model)  # nothing better yet: the start
        self.wait += 1
        if self.monitor.improves(current):
            self.monitor.best = current
            self.best_epoch = epoch
            if self.restore_best_weights:
                self.best_weights = _snapshot(self.model)
            if self.baseline is None or self.monitor.improves(current, self.baseline):
                self.wait = 0
            return
        if self.wait >= self.patience and epoch > 0:
            self.stopped_epoch = epoch
            self.model.stop_training = True

    def on_train_end(self, logs=None):
        if self.stopped_epoch > 0 and self.verbose > 0:
            print(f"Epoch {self.stopped_epoch + 1}: early stopping")
        if self.restore_best_weights and self.best_weights is not None:
            if self.verbose > 0:
                print(f"Restoring model weights from the end of the best epoch: "
                      f"{self.best_epoch + 1}.")
            self.model.set_states(self.best_weights)

    @property
    def best(self):
        return self.monitor.best


def _snapshot(model):
    return {k: t.clone() for k, t in model.get_states().items()}
