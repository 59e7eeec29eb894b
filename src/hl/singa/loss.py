"""SINGA's loss classes (its older ``singa.loss`` module): callables on (prediction, target)
over hl's losses, each returning a scalar Tensor."""
from . import autograd


class Loss:
    def __call__(self, x, y):
        return self.forward(x, y)

    def forward(self, x, y):
        raise NotImplementedError


class SoftmaxCrossEntropy(Loss):
    """Mean over the batch of the cross entropy of softmax(x) and y (indices or one-hot)."""

    def forward(self, x, y):
        return autograd.softmax_cross_entropy(x, y)


class SquaredError(Loss):
    """The mean of the squared differences."""

    def forward(self, x, y):
        return autograd.mse_loss(x, y)


class SigmoidCrossEntropy(Loss):
    """Binary cross entropy of sigmoid(x) and y, averaged over the batch."""

    def forward(self, x, y):
        return autograd.binary_cross_entropy(autograd.sigmoid(x), y)


__all__ = ["Loss", "SoftmaxCrossEntropy", "SquaredError", "SigmoidCrossEntropy"]
