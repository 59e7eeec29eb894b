"""Metrics: accuracy and top-k accuracy as functions returning Python floats, and Keras-like
stateful classes that accumulate over batches (update, result, reset).

Predictions are scores (logits or probabilities) with the classes on axis 1: (N, C) or
(N, C, d...). Labels are integer classes (N, d...) or one-hot / probability rows of the
predictions' shape (their argmax is the class). Inputs may be hl Tensors or numpy arrays;
metrics are not differentiable and run on the host.
"""
import numpy as np

from . import errors

__all__ = ["accuracy", "top_k_accuracy", "Metric", "Accuracy", "TopKAccuracy"]


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
    """Accumulates over batches: ``update(pred, y)`` per batch, ``result()`` for the value so
    far (0.0 before any sample), ``reset()`` to start again. Calling the metric updates it
    and returns the result (Keras's behaviour)."""

    def __init__(self):
        self.reset()

    def reset(self):
        self.hits, self.count = 0, 0

    def _count(self, pred, labels):
        raise NotImplementedError

    def update(self, pred, labels):
        hits, count = self._count(pred, labels)
        self.hits += hits
        self.count += count

    def result(self):
        return _ratio(self.hits, self.count)

    def __call__(self, pred, labels):
        self.update(pred, labels)
        return self.result()

    def __repr__(self):
        return f"{type(self).__name__}(result={self.result():.4f}, count={self.count})"


class Accuracy(Metric):
    """Running accuracy (see accuracy)."""

    def _count(self, pred, labels):
        return _correct(pred, labels, "Accuracy")


class TopKAccuracy(Metric):
    """Running top-k accuracy (see top_k_accuracy)."""

    def __init__(self, k=5):
        if not isinstance(k, (int, np.integer)) or k < 1:
            raise errors.ValueError(f"TopKAccuracy: k must be a positive int, got {k!r}")
        self.k = k
        super().__init__()

    def _count(self, pred, labels):
        return _correct_top_k(pred, labels, self.k, "TopKAccuracy")
