"""ModelCheckpoint: a states archive per epoch (or only the improving ones)."""
import os

from ... import errors
from .callback import Callback
from .monitor import Monitor


class ModelCheckpoint(Callback):
    """Writes the model's states archive (``Module.save_states``, atomically) after each
    epoch, or every ``save_freq`` batches when it is an int.

    ``filepath`` may hold ``{epoch}`` (1-based), ``{batch}`` and any logs value with a
    format spec: ``"ck/epoch{epoch:02d}-{val_loss:.3f}.zip"``. ``save_best_only=True``
    writes only when ``monitor`` improves on the best so far (``initial_value_threshold``
    sets the best to beat at the start); with a fixed filepath that keeps the best model in
    one file. Unless ``save_weights_only``, the archive's auxiliary values hold ``epoch``,
    the epoch's ``logs`` and the optimiser's states (``optim``), so training can resume:
    ``aux = model.load_states(path); model.optim.set_states(aux["optim"])``."""

    main_rank_only = True

    def __init__(self, filepath, monitor="val_loss", verbose=0, save_best_only=False,
                 save_weights_only=False, mode="auto", save_freq="epoch",
                 initial_value_threshold=None):
        super().__init__()
        if save_freq != "epoch" and not (isinstance(save_freq, int) and save_freq > 0):
            raise errors.ValueError(f"ModelCheckpoint: save_freq must be 'epoch' or a number "
                                    f"of batches > 0, got {save_freq!r}")
        self.filepath = os.fspath(filepath)
        self.monitor = Monitor("ModelCheckpoint", monitor, mode, 0.0, initial_value_threshold)
        self.verbose = verbose
        self.save_best_only = save_best_only
        self.save_weights_only = save_weights_only
        self.save_freq = save_freq
        self.saved = []  # the paths written, in order

    def on_train_begin(self, logs=None):
        self._epoch = 0
        self._batches = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        if self.save_freq == "epoch":
            return
        self._batches += 1
        if self._batches % self.save_freq == 0:
            self._save(self._epoch, batch, logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.save_freq == "epoch":
            self._save(epoch, None, logs)

    def _save(self, epoch, batch, logs):
        logs = dict(logs or {})
        path = self._path(epoch, batch, logs)
        if self.save_best_only:
            current = self.monitor.value(logs)
            if current is None:
                return
            if not self.monitor.improves(current):
                if self.verbose > 0:
                    print(f"Epoch {epoch + 1}: {self.monitor.name} did not improve from "
                          f"{self.monitor.best:.5f}")
                return
            if self.verbose > 0:
                print(f"Epoch {epoch + 1}: {self.monitor.name} improved from "
                      f"{self.monitor.best:.5f} to {current:.5f}, saving model to {path}")
            self.monitor.best = current
        elif self.verbose > 0:
            print(f"Epoch {epoch + 1}: saving model to {path}")
        aux = None
        if not self.save_weights_only:
            aux = {"epoch": epoch + 1, "logs": {k: float(v) for k, v in logs.items()}}
            if getattr(self.model, "optim", None) is not None:
                aux["optim"] = self.model.optim
        self.model.save_states(path, aux)
        self.saved.append(path)

    def _path(self, epoch, batch, logs):
        fields = dict(logs, epoch=epoch + 1)
        if batch is not None:
            fields["batch"] = batch + 1
        try:
            return self.filepath.format(**fields)
        except KeyError as e:
            raise errors.ValueError(
                f"ModelCheckpoint: filepath {self.filepath!r} names {e.args[0]!r}, which the "
                f"logs do not have; they have {sorted(fields)}") from None
