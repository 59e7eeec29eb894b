"""History: every epoch's logs, as lists per key; fit returns it."""
from ... import errors
from .callback import Callback


class History(Callback):
    """``history.history`` maps 'loss', each metric and each 'val_*' value to a list with one
    entry per epoch; ``history.epoch`` lists the epoch numbers (0-based, as Keras)."""

    def __init__(self):
        super().__init__()
        self.history = {}
        self.epoch = []

    def on_train_begin(self, logs=None):
        self.epoch = []

    def on_epoch_end(self, epoch, logs=None):
        self.epoch.append(epoch)
        for k, v in (logs or {}).items():
            self.history.setdefault(k, []).append(v)
        if self.model is not None:
            self.model.history = self

    def plot(self, path, keys=None):
        """Draws each value per epoch, training and validation together ('loss' beside
        'val_loss'), one panel per value, to a PNG at `path` (written atomically). Needs
        matplotlib: ``pip install 'hl[plot]'``."""
        try:
            import matplotlib
            matplotlib.use("Agg", force=False)
            import matplotlib.pyplot as plt
        except ImportError:
            raise errors.MissingDependencyError(
                "History.plot needs matplotlib, which is not installed; install it with "
                "pip install 'hl[plot]' (or pip install matplotlib)") from None
        from ...checkpoint.atomic import atomic_output
        names = keys or [k for k in self.history if not k.startswith("val_")]
        if not names:
            raise errors.ValueError("History.plot: there is nothing to plot yet (no epoch "
                                    "has ended)")
        fig, axes = plt.subplots(1, len(names), figsize=(4.5 * len(names), 3.5), squeeze=False)
        try:
            for ax, name in zip(axes[0], names):
                if name not in self.history:
                    raise errors.ValueError(f"History.plot: no values named {name!r}; "
                                            f"there are {sorted(self.history)}")
                epochs = [e + 1 for e in self.epoch[-len(self.history[name]):]]
                ax.plot(epochs, self.history[name], marker="o", label="train")
                if "val_" + name in self.history:
                    ax.plot(epochs, self.history["val_" + name], marker="o", label="validation")
                ax.set_xlabel("epoch")
                ax.set_title(name)
                ax.grid(alpha=0.3)
                ax.legend()
            fig.tight_layout()
            with atomic_output(path, what="History.plot") as tmp:
                fig.savefig(tmp, format="png", dpi=100)
        finally:
            plt.close(fig)
