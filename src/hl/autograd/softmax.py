"""Softmax, log-softmax and the classification losses on them, with gradients.

softmax and log_softmax keep their output for backward (the core's softmax_grad kernels need
only y and dy). softmax_cross_entropy keeps the log-probabilities its kernel returns and
hands them to softmax_cross_entropy_grad; with probability targets the target gets a
gradient too (-log_softmax(logits) per class, as in PyTorch). nll_loss takes
log-probabilities and integer labels: it picks -log_prob[label] per sample.
"""
import numpy as np

from .. import dtypes as _dt
from .. import errors, ops
from .._tensor import Tensor
from ..ops._util import as_tensor
from ._nn import as_input
from .function import Function
from .placeholder import Placeholder, follow

_unary, _binary, _select = ops.elementwise.unary, ops.elementwise.binary, ops.elementwise.select

__all__ = ["softmax", "log_softmax", "softmax_cross_entropy", "nll_loss"]

_REDUCTIONS = ("mean", "sum", "none")


class Softmax(Function):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    grad_kernel = staticmethod(ops.softmax_grad)
    kernel = staticmethod(ops.softmax_forward)

    def __init__(self, axis):
        self.axis = axis

    def forward(self, x):
        y = self.kernel(x, self.axis)
        if self.needs:
            self.y = y.detach()  # not y itself: y -> creator -> y would be a cycle
        return y

    def backward(self, dy):
        return self.grad_kernel(self.y, dy, self.axis)


class LogSoftmax(Softmax):
    grad_kernel = staticmethod(ops.log_softmax_grad)
    kernel = staticmethod(ops.log_softmax_forward)


def softmax(x, axis=-1, out=None):
    """exp(x) / sum(exp(x)) along axis (max-shifted, so large inputs do not overflow)."""
    if out is not None:
        return ops.softmax_forward(x, axis, out=out)
    return Softmax(int(axis))(as_input(x, "softmax"))


def log_softmax(x, axis=-1, out=None):
    """x - logsumexp(x) along axis."""
    if out is not None:
        return ops.log_softmax_forward(x, axis, out=out)
    return LogSoftmax(int(axis))(as_input(x, "log_softmax"))


# ---- losses ----------------------------------------------------------------------------

def _check_reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise errors.ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got "
                                f"{reduction!r}")


def _target(target, like):
    """Labels as int64, probabilities in like's dtype, on like's device."""
    if isinstance(target, (Tensor, Placeholder)):
        return target
    arr = np.asarray(target)
    if arr.dtype.kind in "iub":
        return as_tensor(arr.astype(np.int64), device=like.device)
    return as_tensor(arr, dtype=like.dtype, device=like.device)


def _sample_shape(x):
    """The per-sample loss shape of scores (N, C, d...) or of one sample (C,)."""
    return () if x.ndim == 1 else (x.shape[0],) + tuple(x.shape[2:])


def _infer_loss(op, x, target, reduction, soft_ok):
    if x.ndim < 1:
        raise errors.ShapeError(f"{op}: expected scores (N, C, d...) or (C,), got a 0-d tensor")
    samples = _sample_shape(x)
    if target.dtype.is_integer or not soft_ok:
        if tuple(target.shape) != samples:
            raise errors.ShapeError(f"{op}: labels of shape {tuple(target.shape)} do not fit "
                                    f"scores {tuple(x.shape)}: expected {samples}")
    elif tuple(target.shape) != tuple(x.shape):
        raise errors.ShapeError(f"{op}: probability targets of shape {tuple(target.shape)} must "
                                f"have the logits' shape {tuple(x.shape)}")
    return (samples if reduction == "none" else ()), x.dtype


def _per_sample(dloss, samples, reduction, count):
    """The loss gradient per sample (shape `samples`) for this reduction; count: how many
    samples a 'mean' divided by."""
    if reduction == "none":
        return dloss
    if reduction == "mean":
        dloss = dloss / float(count) if count else dloss * float("nan")
    return ops.expand_forward(ops.reshape_forward(dloss, *([1] * len(samples))), *samples)


def _class_axis_view(g, x):
    """A per-sample tensor (N, d...) as (N, 1, d...) (or (C,)-broadcastable for one sample),
    to multiply with tensors of the scores' shape."""
    if x.ndim == 1:
        return ops.reshape_forward(g, 1)
    return ops.unsqueeze_forward(g, 1)


