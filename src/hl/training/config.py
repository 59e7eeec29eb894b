"""compile's arguments: strings (Keras's names where they exist) to hl objects.

Losses take logits. Keras's 'categorical_crossentropy' and 'binary_crossentropy' read
probabilities unless from_logits=True; hl's models end in a Linear layer and the losses
apply the softmax / sigmoid themselves (exactly, in one op), so the same names here mean
"from logits". fit warns when a model's outputs look like probabilities.
"""
from .. import errors, losses, metrics, opt

OPTIMIZERS = {  # Keras's default learning rates
    "sgd": lambda: opt.SGD(lr=0.01),
    "adam": lambda: opt.Adam(lr=1e-3),
    "adamw": lambda: opt.AdamW(lr=1e-3),
    "rmsprop": lambda: opt.RMSProp(lr=1e-3, alpha=0.9, eps=1e-7),
    "adagrad": lambda: opt.AdaGrad(lr=1e-3),
}

LOSSES = {
    "cross_entropy": losses.SoftmaxCrossEntropy,
    "softmax_cross_entropy": losses.SoftmaxCrossEntropy,
    "sparse_categorical_crossentropy": losses.SoftmaxCrossEntropy,
    "categorical_crossentropy": losses.SoftmaxCrossEntropy,
    "binary_crossentropy": losses.BCEWithLogits,
    "bce_with_logits": losses.BCEWithLogits,
    "mse": losses.MSELoss,
    "mean_squared_error": losses.MSELoss,
    "mae": losses.MAELoss,
    "mean_absolute_error": losses.MAELoss,
    "nll": losses.NLLLoss,
}

METRICS = {
    "sparse_categorical_accuracy": metrics.Accuracy,
    "categorical_accuracy": metrics.Accuracy,
    "binary_accuracy": metrics.BinaryAccuracy,
    "top_k_categorical_accuracy": metrics.TopKAccuracy,
    "sparse_top_k_categorical_accuracy": metrics.TopKAccuracy,
    "mse": metrics.MeanSquaredError,
    "mean_squared_error": metrics.MeanSquaredError,
    "mae": metrics.MeanAbsoluteError,
    "mean_absolute_error": metrics.MeanAbsoluteError,
}


def _choices(table):
    return ", ".join(repr(k) for k in table)


def optimizer(value):
    if isinstance(value, opt.Optimizer):
        return value
    if isinstance(value, str) and value.lower() in OPTIMIZERS:
        return OPTIMIZERS[value.lower()]()
    raise errors.ValueError(f"compile: optimizer must be an hl.opt optimiser or one of "
                            f"{_choices(OPTIMIZERS)}; got {value!r}")


def loss(value):
    if isinstance(value, str):
        if value.lower() in LOSSES:
            return LOSSES[value.lower()]()
        raise errors.ValueError(f"compile: unknown loss {value!r}; give one of "
                                f"{_choices(LOSSES)}, an hl.losses object or a function "
                                f"(pred, y) -> loss")
    if callable(value):
        return value
    raise errors.ValueError(f"compile: loss must be a name, an hl.losses object or a function "
                            f"(pred, y) -> loss; got {type(value).__name__}")


def metric(value, loss_fn):
    """One compiled metric. 'accuracy' (or 'acc') follows the loss, as Keras's does: binary
    accuracy on logits for a binary cross-entropy, class accuracy otherwise."""
    if isinstance(value, metrics.Metric):
        return value
    if isinstance(value, str):
        key = value.lower()
        if key in ("accuracy", "acc"):
            if isinstance(loss_fn, losses.BCEWithLogits):
                return metrics.BinaryAccuracy(threshold=0.0, name=value)
            return metrics.Accuracy(name=value)
        if key == "binary_accuracy" and isinstance(loss_fn, losses.BCEWithLogits):
            return metrics.BinaryAccuracy(threshold=0.0, name=value)
        if key in METRICS:
            return METRICS[key](name=value)
        raise errors.ValueError(f"compile: unknown metric {value!r}; give 'accuracy', one of "
                                f"{_choices(METRICS)}, an hl.metrics.Metric or a function "
                                f"(pred, y) -> value")
    if callable(value):
        return metrics.MeanMetricWrapper(value)
    raise errors.ValueError(f"compile: a metric must be a name, an hl.metrics.Metric or a "
                            f"function; got {type(value).__name__}")


def metric_list(values, loss_fn):
    if values is None:
        return []
    if isinstance(values, (str, metrics.Metric)) or callable(values):
        values = [values]
    out = [metric(v, loss_fn) for v in values]
    names = [m.name for m in out]
    if "loss" in names or len(set(names)) != len(names):
        raise errors.ValueError(f"compile: metric names must be distinct and not 'loss'; got "
                                f"{names}")
    return out
