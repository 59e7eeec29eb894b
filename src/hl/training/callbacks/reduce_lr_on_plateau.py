"""ReduceLROnPlateau: lower the learning rate when the monitored value stalls."""
from ... import errors
from .callback import Callback
from .monitor import Monitor, optimizer_of


class ReduceLROnPlateau(Callback):
    """Multiplies the learning rate by ``factor`` once ``monitor`` has not improved by more
    than ``min_delta`` for ``patience`` epochs, never below ``min_lr``; then waits
    ``cooldown`` epochs before counting again. The current rate goes into the logs as
    'learning_rate'."""

    def __init__(self, monitor="val_loss", factor=0.1, patience=10, verbose=0, mode="auto",
                 min_delta=1e-4, cooldown=0, min_lr=0.0):
        super().__init__()
        if not 0.0 < factor < 1.0:
            raise errors.ValueError(f"ReduceLROnPlateau: factor must be in (0, 1) (the rate "
                                    f"is multiplied by it), got {factor!r}")
        self.monitor = Monitor("ReduceLROnPlateau", monitor, mode, min_delta)
        self.factor = float(factor)
        self.patience = int(patience)
        self.verbose = verbose
        self.cooldown = int(cooldown)
        self.min_lr = float(min_lr)

    def on_train_begin(self, logs=None):
        self.monitor.reset()
        self.wait = 0
        self.cooldown_counter = 0

    def on_epoch_end(self, epoch, logs=None):
        optim = optimizer_of(self.model, "ReduceLROnPlateau")
        logs = logs if logs is not None else {}
        logs["learning_rate"] = float(optim.lr)
        current = self.monitor.value(logs)
        if current is None:
            return
        if self.cooldown_counter > 0:
            self.cooldown_counter -= 1
            self.wait = 0
        if self.monitor.improves(current):
            self.monitor.best = current
            self.wait = 0
        elif self.cooldown_counter == 0:
            self.wait += 1
            if self.wait >= self.patience:
                old = float(optim.lr)
                if old > self.min_lr:
                    new = max(old * self.factor, self.min_lr)
                    optim.lr = new
                    if self.verbose > 0:
                        print(f"Epoch {epoch + 1}: ReduceLROnPlateau reducing learning rate "
                              f"to {new}.")
                    self.cooldown_counter = self.cooldown
                    self.wait = 0
