"""The kernels of softmax, log-softmax and the softmax cross-entropy loss, forward and
backward (the ops users call, with their gradients, are in hl.autograd.softmax).

Axes may be negative. Integer inputs to softmax compute in float32. The cross-entropy takes
logits (N, C, d...) with the classes on axis 1 (or a single sample (C,)), and a target that
is either int32/int64 class labels (N, d...) or probabilities with the logits' shape (one-hot
or soft labels), as ``torch.nn.functional.cross_entropy`` does.
"""
import numpy as np

from .. import _core, errors
from .. import dtypes as _dt
from ._util import Tensor, _wrap, as_tensor, into

__all__ = ["softmax_forward", "log_softmax_forward", "softmax_grad", "log_softmax_grad",
           "softmax_cross_entropy_forward", "softmax_cross_entropy_grad"]

_REDUCTIONS = ("mean", "sum", "none")


def _float(x):
    x = as_tensor(x)
    if not x.dtype.is_floating:
        x = x.astype(_dt.float32)  # as PyTorch does for integer input
    return x


def softmax_forward(x, axis=-1, out=None):
    """exp(x) / sum(exp(x)) along axis (max-shifted, so large inputs do not overflow)."""
    x = _float(x)
    return _wrap(_core.call("softmax", _core.OPS["softmax"], x._h, int(axis),
                            _core.out(into(out))))


def log_softmax_forward(x, axis=-1, out=None):
    """x - logsumexp(x) along axis."""
    x = _float(x)
    return _wrap(_core.call("softmax", _core.OPS["log_softmax"], x._h, int(axis),
                            _core.out(into(out))))


def softmax_grad(y, dy, axis=-1, out=None):
    """Gradient of softmax from its output y and the output's gradient dy:
    y * (dy - sum(dy * y, axis))."""
    y, dy = as_tensor(y), as_tensor(dy)
    return _wrap(_core.call("softmax_grad", _core.OPS["softmax"], y._h, dy._h, int(axis),
                            _core.out(into(out))))


def log_softmax_grad(y, dy, axis=-1, out=None):
    """Gradient of log_softmax from its output y and the output's gradient dy:
    dy - exp(y) * sum(dy, axis)."""
    y, dy = as_tensor(y), as_tensor(dy)
    return _wrap(_core.call("softmax_grad", _core.OPS["log_softmax"], y._h, dy._h, int(axis),
                            _core.out(into(out))))


# ---- cross-entropy ------------------------------------------------------------------------

def _ce_args(logits, target):
    """Tensors for the core: logits (N, C, d...) and target; a 1-D logits (C,) with a 0-d
    label (or a (C,) probability vector) is one sample. Returns (logits, target, single)."""
    logits = as_tensor(logits)
    if not isinstance(target, Tensor):
        arr = np.asarray(target)
        if arr.dtype.kind in "iu":
            target = as_tensor(arr.astype(np.int64), device=logits.device)
        else:
            target = as_tensor(arr, dtype=logits.dtype, device=logits.device)
    single = logits.ndim == 1
    if single:
        logits = logits.reshape(1, -1)
        target = target.reshape(1) if target.dtype.is_integer else target.reshape(1, -1)
    return logits, target, single


def _reduction(reduction, op):
    if reduction not in _REDUCTIONS:
        raise errors.ValueError(f"{op}: reduction must be one of {_REDUCTIONS}, got "
                                f"{reduction!r}")


def _total(t):
    """The sum of t's elements as a 0-d tensor of t's dtype."""
    from .reduce import reduction
    r = reduction("sum", t)
    return r if r.dtype is t.dtype else r.astype(t.dtype)


def _count(target, ignore_index, loss_numel):
    """How many samples count towards a 'mean': those whose label is not ignore_index
    (every sample for probability targets)."""
    if not target.dtype.is_integer or target.is_meta:  # meta: no labels, only shapes matter
        return loss_numel
    labels = target.cpu().numpy()
    return int(labels.size - np.count_nonzero(labels == ignore_index))


def softmax_cross_entropy_forward(logits, target, ignore_index=-100, reduction="mean",
                                  return_log_prob=False):
    """Cross-entropy of softmax(logits) against target, like torch's cross_entropy.

    target: class labels (int, shape (N, d...)) or probabilities (logits' shape). Samples
    whose label is ignore_index add 0 and no gradient. reduction: 'none' gives the per-sample
    losses (N, d...); 'sum' their sum; 'mean' their sum divided by the number of samples
    that are not ignored (NaN when every sample is ignored, as in PyTorch).
    return_log_prob=True also returns log_softmax(logits) (what the gradient needs).
    Labels out of range raise hl.errors.IndexError.
    """
    op = "softmax_cross_entropy"
    _reduction(reduction, op)
    logits, target, single = _ce_args(logits, target)
    r = _core.call("softmax_cross_entropy", logits._h, target._h, int(ignore_index), _core.OUT,
                   _core.OUT if return_log_prob else None)
    loss_h, lp_h = r if return_log_prob else (r, None)
    loss = _wrap(loss_h)
    if single:
        loss = loss.reshape(())
    if reduction == "sum":
        loss = _total(loss)
    elif reduction == "mean":
        n = _count(target, ignore_index, loss.size)
        loss = _total(loss) / float(n) if n else _total(loss) * float("nan")
    if not return_log_prob:
        return loss
    lp = _wrap(lp_h)
    return loss, (lp.reshape(-1) if single else lp)


def softmax_cross_entropy_grad(log_prob, target, dloss, ignore_index=-100, reduction="none"):
    """Gradient of softmax_cross_entropy with respect to the logits, from the log_prob it
    returned: (softmax * sum(target) - target) * dloss, which is softmax - one_hot(label)
    for labels; ignored samples get 0.

    dloss: the gradient of the loss as returned with this reduction: per sample (N, d...)
    for 'none', a scalar for 'sum' and 'mean' ('mean' divides it by the number of samples
    that are not ignored).
    """
    op = "softmax_cross_entropy_grad"
    _reduction(reduction, op)
    log_prob, target, single = _ce_args(log_prob, target)
    dloss = as_tensor(dloss, dtype=log_prob.dtype, device=log_prob.device)
    sample_shape = (log_prob.shape[0],) + log_prob.shape[2:]
    if reduction == "none":
        if single:
            dloss = dloss.reshape(1)
    else:
        if dloss.size != 1:
            raise errors.ShapeError(f"{op}: with reduction={reduction!r} dloss must be a "
                                    f"scalar, got shape {dloss.shape}")
        if reduction == "mean":
            n = _count(target, ignore_index, int(np.prod(sample_shape)))
            dloss = dloss / float(n) if n else dloss * float("nan")
        dloss = dloss.reshape(*([1] * len(sample_shape))).expand(*sample_shape)
    g = _wrap(_core.call("softmax_cross_entropy_grad", log_prob._h, target._h, dloss._h,
                         int(ignore_index), _core.OUT))
    return g.reshape(-1) if single else g
