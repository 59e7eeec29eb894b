"""The cost layers: each gives one cost per sample, a (N,) tensor; training minimises the
sum over the batch (v2's gradient is that of the sum), and reports it per sample.

classification_cost also attaches v2's classification_error_evaluator, the fraction of
samples whose largest output is not the label."""
import numpy as np

from ... import errors
from ...autograd import functional as F
from ..activation import Softmax
from ..graph import Operator
from .values import Seq, flat


def _labels(y, layer):
    if isinstance(y, Seq):
        raise errors.UnsupportedError(f"cost {layer!r}: sequence labels are not supported")
    return F.reshape(y, -1)


def _weighted(cost, weight):
    if weight is not None:
        cost = cost * F.reshape(flat(weight), -1)
    return cost


class Cost(Operator):
    """``coeff`` scales the cost's gradient only, as v2 did: the values (what EndIteration
    and test report) stay unscaled; the trainer weights each cost by its coeff."""
    is_cost = True

    def __init__(self, name, input, label, weight, coeff):
        super().__init__(name, [input, label] + ([weight] if weight is not None else []))
        self.coeff = float(coeff)
        self.has_weight = weight is not None
        self.evaluators = []
        if input.is_seq or label.is_seq:
            raise errors.UnsupportedError(f"cost {name!r}: costs over sequences are not "
                                          f"supported; pool the sequence first")

    def compute(self, run, x, y, w=None):
        return _weighted(self.per_sample(run, x, y), w)


class CrossEntropy(Cost):
    """-log(p[label]) of the input's probabilities. When the input layer ends in Softmax,
    the log-probabilities come from its pre-activation values (log_softmax), which is the same
    number without the overflow of log(softmax)."""
    kind = "multi-class-cross-entropy"

    def per_sample(self, run, p, y):
        src = self.inputs[0].op
        labels = _labels(y, self.name)
        size = self.inputs[0].size
        if isinstance(src.act, Softmax) and not src.drop_rate:
            return F.softmax_cross_entropy(flat(run.pre_activation(src)), labels,
                                           reduction="none")
        logp = F.log(F.clamp(flat(p), 1e-30, None))
        return -F.sum(logp * F.one_hot(labels, size, dtype=logp.dtype), axis=1)


class SquareError(Cost):
    """sum over the features of (input - label)^2 (no factor 1/2, as v2)."""
    kind = "square_error"

    def per_sample(self, run, x, y):
        x, y = flat(x), flat(y)
        if tuple(x.shape) != tuple(y.shape):
            raise errors.ShapeError(f"square_error_cost {self.name!r}: input {tuple(x.shape)} "
                                    f"and label {tuple(y.shape)} differ")
        d = x - y
        return F.sum(d * d, axis=1)


class ClassificationError:
    """v2's classification_error_evaluator: the share of samples whose arg-max output differs
    from the label, weighted by samples (running over a batch or a pass)."""
    name = "classification_error_evaluator"

    def __init__(self, input, label):
        self.input, self.label = input, label
        self.reset()

    def reset(self):
        self.wrong = 0
        self.total = 0

    def update(self, outputs):
        pred = np.asarray(flat(outputs[self.input]).numpy()).argmax(axis=1)
        labels = np.asarray(outputs[self.label].numpy()).reshape(-1)
        self.wrong += int((pred != labels).sum())
        self.total += len(labels)

    def absorb(self, other):
        """Adds another evaluator's counts (a batch's into the pass's)."""
        self.wrong += other.wrong
        self.total += other.total

    def result(self):
        return self.wrong / self.total if self.total else 0.0
