"""Metrics: accuracy and top-k accuracy as functions returning Python floats, and Keras-like
stateful classes that accumulate weighted running means over batches (update, result, reset):
Accuracy, TopKAccuracy, BinaryAccuracy, MeanSquaredError, MeanAbsoluteError, and
MeanMetricWrapper for any function. fit's compiled metrics are these; ``name`` is each one's
key in the logs.

For the accuracies, predictions are scores (logits or probabilities) with the classes on axis 1: (N, C) or
(N, C, d...). Labels are integer classes (N, d...) or one-hot / probability rows of the
predictions' shape (their argmax is the class). Inputs may be hl Tensors or numpy arrays;
metrics are not differentiable and run on the host.
"""
import numpy as np

from . import errors

__all__ = ["accuracy", "top_k_accuracy", "Metric", "Accuracy", "TopKAccuracy",
           "BinaryAccuracy", "MeanSquaredError", "MeanAbsoluteError", "MeanMetricWrapper"]


def _scores_and_labels(pred, labels, op):
    pred = np.asarray(pred)
    labels = np.asarray(labels)
    if pred.ndim < 2:
        raise errors.ShapeError(f"{op}: expected scores (N, C) or (N, C, d...), got shape "
                                f"{pred.shape}")
    if labels.ndim == pred.ndim and labels.shape == pred.shape:
        labels = labels.argmax(axis=1)  # one-hot or probability rows
    sample_shape = (pred.shape[0],) + pred.shape[2:]
    if labels.shape != sample_shape:
        raise errors.ShapeError(f"{op}: labels of shape {labels.shape} do not fit scores "
                                f"{pred.shape}: expected {sample_shape} (class indices) or "
                                f"{pred.shape} (one-hot)")
    return pred, labels.astype(np.int64)


def _top_k_hits(pred, labels, k, op):
    """Per sample: is the label's score among the k highest? A label counts when fewer than
    k classes score strictly higher (tf.math.in_top_k's rule: ties go in the label's favour)."""
    if not isinstance(k, (int, np.integer)) or k < 1:
        raise errors.ValueError(f"{op}: k must be a positive int, got {k!r}")
    classes = pred.shape[1]
    if labels.size and (labels.min() < 0 or labels.max() >= classes):
        raise errors.IndexError(f"{op}: labels must be in [0, {classes}), got values from "
                                f"{labels.min()} to {labels.max()}")
    own = np.take_along_axis(pred, np.expand_dims(labels, 1), axis=1)
    higher = (pred > own).sum(axis=1)
    return higher < k


def _correct(pred, labels, op):
    pred, labels = _scores_and_labels(pred, labels, op)
    return int((pred.argmax(axis=1) == labels).sum()), labels.size


def _correct_top_k(pred, labels, k, op):
    pred, labels = _scores_and_labels(pred, labels, op)
    return int(_top_k_hits(pred, labels, k, op).sum()), labels.size


def _ratio(hits, total):
    return hits / total if total else 0.0


def accuracy(pred, labels):
    """The fraction of samples whose highest-scoring class (the first on ties, numpy's
    argmax) is the label, as a Python float."""
    return _ratio(*_correct(pred, labels, "accuracy"))


def top_k_accuracy(pred, labels, k=5):
    """The fraction of samples whose label is among the k highest-scoring classes (ties in
    the label's favour), as a Python float."""
    return _ratio(*_correct_top_k(pred, labels, k, "top_k_accuracy"))


