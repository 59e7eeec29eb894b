"""One step on one batch: moving it to tensors, forward, loss, update.

A module's forward is always reached through ``Layer.__call__`` (which builds lazy layers),
never through ``Module.__call__``, whose SINGA habit (``model(x, y)`` in training mode runs
train_one_batch) is for scripts, not for the loop.
"""
import contextlib
import inspect
import math

import numpy as np

from .. import errors
from .._tensor import Tensor, tensor
from ..autograd import no_grad
from ..layers.layer import Layer
from ..losses import Loss
from .data import Structure, class_weights, host


def to_tensor(a, device=None):
    """A batch array as an hl Tensor: float64 becomes float32 (hl's float, as Keras casts to
    floatx); other dtypes stay."""
    if isinstance(a, Tensor):
        return a
    a = np.asarray(a)
    if a.dtype == np.float64:
        a = a.astype(np.float32)
    return tensor(np.ascontiguousarray(a), device=device)


def to_tensors(x, device=None):
    if isinstance(x, dict):
        return {k: to_tensor(v, device) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_tensor(v, device) for v in x]
    return to_tensor(x, device)


def forward(model, x):
    """model.forward on x (a tensor, a list of inputs, or a dict of them by name)."""
    if isinstance(x, dict):
        out = Layer.__call__(model, **x)
    elif isinstance(x, (list, tuple)):
        out = Layer.__call__(model, *x)
    else:
        out = Layer.__call__(model, x)
    if isinstance(out, list) and len(out) == 1:
        return out[0]  # SINGA-style forwards (hl.onnx.ONNXModel) return [y]
    return out


def compute_loss(loss_fn, out, y, sample_weight=None):
    """The batch's scalar loss. hl.losses objects weight samples themselves; a plain function
    (pred, y) may return the loss per sample (it is then averaged, weighted when sample
    weights are given) or already reduced."""
    if isinstance(out, (tuple, list)) and isinstance(loss_fn, Loss):
        raise errors.ValueError(
            f"the model's forward returned {len(out)} outputs, but {type(loss_fn).__name__} "
            f"takes one; compile with a loss function taking (outputs, y), or override "
            f"train_one_batch")
    if isinstance(loss_fn, Loss):
        return loss_fn(out, y, sample_weight=sample_weight)
    loss = loss_fn(out, y)
    if not isinstance(loss, Tensor):
        raise errors.ValueError(f"the loss function {getattr(loss_fn, '__name__', loss_fn)} "
                                f"returned a {type(loss).__name__}; it must return an hl "
                                f"Tensor (built with hl operations so it has gradients)")
    if sample_weight is not None:
        if loss.ndim == 0:
            raise errors.ValueError("sample weights need a loss per sample, but the loss "
                                    "function returned a single number")
        from ..losses import _weighted
        return _weighted(loss, sample_weight, "mean", "fit")
    return loss.mean() if loss.ndim else loss


def forward_loss(model, x, y, sample_weight=None):
    out = forward(model, x)
    return out, compute_loss(model.loss_fn, out, y, sample_weight)


@contextlib.contextmanager
def mode(model, training):
    """Runs the block with every layer of `model` in training (or evaluation) mode and puts
    each layer's own mode back afterwards."""
    saved = [(layer, layer.__dict__["_training"]) for _, layer in model.named_layers()]
    model.train(training)
    try:
        yield
    finally:
        for layer, m in saved:
            layer.__dict__["_training"] = m


def builtin_step(method):
    """Marks Trainer.train_one_batch, the step every Module has, so that overrides_step tells
    an override from it without importing trainer.py (which builds on this file)."""
    method.hl_builtin_step = True
    return method


def overrides_step(model):
    """True when the model's class defines its own train_one_batch (fit then trains through
    it, SINGA style)."""
    return not getattr(type(model).train_one_batch, "hl_builtin_step", False)


def takes_sample_weight(fn):
    try:
        return "sample_weight" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False


