"""hl.training: the one training loop and what it needs.

Two front doors lead into one loop:
  - Keras's: ``Module.fit / evaluate / predict / *_on_batch``, from the Trainer mixin
    (trainer.py), which every hl.Module inherits;
  - PaddlePaddle v2's: ``hl.v2.trainer.SGD.train`` turns a reader and an event handler into
    a batch source and a callback and runs the same Loop.

Files, in the order a batch meets them:
  data.py       what fit accepts (arrays, tensors, lists/dicts of them, iterables of batches)
                -> a Source of Batch(x, y, sample_weight) per epoch; validation_split
  config.py     compile's strings ('adam', 'mse', 'accuracy') -> optimiser, loss, metrics
  checks.py     bad input found before any weight changes (lengths, shapes, label ranges)
  step.py       one train / test / predict step on a batch; forward under the right mode
  loop.py       Loop: epochs of steps with callbacks; Tracker: running loss and metrics
  trainer.py    the Trainer mixin: fit, evaluate, predict, train_on_batch, ...
  callbacks/    one callback per file (hl.callbacks); progbar_logger.py draws progress
"""
from . import callbacks
from .loop import Loop, Tracker
from .trainer import Trainer

__all__ = ["Loop", "Tracker", "Trainer", "callbacks"]