class Metric:
    """Accumulates over batches: ``update(pred, y, sample_weight=None)`` per batch,
    ``result()`` for the (weighted) mean so far (0.0 before any sample), ``reset()`` to start
    again. Calling the metric updates it and returns the result (Keras's behaviour).
    ``name`` is its key in fit's logs. A subclass implements ``values(pred, labels)``: one
    number per sample (1/0 for a hit, an error...), a numpy array of shape (N, ...)."""

    def __init__(self, name=None):
        self.name = name or _snake(type(self).__name__)
        self.reset()

    def reset(self):
        self.total, self.count = 0.0, 0

    def values(self, pred, labels):
        raise NotImplementedError

    def update(self, pred, labels, sample_weight=None):
        v = np.asarray(self.values(_host(pred), _host(labels)), dtype=np.float64)
        if sample_weight is None:
            self.total += float(v.sum())
            self.count += v.size
            return
        w = np.asarray(_host(sample_weight), dtype=np.float64)
        if w.shape != v.shape[:1]:
            raise errors.ShapeError(f"{self.name}: sample_weight must have one value per "
                                    f"sample, shape {v.shape[:1]}; got {w.shape}")
        w = w.reshape(w.shape + (1,) * (v.ndim - 1))
        self.total += float((v * w).sum())
        self.count += float(np.broadcast_to(w, v.shape).sum())

    def result(self):
        return _ratio(self.total, self.count)

    def __call__(self, pred, labels, sample_weight=None):
        self.update(pred, labels, sample_weight)
        return self.result()

    def __repr__(self):
        return f"{type(self).__name__}(result={self.result():.4f}, count={self.count})"


def _snake(name):
    out = [name[0].lower()]
    for prev, c in zip(name, name[1:]):
        out.append("_" + c.lower() if c.isupper() and not prev.isupper() else c.lower())
    return "".join(out)


def _host(a):
    if a is None:
        return None
    return a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)


class Accuracy(Metric):
    """Running accuracy (see accuracy)."""

    def values(self, pred, labels):
        pred, labels = _scores_and_labels(pred, labels, type(self).__name__)
        return pred.argmax(axis=1) == labels


class TopKAccuracy(Metric):
    """Running top-k accuracy (see top_k_accuracy)."""

    def __init__(self, k=5, name=None):
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise errors.ValueError(f"TopKAccuracy: k must be a positive int, got {k!r}")
        self.k = k
        super().__init__(name)

    def values(self, pred, labels):
        pred, labels = _scores_and_labels(pred, labels, type(self).__name__)
        return _top_k_hits(pred, labels, self.k, type(self).__name__)


class BinaryAccuracy(Metric):
    """Running accuracy of yes/no predictions: a prediction above ``threshold`` means 1,
    compared with targets in {0, 1} (rounded at 0.5) of the predictions' shape. The default
    0.5 reads probabilities; ``threshold=0`` reads logits."""

    def __init__(self, threshold=0.5, name=None):
        self.threshold = float(threshold)
        super().__init__(name)

    def values(self, pred, labels):
        pred, labels = _same_shape(pred, labels, type(self).__name__)
        return (pred > self.threshold) == (labels > 0.5)


class MeanSquaredError(Metric):
    """Running mean of (pred - target) ** 2."""

    def values(self, pred, labels):
        pred, labels = _same_shape(pred, labels, type(self).__name__)
        return np.square(pred.astype(np.float64) - labels)


class MeanAbsoluteError(Metric):
    """Running mean of |pred - target|."""

    def values(self, pred, labels):
        pred, labels = _same_shape(pred, labels, type(self).__name__)
        return np.abs(pred.astype(np.float64) - labels)


class MeanMetricWrapper(Metric):
    """Any function ``fn(pred, labels)`` returning a number per sample (or one per batch,
    counted once per sample of the batch) as a running mean named after the function."""

    def __init__(self, fn, name=None):
        self.fn = fn
        super().__init__(name or getattr(fn, "__name__", "metric"))

    def values(self, pred, labels):
        v = np.asarray(_host(self.fn(pred, labels)), dtype=np.float64)
        return np.full(len(pred), float(v)) if v.ndim == 0 else v


def _same_shape(pred, labels, op):
    pred, labels = np.asarray(pred), np.asarray(labels)
    if labels.shape != pred.shape and labels.size == pred.size:
        labels = labels.reshape(pred.shape)  # (N,) targets for an (N, 1) output
    if labels.shape != pred.shape:
        raise errors.ShapeError(f"{op}: predictions {pred.shape} and targets {labels.shape} "
                                f"must have the same shape")
    return pred, labels.astype(np.float64)