def scalar(loss, what):
    try:
        return float(loss.item() if isinstance(loss, Tensor) else loss)
    except (TypeError, ValueError, errors.HLError):
        raise errors.ValueError(f"{what} must return (output, loss) with a scalar loss; the "
                                f"loss has shape {getattr(loss, 'shape', '?')}") from None


class TrainStep:
    """fit's step. The built-in one (no train_one_batch override) runs forward and the
    loss, reads the loss, and applies the update only when it is finite; ``skipped`` then
    tells the loop the update was left out. An override is called as
    ``train_one_batch(x, y)`` (plus ``sample_weight=`` when it accepts it)."""

    def __init__(self, model, tracker, class_weight=None):
        self.model = model
        self.tracker = tracker
        self.class_weight = class_weight
        self.own = overrides_step(model)
        self.skipped = False
        if self.own:
            self.weights_ok = takes_sample_weight(model.train_one_batch)

    def __call__(self, batch):
        model = self.model
        if batch.global_size is not None:  # this rank's slice of a global batch
            n = len_of(batch)
            model.optim.grad_scale = n / batch.global_size
            if n == 0:  # a short last batch left this rank nothing: it adds zeros, in
                return self._take_part(model)  # the same order of collectives as the others
        x, y = to_tensors(batch.x), to_tensor(batch.y)
        sw = batch.sample_weight
        if self.class_weight is not None:
            cw = class_weights(self.class_weight, batch.y, "fit")
            sw = cw if sw is None else cw * host(sw)
        if self.own:
            if sw is not None and not self.weights_ok:
                raise errors.ValueError(
                    f"fit: sample_weight / class_weight were given, but "
                    f"{type(model).__name__}.train_one_batch(x, y) takes no sample_weight; "
                    f"add a sample_weight=None parameter to it or drop the weights")
            out, loss = (model.train_one_batch(x, y) if sw is None
                         else model.train_one_batch(x, y, sample_weight=to_tensor(sw)))
            value = scalar(loss, f"{type(model).__name__}.train_one_batch")
            self.skipped = False
        else:
            out, loss = forward_loss(model, x, y, None if sw is None else to_tensor(sw))
            value = float(loss.item())
            self.tracker.update(value, len_of(batch), out, batch.y, sw)
            logs = self.tracker.logs()
            # on several ranks the logs are the whole batch's, so all ranks skip together
            self.skipped = not math.isfinite(logs["loss"] if getattr(self.tracker, "global_",
                                                                     False) else value)
            if not self.skipped:
                model.optim.backward_and_update(loss)
            return logs
        self.tracker.update(value, len_of(batch), out, batch.y, sw)
        return self.tracker.logs()


    def _take_part(self, model):
        if self.own:  # the others: train_one_batch (gradients), then the logs
            model.optim.contribute_nothing()
            return self.tracker.logs()
        logs = self.tracker.logs()  # the others: the logs, then the gradients unless skipped
        self.skipped = not math.isfinite(logs["loss"])
        if not self.skipped:
            model.optim.contribute_nothing()
        return logs


def test_step(model, tracker, batch):
    """evaluate's step: forward and loss without recording gradients."""
    if batch.global_size is not None and len_of(batch) == 0:
        return tracker.logs()  # this rank's slice is empty; the others' values still count
    with no_grad():
        x, y = to_tensors(batch.x), to_tensor(batch.y)
        sw = None if batch.sample_weight is None else to_tensor(batch.sample_weight)
        out, loss = forward_loss(model, x, y, sw)
        tracker.update(float(loss.item()), len_of(batch), out, batch.y, batch.sample_weight)
    return tracker.logs()


def predict_step(model, x):
    with no_grad():
        out = forward(model, to_tensors(x))
    if isinstance(out, (tuple, list)):
        return [o.numpy() for o in out]
    return out.numpy()


def len_of(batch):
    first = Structure(batch.x).parts[0]
    return int(first.shape[0]) if hasattr(first, "shape") and len(first.shape) else 1
