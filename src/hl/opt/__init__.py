"""hl.opt (also hl.optim): optimisers, learning-rate schedules and gradient clipping.

SINGA style: ``opt = hl.opt.SGD(lr=0.1, momentum=0.9)`` then ``opt.backward_and_update(loss)``
each step. PyTorch style: ``hl.opt.Adam(lr=1e-3, params=params)`` then ``loss.backward();
opt.step(); opt.zero_grad()``. See optimizer.py for the step count, states and keys.
SINGA's ``hl.opt.DistOpt`` lives in hl.distributed (it needs the MPI group, a layer above
this one); hl/__init__.py, which imports both, puts the name here.
"""
from . import schedules
from .adagrad import AdaGrad, Adagrad
from .adam import Adam, AdamW
from .clip import clip_grad_norm
from .optimizer import Optimizer
from .rmsprop import RMSProp, RMSprop
from .schedules import (Constant, CosineDecay, ExponentialDecay, LinearWarmup, Schedule,
                        StepDecay)
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSProp", "RMSprop", "AdaGrad", "Adagrad",
           "clip_grad_norm", "schedules", "Schedule", "Constant", "StepDecay",
           "ExponentialDecay", "CosineDecay", "LinearWarmup"]
