"""Bad input found before training touches a weight.

Before the first step fit checks, in order: batch_size and epochs; that x, y and
sample_weight have the same number of samples and are not empty; that the model can train
(an optimiser and a loss, or its own train_one_batch); then it runs the model on the first
batch in evaluation mode without gradients (so nothing is updated, batch-norm statistics
included) and computes the loss on it, which catches inputs of the wrong shape and targets
that do not fit the output; for class labels given as arrays, every label of y (and of the
validation data) is checked against the number of classes the model outputs.
"""
import warnings

import numpy as np

from .. import errors
from ..autograd import no_grad
from ..losses import NLLLoss, SoftmaxCrossEntropy
from .data import host
from .step import (compute_loss, forward, mode, model_device, overrides_step, to_tensor,
                   to_tensors)


def check_trainable(model, what):
    if overrides_step(model):
        return
    missing = [n for n in ("optim", "loss_fn") if model.__dict__.get(n) is None]
    if missing:
        raise errors.ValueError(
            f"{what}: {type(model).__name__} has no {' and no '.join(missing)}; compile it "
            f"first, e.g. model.compile(optimizer='sgd', loss='cross_entropy', "
            f"metrics=['accuracy']), set self.loss_fn and self.optim in __init__, or "
            f"override train_one_batch")


def check_epochs(epochs, initial_epoch, what):
    for name, v in (("epochs", epochs), ("initial_epoch", initial_epoch)):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 0:
            raise errors.ValueError(f"{what}: {name} must be an integer >= 0, got {v!r}")


def _again(e, message):
    """The same kind of hl error with a message that says where it happened."""
    err = type(e)(message)
    err.__cause__ = e
    return err


def probe(model, batch, what, y=None, data_name="x", y_name="y"):
    """Runs the model on one batch in evaluation mode, without gradients, checks the labels
    of `y` (all of y when given, else the batch's) against its output, then computes the
    loss on the batch."""
    loss_fn = model.__dict__.get("loss_fn")
    device = model_device(model)
    with mode(model, False), no_grad():
        try:
            out = forward(model, to_tensors(batch.x, device))
        except errors.HLError as e:
            shapes = _shapes(batch.x)
            hint = ""
            specs = model.__dict__.get("_input_shapes")
            if specs:
                hint = f" (it was compiled for inputs of shape {', '.join(map(str, specs))})"
            raise _again(e, f"{what}: the first batch of {data_name}, of shape {shapes}, does "
                            f"not fit the model{hint}: {e}") from None
        check_labels(model, out, batch.y if y is None else y, what, y_name)
        if batch.y is not None and loss_fn is not None:
            try:
                sw = batch.sample_weight
                compute_loss(loss_fn, out, to_tensor(batch.y, device),
                             None if sw is None else to_tensor(sw, device))
            except errors.HLError as e:
                raise _again(e, f"{what}: the targets do not fit the model's output "
                                f"{_shapes(out)} under the loss {_name(loss_fn)}: {e}") from None


def check_labels(model, out, y, what, name="y"):
    """Class labels in y (all of them, when y is the whole array) against the classes the
    model outputs; a warning when the outputs are probabilities (rows summing to 1) for a
    cross-entropy, which takes logits."""
    loss_fn = model.__dict__.get("loss_fn")
    if isinstance(out, (tuple, list)) or y is None:
        return
    y, pred = host(y), host(out)
    if isinstance(loss_fn, (SoftmaxCrossEntropy, NLLLoss)) and pred.ndim >= 2 \
            and np.issubdtype(y.dtype, np.integer) and y.shape[1:] != pred.shape[1:]:
        classes = pred.shape[1]
        bad = ((y < 0) | (y >= classes)) & (y != loss_fn.ignore_index)
        if bad.any():
            at = np.unravel_index(np.flatnonzero(bad)[0], y.shape)
            at = at[0] if len(at) == 1 else tuple(int(i) for i in at)
            raise errors.IndexError(
                f"{what}: {name} holds class labels for {_name(loss_fn)}, which must be in "
                f"[0, {classes}) for the model's {classes} outputs (or equal ignore_index "
                f"{loss_fn.ignore_index}); {name}[{at}] = {y[at]}, and {int(bad.sum())} of "
                f"{y.size} labels are out of range (values from {y.min()} to {y.max()}). "
                f"Nothing was trained")
    if isinstance(loss_fn, SoftmaxCrossEntropy) and pred.ndim >= 2 and pred.size \
            and pred.min() >= 0 and np.allclose(pred.sum(axis=1), 1.0, atol=1e-4):
        warnings.warn(f"{what}: the model's outputs look like probabilities (each row sums to "
                      f"1), but {_name(loss_fn)} applies the softmax itself (it takes "
                      f"logits); remove the final softmax", stacklevel=3)


def _name(loss_fn):
    return type(loss_fn).__name__ if not hasattr(loss_fn, "__name__") else loss_fn.__name__


def _shapes(x):
    if isinstance(x, dict):
        return {k: _shapes(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_shapes(v) for v in x]
    return tuple(np.shape(x)) if not hasattr(x, "shape") else tuple(x.shape)
