"""SINGA's metric classes (its older ``singa.metric`` module) over hl.metrics:
``Accuracy().evaluate(x, y)`` is the fraction of rows whose arg-max is the label (labels as
indices or one-hot rows)."""
import numpy as np

from .. import metrics as _metrics
from .tensor import to_numpy


class Metric:
    def forward(self, x, y):
        raise NotImplementedError

    def evaluate(self, x, y):
        return float(np.mean(to_numpy(self.forward(x, y))))


def _labels(y):
    y = to_numpy(y)
    return y.argmax(axis=-1) if y.ndim == 2 else y.reshape(-1)


class Accuracy(Metric):
    def forward(self, x, y):
        """Per-sample correctness (1.0 or 0.0) as a Tensor."""
        from .tensor import from_numpy
        return from_numpy((to_numpy(x).argmax(axis=-1) == _labels(y)).astype(np.float32))

    def evaluate(self, x, y):
        return float(_metrics.accuracy(x, _labels(y)))


__all__ = ["Metric", "Accuracy"]
