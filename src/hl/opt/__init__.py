"""hl.opt (also hl.optim): optimisers, learning-rate schedules and gradient clipping.

SINGA style: ``opt = hl.opt.SGD(lr=0.1, momentum=0.9)`` then ``opt.backward_and_update(loss)``
each step. PyTorch style: ``hl.opt.Adam(lr=1e-3, params=params)`` then ``loss.backward();
opt.step(); opt.zero_grad()``. See optimizer.py for the step count, states and keys.
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
           "ExponentialDecay", "CosineDecay", "LinearWarmup", "DistOpt"]


def __getattr__(name):
    # SINGA's spelling hl.opt.DistOpt. It lives in hl.distributed (it needs the MPI group,
    # a layer above this one), so it is looked up on first use rather than imported here.
    if name == "DistOpt":
        from ..distributed.dist_opt import DistOpt
        return DistOpt
    raise AttributeError(f"module 'hl.opt' has no attribute {name!r}")
