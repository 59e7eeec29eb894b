"""Shared material for the optimiser tests: the optimiser configurations compared with
torch.optim, and builders for the same parameters in hl and torch."""
import numpy as np

import hl

# (hl class name, torch class name, keyword arguments valid for both)
CONFIGS = [
    ("SGD", "SGD", dict(lr=0.1)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("Adam", "Adam", dict(lr=0.01)),
    ("Adam", "Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", "Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", "AdamW", dict(lr=0.01)),
    ("AdamW", "AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("RMSProp", "RMSprop", dict(lr=0.01)),
    ("RMSProp", "RMSprop", dict(lr=0.005, alpha=0.9, momentum=0.7, weight_decay=0.02)),
    ("RMSProp", "RMSprop", dict(lr=0.005, centered=True, momentum=0.5, eps=1e-6)),
    ("AdaGrad", "Adagrad", dict(lr=0.1)),
    ("AdaGrad", "Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                initial_accumulator_value=0.2)),
]

CONFIG_IDS = [f"{h}-{i}" for i, (h, _, _) in enumerate(CONFIGS)]

SHAPES = [(3, 4), (5,), (2, 3, 2), ()]

# float32 trajectories agree to rounding: both sides run the same float32 operations in the
# same order, so differences are a few ulps per step.
RTOL, ATOL = 1e-5, 1e-6


def initial_values(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def hl_params(values, names=True):
    return [hl.Tensor(v.copy(), requires_grad=True, stores_grad=True,
                      name=f"p{i}" if names else None) for i, v in enumerate(values)]


def synthetic_grads(rng, steps):
    return [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]
