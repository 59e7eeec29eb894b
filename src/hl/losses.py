"""Loss functions: functional forms and callable classes, differentiable through hl.autograd.

Every loss takes (prediction, target) in that order, as PyTorch and SINGA do (Keras's
classes take (y_true, y_pred); hl keeps one order everywhere), and a reduction: 'mean'
(default), 'sum' or 'none' (one loss per sample). Targets may be hl Tensors, numpy arrays or
lists; they get a gradient only when they are tensors that require one. The functional forms
take their arguments in the order of the autograd ops (hl.softmax_cross_entropy,
hl.nll_loss): ignore_index before reduction.

    loss = hl.losses.softmax_cross_entropy(logits, labels)      # functional
    loss_fn = hl.losses.SoftmaxCrossEntropy()                   # a callable object
    loss = loss_fn(logits, labels)
"""
from . import dtypes as _dt
from . import errors
from ._tensor import Tensor
from .autograd import functional as F
from .autograd.placeholder import Placeholder
from .ops._util import as_tensor

__all__ = ["softmax_cross_entropy", "cross_entropy", "mse", "mean_squared_error", "mae",
           "mean_absolute_error", "binary_cross_entropy_with_logits", "nll", "nll_loss", "Loss",
           "SoftmaxCrossEntropy", "CrossEntropyLoss", "MSELoss", "MeanSquaredError",
           "MAELoss", "L1Loss", "MeanAbsoluteError", "BCEWithLogits", "BCEWithLogitsLoss",
           "NLLLoss"]

_REDUCTIONS = ("mean", "sum", "none")


def _check_reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise errors.ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got "
                                f"{reduction!r}")


def _reduce(loss, reduction):
    if reduction == "mean":
        return F.mean(loss)
    if reduction == "sum":
        return F.sum(loss)
    return loss


_HALVES = (_dt.float16, _dt.bfloat16)


def _input(x):
    return x if isinstance(x, (Tensor, Placeholder)) else as_tensor(x)


def _like(target, pred):
    """target as a tensor in pred's float dtype and on its device."""
    if isinstance(target, (Tensor, Placeholder)):
        return target if target.dtype is pred.dtype else F.cast(target, pred.dtype)
    return as_tensor(target, dtype=pred.dtype, device=pred.device)


def _same_shape(pred, target, op):
    if tuple(pred.shape) != tuple(target.shape):
        raise errors.ShapeError(f"{op}: prediction {tuple(pred.shape)} and target "
                                f"{tuple(target.shape)} must have the same shape")


# ---- functional -------------------------------------------------------------------------

def softmax_cross_entropy(logits, target, ignore_index=-100, reduction="mean"):
    """Cross-entropy of softmax(logits) (N, C, d...) against integer labels (N, d...) or
    one-hot / probability targets of the logits' shape, as torch's cross_entropy. Labels equal
    to ignore_index count for nothing (also not in the mean)."""
    _check_reduction(reduction, "softmax_cross_entropy")
    return F.softmax_cross_entropy(logits, target, ignore_index=ignore_index,
                                   reduction=reduction)


cross_entropy = softmax_cross_entropy


def _of_difference(fn, pred, target, reduction, op):
    """fn(pred - target), reduced: the losses that compare element by element."""
    _check_reduction(reduction, op)
    pred = _input(pred)
    target = _like(target, pred)
    _same_shape(pred, target, op)
    return _reduce(fn(pred - target), reduction)


def mse(pred, target, reduction="mean"):
    """Mean squared error: (pred - target) ** 2, averaged (or summed, or per element)."""
    return _of_difference(F.square, pred, target, reduction, "mse")


mean_squared_error = mse


def mae(pred, target, reduction="mean"):
    """Mean absolute error: |pred - target|, averaged (or summed, or per element), as torch's
    l1_loss and Keras's mean_absolute_error."""
    return _of_difference(F.abs, pred, target, reduction, "mae")


mean_absolute_error = mae


