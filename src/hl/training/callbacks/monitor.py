"""The monitor/mode logic shared by EarlyStopping, ModelCheckpoint and ReduceLROnPlateau."""
import math
import warnings

from ... import errors


class Monitor:
    """Watches one value of the epoch logs. ``mode`` 'min' or 'max' says which way is better;
    'auto' picks 'max' for accuracies (a name containing 'acc') and AUC-like names, 'min'
    otherwise, as Keras does. A value improves on the best when it is better by more than
    ``min_delta``."""

    def __init__(self, owner, monitor, mode="auto", min_delta=0.0, best=None):
        if mode not in ("auto", "min", "max"):
            raise errors.ValueError(f"{owner}: mode must be 'auto', 'min' or 'max', got "
                                    f"{mode!r}")
        if mode == "auto":
            name = monitor.lower()
            mode = "max" if ("acc" in name or name.endswith("auc")
                             or name.startswith("fmeasure")) else "min"
        self.owner, self.name, self.mode = owner, monitor, mode
        self.min_delta = abs(float(min_delta))
        self.initial = best
        self.reset()

    def reset(self):
        if self.initial is not None:
            self.best = float(self.initial)
        else:
            self.best = math.inf if self.mode == "min" else -math.inf

    def improves(self, value, reference=None):
        reference = self.best if reference is None else reference
        if self.mode == "min":
            return value < reference - self.min_delta
        return value > reference + self.min_delta

    def value(self, logs):
        """The monitored value from logs, or None (with a warning naming what the logs have)
        when it is missing."""
        value = (logs or {}).get(self.name)
        if value is None:
            warnings.warn(f"{self.owner}: the logs have no {self.name!r} to monitor (they have "
                          f"{sorted(logs or {})}); skipping. Validation values ('val_*') need "
                          f"validation_data or validation_split", stacklevel=3)
            return None
        return float(value)


def optimizer_of(model, owner):
    """The model's optimiser (``model.optim``, which compile(optimizer=...) sets)."""
    optim = getattr(model, "optim", None)
    if optim is None:
        raise errors.ValueError(f"{owner}: the model has no optimiser; compile it with "
                                f"optimizer=... (or set model.optim)")
    return optim
