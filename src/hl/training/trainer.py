"""Trainer: Keras's fit / evaluate / predict, mixed into every hl.Module (as Keras 3's
Model(Trainer, Layer)). The loop itself is loop.Loop; this file turns the Keras arguments into
a Source, a step and callbacks, after checking them.
"""
import sys

import numpy as np

from .. import errors
from . import checks, config, distributed
from .callbacks import CallbackList, History, ProgbarLogger
from .data import ArrayData, check_batch_size, is_arrays, iterable_source
from .loop import Loop, Tracker
from .step import (TrainStep, backward_and_update, builtin_step, forward_loss, len_of, mode, predict_step,
                   test_step)


class Trainer:
    """What every hl.Module can do to train itself. compile(optimizer=, loss=, metrics=)
    sets ``self.optim``, ``self.loss_fn`` and ``self.compiled_metrics`` (SINGA-style
    modules that set the first two in __init__ need no compile)."""

    stop_training = False

    # ---- the step (SINGA's API) ---------------------------------------------------------

    @builtin_step
    def train_one_batch(self, x, y):
        """One step: forward, loss (self.loss_fn), backward and update (self.optim); returns
        (output, loss). Override it for anything else (fit then trains through the
        override)."""
        checks.check_trainable(self, f"{type(self).__name__}.train_one_batch")
        out, loss = forward_loss(self, x, y)
        backward_and_update(self, loss)  # loss-scaled under a "mixed_float16" policy
        return out, loss

    # ---- compile, Keras's half -----------------------------------------------------------

    def _compile_training(self, optimizer=None, loss=None, metrics=None):
        d = self.__dict__
        if optimizer is not None:
            d["optim"] = config.optimizer(optimizer)
        if loss is not None:
            d["loss_fn"] = config.loss(loss)
        if metrics is not None or "compiled_metrics" not in d:
            d["compiled_metrics"] = config.metric_list(metrics, d.get("loss_fn"))

    @property
    def optimizer(self):
        """Keras's name for ``self.optim`` (the same object; setting one sets the other)."""
        return self.__dict__.get("optim")

    @optimizer.setter
    def optimizer(self, value):
        self.__dict__["optim"] = value

    def _metrics(self):
        return self.__dict__.get("compiled_metrics") or []

    # ---- fit ----------------------------------------------------------------------------

    def fit(self, x=None, y=None, batch_size=32, epochs=1, verbose="auto", callbacks=None,
            validation_split=0.0, validation_data=None, shuffle=True, initial_epoch=0,
            steps_per_epoch=None, class_weight=None, sample_weight=None,
            validation_batch_size=None, validation_freq=1, distribute=None):
        """Trains for ``epochs`` epochs (from ``initial_epoch``) and returns a History.

        x: a numpy array or hl Tensor; a list of them (forward takes several inputs) or a
        dict (passed by keyword); or an iterable / generator of ``(x, y)`` or
        ``(x, y, sample_weight)`` batches (then y, sample_weight, batch_size and
        validation_split do not apply). ``validation_split`` keeps the last fraction of the
        arrays (taken before shuffling) for validation; ``validation_data`` is
        ``(x_val, y_val)``, ``(x_val, y_val, sample_weight_val)`` or an iterable of batches.
        ``class_weight`` ({class: weight}) and ``sample_weight`` weight each sample's loss.
        ``shuffle`` reorders the arrays every epoch, from hl's random generator
        (hl.manual_seed makes runs repeat). ``steps_per_epoch`` ends an epoch after that
        many batches. ``verbose``: 0 silent, 1 a progress bar, 2 one line per epoch,
        'auto' 1 on a terminal and 2 otherwise.

        Every check on the input happens before the first step changes a weight (see
        hl/training/checks.py). A NaN or infinite loss raises hl.errors.NonFiniteLossError,
        unless a callback stops training (hl.callbacks.TerminateOnNaN).

        ``distribute=True`` (or a distribution set with hl.distribution.set_distribution)
        trains data-parallel on the ranks mpiexec started: batch_size is then the global
        batch, each rank trains on its slice, and the logs are those of the whole batch
        (hl/training/distributed.py). Alone, it changes nothing."""
        what = "fit"
        world = distributed.resolve(distribute, what)
        checks.check_epochs(epochs, initial_epoch, what)
        batch_size = check_batch_size(batch_size, what)
        checks.check_trainable(self, what)
        verbose = resolve_verbose(verbose, what, fit=True)
        if steps_per_epoch is not None:
            check_batch_size(steps_per_epoch, what + " (steps_per_epoch)")

        train, val = _split(self, x, y, sample_weight, validation_split, validation_data,
                            class_weight, what)
        seed = _shuffle_seed() if shuffle else None
        if world is not None:
            if shuffle:
                seed = distributed.share_seed(seed, world)
            source = distributed.sharded_source(train, batch_size, world, what, bool(shuffle),
                                                seed, steps_per_epoch)
            if steps_per_epoch is None:
                distributed.check_sync_batchnorm(self, train.n, batch_size, world, what)
        elif isinstance(train, ArrayData):
            source = train.source(batch_size, shuffle=bool(shuffle), seed=seed,
                                  steps=steps_per_epoch)
        else:
            source = iterable_source(train, what, steps_per_epoch)
        val_source = None
        if val is not None:
            vbs = check_batch_size(validation_batch_size or batch_size, what)
            if world is not None:
                val_source = distributed.sharded_source(val, vbs, world, what)
            else:
                val_source = val.source(vbs) if isinstance(val, ArrayData) else \
                    iterable_source(val, what + " (validation_data)")

        # Checks on real batches, before any weight changes.
        first = source.peek(initial_epoch)
        if first is None:
            raise errors.ValueError(f"{what}: the data yielded no batches")
        checks.probe(self, first, what, train.y if isinstance(train, ArrayData) else None)
        if val_source is not None:
            vfirst = val_source.peek(0)
            if vfirst is None:
                raise errors.ValueError(f"{what}: the validation data yielded no batches")
            checks.probe(self, vfirst, what, val.y if isinstance(val, ArrayData) else None,
                         "the validation data", "the validation y")

        history = History()
        user = list(callbacks or [])
        cbs = _callbacks(user + [history], verbose, self, world,
                         {"verbose": verbose, "epochs": epochs, "steps": source.steps_per_epoch})
        tracker = _tracker(self._metrics(), world)
        restore = lambda: None  # noqa: E731
        if world is not None:
            _, restore = distributed.wrap_optimizer(self, world)
        step = TrainStep(self, tracker, class_weight)

        def validate(epoch):
            if val_source is None or not _due(epoch, validation_freq):
                return {}
            with mode(self, False):
                return evaluation_pass(self, val_source.epoch(0),
                                       _tracker(self._metrics(), world, "val_"), cbs)
        try:
            with mode(self, True):
                Loop(self, cbs).run(source, step, epochs, initial_epoch, validate, tracker,
                                    what)
        finally:
            restore()
        self.__dict__["history"] = history
        return history

    # ---- evaluate / predict -------------------------------------------------------------

    def evaluate(self, x=None, y=None, batch_size=32, verbose="auto", sample_weight=None,
                 steps=None, callbacks=None, return_dict=False, distribute=None):
        """The loss and metrics over the data, in evaluation mode without gradients: a float
        (no metrics), ``[loss, metric...]``, or with return_dict a dict by name."""
        what = "evaluate"
        batch_size = check_batch_size(batch_size, what)
        if self.__dict__.get("loss_fn") is None:
            raise errors.ValueError(f"{what}: {type(self).__name__} has no loss; compile it "
                                    f"with loss=... (or set self.loss_fn)")
        verbose = resolve_verbose(verbose, what)
        world = distributed.resolve(distribute, what)
        if is_arrays(x):
            if y is None:
                raise errors.ValueError(f"{what}: y is missing; give the targets of x")
            data = ArrayData(x, y, sample_weight, what)
            source = data.source(batch_size, steps=steps) if world is None else \
                distributed.sharded_source(data, batch_size, world, what, steps=steps)
        else:
            _no_arrays_with_batches(y, sample_weight, what)
            if world is not None:
                distributed.sharded_source(x, batch_size, world, what)  # raises
            source = iterable_source(x, what, steps)
        cbs = _callbacks(list(callbacks or []), verbose, self, world,
                         {"verbose": verbose, "epochs": 1, "steps": source.steps_per_epoch})
        with mode(self, False):
            logs = evaluation_pass(self, source.epoch(0), _tracker(self._metrics(), world),
                                   cbs)
        if not logs:
            raise errors.ValueError(f"{what}: the data yielded no batches")
        return _results(logs, return_dict)

    def predict(self, x, batch_size=32, verbose="auto", steps=None, callbacks=None,
                distribute=None):
        """forward over x in batches (evaluation mode, no gradients; the last batch may be
        smaller), as a numpy array (a list of arrays for a model with several outputs)."""
        what = "predict"
        batch_size = check_batch_size(batch_size, what)
        verbose = resolve_verbose(verbose, what)
        world = distributed.resolve(distribute, what)
        if is_arrays(x):
            data = ArrayData(x, None, None, what)
            source = data.source(batch_size, steps=steps) if world is None else \
                distributed.sharded_source(data, batch_size, world, what, steps=steps)
        else:
            if world is not None:
                distributed.sharded_source(x, batch_size, world, what)  # raises
            source = iterable_source(x, what, steps, for_predict=True)
        cbs = _callbacks(list(callbacks or []), verbose, self, world,
                         {"verbose": verbose, "epochs": 1, "steps": source.steps_per_epoch})
        outs = []
        with mode(self, False):
            cbs.on_predict_begin({})
            for i, batch in enumerate(source.epoch(0)):
                cbs.on_predict_batch_begin(i, {})
                if world is None:
                    out = predict_step(self, batch.x)
                else:  # every rank gets the whole batch's outputs, in order
                    mine = predict_step(self, batch.x) if len_of(batch) else None
                    out = distributed.gather_predictions(mine, world)
                outs.append(out)
                cbs.on_predict_batch_end(i, {"outputs": out})
            cbs.on_predict_end({})
        if not outs:
            raise errors.ValueError(f"{what}: the data yielded no batches")
        if isinstance(outs[0], list):
            return [np.concatenate([o[k] for o in outs]) for k in range(len(outs[0]))]
        return outs[0].copy() if len(outs) == 1 else np.concatenate(outs)

    # ---- one batch ----------------------------------------------------------------------

    def train_on_batch(self, x, y=None, sample_weight=None, class_weight=None,
                       return_dict=False):
        """One training step on one batch; returns its loss (and metrics) as evaluate."""
        what = "train_on_batch"
        checks.check_trainable(self, what)
        batch = ArrayData(x, y, sample_weight, what).whole()
        step = TrainStep(self, Tracker(self._metrics()), class_weight)
        with mode(self, True):
            logs = step(batch)
        if step.skipped:
            from .loop import _nonfinite
            raise _nonfinite(what, 0, 0, logs["loss"], True)
        return _results(logs, return_dict)

    def test_on_batch(self, x, y=None, sample_weight=None, return_dict=False):
        """The loss (and metrics) of one batch, as evaluate."""
        batch = ArrayData(x, y, sample_weight, "test_on_batch").whole()
        with mode(self, False):
            logs = test_step(self, Tracker(self._metrics()), batch)
        return _results(logs, return_dict)

    def predict_on_batch(self, x):
        """forward on one batch, as numpy (evaluation mode, no gradients)."""
        with mode(self, False):
            return predict_step(self, x)