class SoftmaxCrossEntropy(Function):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    log_prob = None

    def __init__(self, ignore_index, reduction):
        self.ignore_index, self.reduction = int(ignore_index), reduction

    def forward(self, logits, target):
        loss, lp = ops.softmax_cross_entropy_forward(logits, target, self.ignore_index,
                                                     self.reduction, return_log_prob=True)
        self.log_prob = lp
        if self.needs:
            self.target = target
        return loss

    def backward(self, dy):
        nl, nt = self.needs
        lp, target = self.log_prob, self.target
        dlogits = ops.softmax_cross_entropy_grad(lp, target, dy, self.ignore_index,
                                                 self.reduction) if nl else None
        dtarget = None
        if nt:  # probability targets: d(-sum(t * log_prob)) / dt = -log_prob
            samples = _sample_shape(lp)
            n = int(np.prod(samples)) if samples else 1
            g = _per_sample(dy, samples, self.reduction, n)
            dtarget = _unary("neg", lp * _class_axis_view(g, lp))
        return dlogits, dtarget


def softmax_cross_entropy(logits, target, ignore_index=-100, reduction="mean",
                          return_log_prob=False):
    """Cross-entropy of softmax(logits) against target, like torch's cross_entropy.

    logits (N, C, d...) or one sample (C,); target: class labels (int, (N, d...)) or
    probabilities (one-hot or soft, logits' shape; they get a gradient too). Labels equal to
    ignore_index add 0 and no gradient. reduction: 'none' (per sample), 'sum', or 'mean'
    (divided by the samples not ignored). return_log_prob=True also returns
    log_softmax(logits) (no gradient flows through it)."""
    op = "softmax_cross_entropy"
    _check_reduction(reduction, op)
    logits = as_input(logits, op)
    target = _target(target, logits)
    fn = SoftmaxCrossEntropy(ignore_index, reduction)
    loss = fn(logits, target)
    if not return_log_prob:
        return loss
    return loss, follow(fn.log_prob, loss)


class NLLLoss(Function):
    autocast = "float32"  # hl.amp (autograd/autocast.py)
    def __init__(self, ignore_index, reduction):
        self.ignore_index, self.reduction = int(ignore_index), reduction

    def forward(self, log_prob, target):
        op = "nll_loss"
        single = log_prob.ndim == 1
        self._check(log_prob, target)
        if log_prob.is_meta or target.is_meta:  # no labels to read: the loss's shape alone
            shape = target.shape if self.reduction == "none" else ()
            return ops.empty(shape, dtype=log_prob.dtype, device=log_prob.device)
        labels = target.numpy()
        classes = log_prob.shape[0 if single else 1]
        valid = labels != self.ignore_index
        bad = valid & ((labels < 0) | (labels >= classes))
        if bad.any():
            raise errors.IndexError(f"{op}: label {int(labels[bad].flat[0])} is out of range for "
                                    f"{classes} classes (ignore_index={self.ignore_index})")
        count = int(np.count_nonzero(valid))
        safe = np.where(valid, labels, 0)
        lp = ops.reshape_forward(log_prob, 1, classes) if single else log_prob
        idx = as_tensor(np.expand_dims(safe.reshape(lp.shape[:1] + lp.shape[2:]), 1),
                        device=log_prob.device)
        mask = as_tensor(valid.astype(log_prob.dtype.np), device=log_prob.device)
        picked = ops.reshape_forward(ops.gather_elements_forward(lp, idx, axis=1), *labels.shape)
        loss = _unary("neg", picked * mask)
        if self.reduction != "none":
            total = ops.reduction("sum", loss)
            loss = total / float(count) if self.reduction == "mean" and count else \
                (total * float("nan") if self.reduction == "mean" else total)
        if self.needs:
            self.idx, self.mask, self.count = idx, mask, count
            self.lp_shape, self.classes = lp.shape, classes
        return loss

    def _check(self, log_prob, target):
        _infer_loss("nll_loss", log_prob, target, self.reduction, False)
        if not target.dtype.is_integer:
            raise errors.DTypeError(f"nll_loss: expected integer class labels, got "
                                    f"{target.dtype.name}")

    def backward(self, dy):
        samples = tuple(self.mask.shape)
        g = _per_sample(dy, samples, self.reduction, self.count) * self.mask
        onehot = ops.one_hot(self.idx, self.classes, axis=1, dtype=dy.dtype)
        g = ops.reshape_forward(g, self.lp_shape[0], 1, *self.lp_shape[2:])
        dlp = _unary("neg", ops.reshape_forward(onehot, *self.lp_shape) * g)
        return (ops.reshape_forward(dlp, self.classes) if len(samples) == 0 else dlp), None


def nll_loss(log_prob, target, ignore_index=-100, reduction="mean"):
    """Negative log-likelihood of integer labels under log-probabilities, as
    torch.nn.functional.nll_loss: log_prob (N, C, d...) or one sample (C,), target (N, d...)
    (or 0-d). Labels equal to ignore_index add 0 and no gradient; 'mean' divides by the
    samples not ignored. Labels out of range raise hl.errors.IndexError."""
    op = "nll_loss"
    _check_reduction(reduction, op)
    log_prob = as_input(log_prob, op)
    return NLLLoss(ignore_index, reduction)(log_prob, _target(target, log_prob))
