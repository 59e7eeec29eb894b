"""CSVLogger: one row per epoch in a CSV file, rewritten atomically each epoch."""
import csv
import io
import os

from ... import errors
from .callback import Callback


class CSVLogger(Callback):
    """Writes ``epoch`` (0-based, as Keras) and every logs value of each epoch to a CSV file;
    the header is ``epoch`` then the keys in sorted order. ``append=True`` keeps the rows of
    an earlier run (resuming with initial_epoch) when their header matches. The whole file
    is rewritten atomically after each epoch, so a crash never leaves half a row."""

    main_rank_only = True

    def __init__(self, filename, separator=",", append=False):
        super().__init__()
        self.filename = os.fspath(filename)
        self.sep = separator
        self.append = append
        self.keys = None

    def on_train_begin(self, logs=None):
        self._previous = ""
        self.keys = None
        if self.append and os.path.exists(self.filename):
            with open(self.filename, newline="") as f:
                self._previous = f.read()
        self._rows = []

    def on_epoch_end(self, epoch, logs=None):
        logs = logs or {}
        if self.keys is None:
            self.keys = sorted(logs)
            header = self._line(["epoch"] + self.keys)
            if self._previous and not self._previous.startswith(header):
                raise errors.ValueError(
                    f"CSVLogger: {self.filename} has other columns than this run "
                    f"({self._previous.splitlines()[0]!r} vs {header.strip()!r}); use "
                    f"another file or append=False")
            if not self._previous:
                self._rows.append(header)
        self._rows.append(self._line([epoch] + [_cell(logs.get(k, "")) for k in self.keys]))
        self._write()

    def _line(self, cells):
        buf = io.StringIO()
        csv.writer(buf, delimiter=self.sep, lineterminator="\n").writerow(cells)
        return buf.getvalue()

    def _write(self):
        from ...checkpoint.atomic import atomic_output
        with atomic_output(self.filename, what="CSVLogger") as tmp:
            with open(tmp, "w", newline="") as f:
                f.write(self._previous + "".join(self._rows))


def _cell(v):
    return repr(float(v)) if isinstance(v, float) else v