def _callbacks(callbacks, verbose, model, world, params):
    """fit's / evaluate's / predict's CallbackList: the user's, then the progress bar; in a
    data-parallel run, rank 0 alone prints and writes files."""
    cbs = callbacks + ([ProgbarLogger(verbose)] if verbose else [])
    if world is not None:
        cbs = distributed.local_only(cbs, world)
    return CallbackList(cbs, model, params)


def _tracker(metrics, world, prefix=""):
    if world is None:
        return Tracker(metrics, prefix)
    return distributed.GlobalTracker(world, metrics, prefix)


def evaluation_pass(model, batches, tracker, cbs):
    """One pass of test steps, firing the on_test_* hooks; returns the logs (empty when
    there was no batch)."""
    tracker.reset()
    cbs.on_test_begin({})
    logs = {}
    for i, batch in enumerate(batches):
        cbs.on_test_batch_begin(i, {})
        logs = test_step(model, tracker, batch)
        cbs.on_test_batch_end(i, logs)
    cbs.on_test_end(logs)
    return logs


def resolve_verbose(verbose, what, fit=False):
    """0, 1 or 2; 'auto' is 1 on a terminal, otherwise 2 for fit (a line per epoch) and 0
    for evaluate and predict."""
    if verbose == "auto":
        return 1 if sys.stdout.isatty() else (2 if fit else 0)
    if isinstance(verbose, bool) or verbose not in (0, 1, 2):
        raise errors.ValueError(f"{what}: verbose must be 0, 1, 2 or 'auto', got {verbose!r}")
    return int(verbose)


