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
from .. import mixed_precision as _mp
from .._tensor import Tensor, tensor
from ..amp import GradScaler
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


def model_device(model):
    """Where fit, evaluate and predict put each batch: the device of the model's parameters,
    or, before it has any (layers build on their first input), the device model.to() named;
    None (the default device) otherwise."""
    for t in model.get_states().values():
        return t.device
    return model.__dict__.get("_device")


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


def loss_scaler(model):
    """The model's hl.amp.GradScaler when its dtype policy is "mixed_float16" (made on first
    use with Keras's LossScaleOptimizer settings, kept on the model so the scale carries over
    from one fit to the next), else None."""
    policy = getattr(model, "dtype_policy", None)
    if policy is None or not policy.needs_loss_scaling:
        return None
    d = model.__dict__
    if d.get("loss_scaler") is None:
        d["loss_scaler"] = GradScaler(init_scale=_mp.LOSS_SCALE_INITIAL,
                                      growth_interval=_mp.LOSS_SCALE_GROWTH_STEPS)
    return d["loss_scaler"]


def backward_and_update(model, loss):
    """fit's update: the optimiser's, through the loss scaler under "mixed_float16" (the
    update is skipped, and the scale backs off, when a gradient overflows)."""
    scaler = loss_scaler(model)
    if scaler is None:
        model.optim.backward_and_update(loss)
    else:
        scaler.backward_and_update(model.optim, loss)


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
    # graph mode's wrapper (hl.model.graph_mode.graph_step) keeps the marker: functools.wraps
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
        self.device = None
        if self.own:
            self.weights_ok = takes_sample_weight(model.train_one_batch)

    def __call__(self, batch):
        model = self.model
        if batch.global_size is not None:  # this rank's slice of a global batch
            n = len_of(batch)
            model.optim.grad_scale = n / batch.global_size
            if n == 0:  # a short last batch left this rank nothing: it adds zeros, in
                return self._take_part(model)  # the same order of collectives as the others
        if self.device is None:  # the parameters do not move during fit: look once they exist
            self.device = model_device(model)
        x, y = to_tensors(batch.x, self.device), to_tensor(batch.y, self.device)
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
                         else model.train_one_batch(x, y, sample_weight=to_tensor(sw, self.device)))
            value = scalar(loss, f"{type(model).__name__}.train_one_batch")
            self.skipped = False
        else:
            runner = graph_runner(model)
            sw_t = None if sw is None else to_tensor(sw, self.device)
            if runner is None:
                out, loss = forward_loss(model, x, y, sw_t)
                finish = lambda run: backward_and_update(model, loss) if run else None  # noqa: E731
            else:
                # the forward and the update are two plans: the update waits for the loss
                # (under "mixed_float16" the update plan scales, unscales and skips on the
                # device: hl/amp/recorded.py)
                (out, loss), finish = runner.run(
                    "fit", lambda x_, y_, sw_: forward_loss(model, x_, y_, sw_), (x, y, sw_t),
                    second=lambda outputs: backward_and_update(model, outputs[1]))
            value = float(loss.item())
            self.tracker.update(value, len_of(batch), out, batch.y, sw)
            logs = self.tracker.logs()
            # on several ranks the logs are the whole batch's, so all ranks skip together
            self.skipped = not math.isfinite(logs["loss"] if getattr(self.tracker, "global_",
                                                                     False) else value)
            finish(not self.skipped)
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
    device = model_device(model)
    x, y = to_tensors(batch.x, device), to_tensor(batch.y, device)
    sw = None if batch.sample_weight is None else to_tensor(batch.sample_weight, device)
    runner = graph_runner(model)
    if runner is None:
        out, loss = _no_grad_forward_loss(model, x, y, sw)
    else:
        out, loss = runner.run("evaluate", _no_grad_forward_loss, (model, x, y, sw))
    tracker.update(float(loss.item()), len_of(batch), out, batch.y, batch.sample_weight)
    return tracker.logs()


def _no_grad_forward_loss(model, x, y, sw):
    with no_grad():
        return forward_loss(model, x, y, sw)


def _no_grad_forward(model, x):
    with no_grad():
        return forward(model, x)


def predict_step(model, x):
    runner = graph_runner(model)
    x = to_tensors(x, model_device(model))
    if runner is None:
        out = _no_grad_forward(model, x)
        copy = False
    else:  # a plan's outputs are written again by its next replay: keep copies
        out = runner.run("predict", _no_grad_forward, (model, x))
        copy = True
    if isinstance(out, (tuple, list)):
        return [_host(o, copy) for o in out]
    return _host(out, copy)


def _host(t, copy):
    """host(t), copied where it would be a view of a CPU plan's output (the next replay
    writes over it); other devices' results are copies already."""
    a = host(t)
    return a.copy() if copy and t.device.kind == "cpu" else a


def graph_runner(model):
    """The model's graph-mode runner (hl.model.graph_mode) when graph mode is on, else None."""
    get = getattr(model, "_graph_runner", None)
    return get() if get is not None else None


def len_of(batch):
    first = Structure(batch.x).parts[0]
    return int(first.shape[0]) if hasattr(first, "shape") and len(first.shape) else 1
