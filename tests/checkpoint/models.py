"""Models shared by the checkpoint tests (an importable module, so hl.load's allow-list,
which admits Layer subclasses from imported modules, admits them, and child processes can
build them)."""
import numpy as np

import hl
from hl import layers as L


class Net(hl.Module):
    """Conv, batch norm (running statistics as states), dropout and a linear head; trains
    with softmax cross-entropy and the optimiser given."""

    def __init__(self, optim=None, width=4, dropout=0.0):
        super().__init__()
        self.conv = L.Conv2d(width, 3, padding=1)
        self.bn = L.BatchNorm2d()
        self.drop = L.Dropout(dropout)
        self.fc = L.Linear(3)
        self.loss_fn = hl.losses.SoftmaxCrossEntropy()
        self.optim = optim if optim is not None else hl.opt.SGD(lr=0.05, momentum=0.9)

    def forward(self, x):
        y = self.bn(self.conv(x)).relu()
        return self.fc(self.drop(y).reshape(x.shape[0], -1))


INPUT = (4, 1, 5, 5)


def built(**kw):
    m = Net(**kw)
    m.compile([hl.Placeholder(INPUT)], is_train=True)
    return m


def batches(n, seed=0):
    rng = np.random.default_rng(seed)
    return [(hl.tensor(rng.standard_normal(INPUT).astype(np.float32)),
             hl.tensor(rng.integers(0, 3, INPUT[0]))) for _ in range(n)]


def snapshot(module):
    """Copies of every state, to check a failed load changed nothing."""
    return {k: np.array(v.numpy()) for k, v in module.get_states().items()}


def same_states(module, snap):
    states = module.get_states()
    return states.keys() == snap.keys() and all(
        np.array_equal(states[k].numpy(), snap[k]) for k in snap)


class Wide(hl.Module):
    """One big parameter, for saves that take long enough to interrupt."""

    def __init__(self, n):
        super().__init__()
        self.n = n

    def initialize(self, x):
        self.add_param("W", (self.n,), "zeros")

    def forward(self, x):
        return x
