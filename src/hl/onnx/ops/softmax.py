"""Softmax, LogSoftmax, Hardmax, the losses (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss) and Dropout: import handlers and export rules.
"""

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ...autograd.random import Dropout
from ...autograd.softmax import LogSoftmax, NLLLoss, Softmax, SoftmaxCrossEntropy
from ..registry import exports, onnx_op
from ._util import axis_of, const, F, float_input, prod, via_float32


# ---- Dropout ---------------------------------------------------------------------------

@onnx_op("Dropout")
def dropout(n, x, ratio=None, training_mode=None):
    if n.opset >= 12:
        p = float(n.scalar(ratio, 0.5))
        active = n.training or bool(n.scalar(training_mode, False))
    else:
        p = float(n.attr("ratio", 0.5))
        active = n.training
    if not 0.0 <= p < 1.0:
        raise n.error(f"ratio must be in [0, 1), got {p}", errors.ValueError)
    mask_dtype = "bool" if n.opset >= 10 else x.dtype.name
    if not active or p == 0.0:
        mask = F.ones(*x.shape, dtype=mask_dtype, device=x.device) if n.wants(1) else None
        return x, mask
    keep = F.ge(F.rand(*x.shape, device=x.device), p)
    y = F.mul(F.mul(x, F.cast(keep, x.dtype.name)), 1.0 / (1.0 - p))
    return y, F.cast(keep, mask_dtype)


# ---- Softmax, LogSoftmax, Hardmax --------------------------------------------------------

def _along_axis(n, x, fn):
    """Before opset 13 the input is seen as 2-D, split at ``axis`` (default 1); from 13 the
    op acts along one axis (default -1)."""
    if n.opset < 13:
        axis = axis_of(n, n.attr("axis", 1), x.ndim)
        lead = prod(x.shape[:axis])
        return F.reshape(fn(F.reshape(x, lead, prod(x.shape[axis:])), 1), *x.shape)
    return fn(x, axis_of(n, n.attr("axis", -1), x.ndim))


@onnx_op("Softmax")
@via_float32
def softmax(n, x):
    return _along_axis(n, x, lambda t, a: F.softmax(t, axis=a))


@onnx_op("LogSoftmax")
@via_float32
def log_softmax(n, x):
    return _along_axis(n, x, lambda t, a: F.log_softmax(t, axis=a))


@onnx_op("Hardmax")
def hardmax(n, x):
    def one_hot_max(t, axis):
        if t.size == 0:
            return t
        return F.one_hot(F.argmax(t, axis=axis), t.shape[axis], axis=axis, dtype=t.dtype)
    return _along_axis(n, x, one_hot_max)


# ---- losses ------------------------------------------------------------------------------

def _nll(n, log_prob, target, weight, reduction, ignore_index):
    """ONNX NegativeLogLikelihoodLoss on log-probabilities (N, C, d...)."""
    if log_prob.ndim < 2:
        raise n.error(f"input must be (N, C, d...), got shape {log_prob.shape}",
                      errors.ShapeError)
    c = log_prob.shape[1]
    want = (log_prob.shape[0],) + tuple(log_prob.shape[2:])
    if tuple(target.shape) != want:
        raise n.error(f"target of shape {target.shape} must be {want} for input "
                      f"{log_prob.shape}", errors.ShapeError)
    if target.dtype.name not in ("int32", "int64"):
        raise n.error(f"target must be int32 or int64, got {target.dtype.name}",
                      errors.DTypeError)
    if weight is not None and tuple(weight.shape) != (c,):
        raise n.error(f"weight of shape {weight.shape} must be ({c},)", errors.ShapeError)
    if reduction not in ("none", "sum", "mean"):
        raise n.error(f"reduction must be none, sum or mean, got {reduction!r}",
                      errors.ValueError)
    labels = n.host(target)
    bad = (labels < 0) | (labels >= c)
    if ignore_index is not None:
        bad &= labels != ignore_index
    if bad.any():
        raise n.error(f"target value {int(labels[bad][0])} is outside [0, {c})"
                      + ("" if ignore_index is None else f" and not ignore_index {ignore_index}"),
                      errors.IndexError)
    t = F.cast(target, "int64")
    keep = None
    if ignore_index is not None:
        keep = F.ne(t, ignore_index)
        t = F.where(keep, t, const(np.int64(0), like=t))
    picked = F.squeeze(F.gather_elements(log_prob, F.unsqueeze(t, 1), axis=1), 1)
    loss = F.neg(picked)
    w = None if weight is None else F.gather(weight, t, axis=0)
    if keep is not None:
        mask = F.cast(keep, log_prob.dtype.name)
        w = mask if w is None else F.mul(w, mask)
    if w is not None:
        loss = F.mul(loss, w)
    if reduction == "none":
        return loss
    if reduction == "sum":
        return F.sum(loss)
    if w is None:
        return F.mean(loss)
    return F.div(F.sum(loss), F.sum(w))  # the weighted mean over the samples not ignored


