"""ProgbarLogger: fit's progress, a tqdm bar per epoch (verbose=1) or one line per epoch
(verbose=2). fit adds one itself when verbose is not 0."""
import sys
import time

from .callback import Callback

_REFRESH_S = 0.1  # how often the bar's loss/metric text is re-formatted


def format_logs(logs, skip=()):
    return " - ".join(f"{k}: {_fmt(v)}" for k, v in logs.items() if k not in skip)


def _fmt(v):
    if isinstance(v, float):
        return f"{v:.4g}" if (v != 0 and (abs(v) < 1e-3 or abs(v) >= 1e4)) else f"{v:.4f}"
    return str(v)


class ProgbarLogger(Callback):
    """verbose=1: a bar per epoch with the running loss and metrics and the ETA (a bar for a
    standalone evaluate or predict too); verbose=2: one line per epoch, ``Epoch 3/10 - 1.2s -
    loss: 0.1234 - accuracy: 0.9612 - val_loss: ...``. Output goes to ``file`` (stdout)."""

    main_rank_only = True

    def __init__(self, verbose=1, file=None):
        super().__init__()
        self.verbose = verbose
        self.file = file
        self._bar = None
        self._in_fit = False

    def _out(self):
        return self.file or sys.stdout

    def _open(self, desc, total):
        from tqdm import tqdm
        self._bar = tqdm(total=total, desc=desc, unit="batch", file=self._out(), leave=True,
                         dynamic_ncols=True, mininterval=_REFRESH_S)
        self._shown = 0.0

    def _advance(self, logs):
        bar = self._bar
        bar.update(1)
        now = time.monotonic()
        if logs and now - self._shown >= _REFRESH_S:  # formatting every batch costs
            bar.set_postfix_str(format_logs(logs), refresh=False)
            self._shown = now

    def _close(self, logs=None):
        if self._bar is not None:
            if logs:
                self._bar.set_postfix_str(format_logs(logs), refresh=False)
            self._bar.close()
            self._bar = None

    # ---- fit ----------------------------------------------------------------------------

    def on_train_begin(self, logs=None):
        self._in_fit = True

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch_start = time.perf_counter()
        desc = f"Epoch {epoch + 1}/{self.params.get('epochs')}"
        if self.verbose == 1:
            self._open(desc, self.params.get("steps"))

    def on_train_batch_end(self, batch, logs=None):
        if self._bar is not None:
            self._advance(logs)

    def on_epoch_end(self, epoch, logs=None):
        if self.verbose == 1:
            self._close(logs)
        elif self.verbose == 2:
            seconds = time.perf_counter() - self._epoch_start
            print(f"Epoch {epoch + 1}/{self.params.get('epochs')} - {seconds:.1f}s - "
                  f"{format_logs(logs or {})}", file=self._out(), flush=True)

    def on_train_end(self, logs=None):
        self._close()
        self._in_fit = False

    # ---- standalone evaluate / predict --------------------------------------------------

    def on_test_begin(self, logs=None):
        if not self._in_fit and self.verbose == 1:
            self._open("evaluate", self.params.get("steps"))

    def on_test_batch_end(self, batch, logs=None):
        if not self._in_fit and self._bar is not None:
            self._advance(logs)

    def on_test_end(self, logs=None):
        if self._in_fit:
            return
        if self.verbose == 1:
            self._close(logs)
        elif self.verbose == 2:
            print(format_logs(logs or {}), file=self._out(), flush=True)

    def on_predict_begin(self, logs=None):
        if self.verbose == 1:
            self._open("predict", self.params.get("steps"))

    def on_predict_batch_end(self, batch, logs=None):
        if self._bar is not None:
            self._advance(None)

    def on_predict_end(self, logs=None):
        self._close()