def _split(model, x, y, sample_weight, validation_split, validation_data, class_weight, what):
    """(training data, validation data or None): ArrayData or an iterable of batches."""
    if is_arrays(x):
        if y is None:
            raise errors.ValueError(f"{what}: y is missing; give the targets of x (or pass x "
                                    f"as an iterable of (x, y) batches)")
        train = ArrayData(x, y, sample_weight, what)
        val = None
        if validation_data is None and validation_split:
            train, val = train.split(validation_split)
        if class_weight is not None:
            from .data import class_weights
            class_weights(class_weight, train.y, what)  # every class of y has a weight
    else:
        _no_arrays_with_batches(y, sample_weight, what)
        if validation_split:
            raise errors.ValueError(f"{what}: validation_split needs x and y as arrays; with "
                                    f"a source of batches pass validation_data")
        train, val = x, None
    if validation_data is not None:
        val = _validation(validation_data, what)
    return train, val


def _validation(data, what):
    if isinstance(data, (tuple, list)) and len(data) in (2, 3) and is_arrays(data[0]):
        return ArrayData(data[0], data[1], data[2] if len(data) == 3 else None,
                         what + " (validation_data)")
    if isinstance(data, tuple):
        raise errors.ValueError(f"{what}: validation_data must be (x_val, y_val), (x_val, "
                                f"y_val, sample_weight_val) or an iterable of batches; got a "
                                f"{type(data).__name__} of {len(data)} items")
    return data


def _no_arrays_with_batches(y, sample_weight, what):
    if y is not None or sample_weight is not None:
        raise errors.ValueError(f"{what}: x is a source of batches, so y and sample_weight "
                                f"must come inside its (x, y[, sample_weight]) batches, not "
                                f"as arguments")


def _due(epoch, freq):
    if isinstance(freq, int):
        return (epoch + 1) % freq == 0
    return epoch + 1 in freq


def _shuffle_seed():
    """A shuffling seed drawn from hl's default generator, so hl.manual_seed fixes fit's
    sample order too."""
    from ..ops.random import default_generator
    offset = default_generator._take(1)
    return int(np.random.SeedSequence([default_generator.seed, offset]).generate_state(1)[0])


def _results(logs, return_dict):
    if return_dict:
        return dict(logs)
    values = list(logs.values())
    return values[0] if len(values) == 1 else values