@onnx_op("NegativeLogLikelihoodLoss", since=12)
def nll_loss(n, x, target, weight=None):
    return _nll(n, x, target, weight, n.attr("reduction", "mean"), n.attr("ignore_index"))


@onnx_op("SoftmaxCrossEntropyLoss", since=12)
def softmax_cross_entropy(n, scores, target, weight=None):
    if scores.ndim < 2:
        raise n.error(f"scores must be (N, C, d...), got shape {scores.shape}",
                      errors.ShapeError)
    log_prob = F.log_softmax(scores, axis=1)
    loss = _nll(n, log_prob, target, weight, n.attr("reduction", "mean"),
                n.attr("ignore_index"))
    return loss, log_prob


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- softmax and losses ------------------------------------------------------------------

@exports(Softmax, LogSoftmax)
def export_softmax(g, f, xs, ys):
    (x,), (y,) = xs, ys
    op = "LogSoftmax" if isinstance(f._fn, LogSoftmax) else "Softmax"
    g.op(op, [float_input(g, x)], out=y.name, axis=int(f.axis))


def _batched(g, scores, target):
    """One sample (C,) with its label () as a batch of one, for ONNX's losses."""
    if scores.ndim == 1:
        return g.unsqueeze(scores.name, [0]), g.unsqueeze(target.name, [0]), True
    return scores.name, target.name, False


def _loss_out(g, loss, single, reduction, y):
    if single and reduction == "none":
        return g.squeeze(loss, [0], out=y.name)
    return g.op("Identity", [loss], out=y.name)


@exports(SoftmaxCrossEntropy)
def export_softmax_cross_entropy(g, f, xs, ys):
    (x, t), (y,) = xs, ys
    if t.dtype.is_integer:
        scores, labels, single = _batched(g, x, t)
        loss = g.op("SoftmaxCrossEntropyLoss", [scores, labels], reduction=f.reduction,
                    ignore_index=int(f.ignore_index))
        return _loss_out(g, loss, single, f.reduction, y)
    # probability targets: -sum(t * log_softmax(x)) over the class axis
    axis = 0 if x.ndim == 1 else 1
    lp = g.op("LogSoftmax", [x.name], axis=axis)
    per = g.op("Neg", [g.reduce("ReduceSum", g.op("Mul", [t.name, lp]), [axis], False)])
    if f.reduction == "none":
        return g.op("Identity", [per], out=y.name)
    g.reduce("ReduceMean" if f.reduction == "mean" else "ReduceSum", per, None, False,
             out=y.name)


@exports(NLLLoss)
def export_nll_loss(g, f, xs, ys):
    (x, t), (y,) = xs, ys
    scores, labels, single = _batched(g, x, t)
    loss = g.op("NegativeLogLikelihoodLoss", [scores, labels], reduction=f.reduction,
                ignore_index=int(f.ignore_index))
    _loss_out(g, loss, single, f.reduction, y)


@exports(Dropout)
def export_dropout(g, f, xs, ys):
    """ONNX's Dropout in inference (training_mode false): the input itself. hl records
    dropout only while training; the exported model is for inference."""
    (x,), (y,) = xs, ys
    g.op("Dropout", [x.name, g.scalar(float(f.p), x.dtype if x.dtype.is_floating
                                      else _dt.float32)], out=y.name)