def binary_cross_entropy_with_logits(logits, target, reduction="mean"):
    """Binary cross-entropy of sigmoid(logits) against targets in [0, 1], computed from the
    logits without overflow: max(x, 0) - x * y + log1p(exp(-|x|)), i.e. softplus(x) - x * y
    (the core's softplus takes that stable form), as
    torch.nn.functional.binary_cross_entropy_with_logits."""
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    logits = _input(logits)
    target = _like(target, logits)
    _same_shape(logits, target, "binary_cross_entropy_with_logits")
    return _reduce(F.softplus(logits) - logits * target, reduction)


def nll(log_prob, target, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of integer labels (N, d...) under log-probabilities
    (N, C, d...), e.g. the output of log_softmax, as torch's nll_loss."""
    _check_reduction(reduction, "nll")
    return F.nll_loss(log_prob, target, ignore_index=ignore_index, reduction=reduction)


nll_loss = nll


# ---- classes ----------------------------------------------------------------------------

class Loss:
    """A loss as an object: ``loss_fn(pred, target)`` (or ``loss_fn.forward(pred, target)``,
    SINGA's spelling) returns the loss tensor. ``loss_fn(pred, target, sample_weight=w)``
    weights each sample's loss by w (one number per sample) as Keras does: with 'mean',
    ``sum(w * loss) / number of loss elements``. A subclass implements
    ``compute(pred, target, reduction)``."""

    def __init__(self, reduction="mean"):
        _check_reduction(reduction, type(self).__name__)
        self.reduction = reduction

    def compute(self, pred, target, reduction):
        raise NotImplementedError(f"{type(self).__name__} defines neither compute() nor "
                                  f"forward()")

    def forward(self, pred, target):
        return self.compute(pred, target, self.reduction)

    def __call__(self, pred, target, sample_weight=None):
        if getattr(pred, "dtype", None) in _HALVES:  # Keras: losses read y_pred as float32
            pred = F.cast(pred, _dt.float32)
        if sample_weight is None:
            return self.forward(pred, target)
        if type(self).compute is Loss.compute:
            raise errors.UnsupportedError(
                f"{type(self).__name__}: sample weights need the loss per sample; define "
                f"compute(pred, target, reduction) (forward alone gives only the reduced loss)")
        return _weighted(self.compute(pred, target, "none"), sample_weight, self.reduction,
                         type(self).__name__)

    def __repr__(self):
        return f"{type(self).__name__}(reduction={self.reduction!r})"


def _weighted(per_element, sample_weight, reduction, op):
    """per_element (N, ...) weighted by sample_weight (N,), then reduced."""
    w = _like(sample_weight, per_element)
    n = per_element.shape[0] if per_element.ndim else 1
    if tuple(w.shape) != (n,):
        raise errors.ShapeError(f"{op}: sample_weight must have one value per sample, shape "
                                f"({n},); got {tuple(w.shape)}")
    w = F.reshape(w, (n,) + (1,) * (per_element.ndim - 1))
    return _reduce(per_element * w, reduction)


class SoftmaxCrossEntropy(Loss):
    """softmax_cross_entropy as an object; labels integer or one-hot / probabilities."""

    def __init__(self, reduction="mean", ignore_index=-100):
        super().__init__(reduction)
        self.ignore_index = ignore_index

    def compute(self, logits, target, reduction):
        return softmax_cross_entropy(logits, target, self.ignore_index, reduction)


CrossEntropyLoss = SoftmaxCrossEntropy


class MSELoss(Loss):
    """mse as an object."""

    def compute(self, pred, target, reduction):
        return mse(pred, target, reduction)


MeanSquaredError = MSELoss


class MAELoss(Loss):
    """mae as an object."""

    def compute(self, pred, target, reduction):
        return mae(pred, target, reduction)


L1Loss = MeanAbsoluteError = MAELoss


class BCEWithLogits(Loss):
    """binary_cross_entropy_with_logits as an object."""

    def compute(self, logits, target, reduction):
        return binary_cross_entropy_with_logits(logits, target, reduction)


BCEWithLogitsLoss = BCEWithLogits


class NLLLoss(Loss):
    """nll as an object."""

    def __init__(self, reduction="mean", ignore_index=-100):
        super().__init__(reduction)
        self.ignore_index = ignore_index

    def compute(self, log_prob, target, reduction):
        return nll(log_prob, target, self.ignore_index, reduction)
