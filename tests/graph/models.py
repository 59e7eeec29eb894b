"""Small models for the graph-mode tests: each test builds an eager twin and a graph twin from
the same seed and compares them (graph mode must reproduce eager exactly)."""
import numpy as np

import hl
from hl import _core


class MLP(hl.Module):
    """A SINGA-style model: its own train_one_batch (graph mode wraps it)."""

    def __init__(self, optim, hidden=16, classes=4, dropout=0.0, batchnorm=False):
        super().__init__()
        self.l1 = hl.layers.Linear(hidden)
        self.bn = hl.layers.BatchNorm1d(hidden) if batchnorm else None
        self.drop = hl.layers.Dropout(dropout)
        self.l2 = hl.layers.Linear(classes)
        self.loss_fn = hl.losses.SoftmaxCrossEntropy()
        self.optim = optim

    def forward(self, x):
        h = self.l1(x)
        if self.bn is not None:
            h = self.bn(h)
        return self.l2(self.drop(hl.relu(h)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optim.backward_and_update(loss)
        return out, loss


def twins(make_optim, seed=0, **kwargs):
    """(eager, graph) models with identical initial weights, compiled for batches of 8x12."""
    out = []
    for graph in (False, True):
        hl.manual_seed(seed)
        m = MLP(make_optim(), **kwargs)
        m.compile([hl.Placeholder((8, 12))], is_train=True, use_graph=graph)
        out.append(m)
    return out


def batches(rng, n, batch=8, features=12, classes=4):
    return [(rng.standard_normal((batch, features)).astype(np.float32),
             rng.integers(0, classes, batch)) for _ in range(n)]


def params(model):
    return {k: v.numpy().copy() for k, v in model.get_states().items()}


def stats(model, what="train_one_batch"):
    return model._graph_runner().stats()[what]


class CNN(hl.Module):
    """A SINGA-style CNN: the given layers, softmax cross-entropy, optim's
    backward_and_update (graph mode fuses each Conv2d + ReLU pair into conv_fused)."""

    def __init__(self, optim, *layers):
        super().__init__()
        self.net = hl.layers.Sequential(*layers)
        self.optim = optim

    def forward(self, x):
        return self.net(x)

    def train_one_batch(self, x, y):
        loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
        self.optim.backward_and_update(loss)
        return loss


class ResBlock(hl.layers.Layer):
    """A ResNet basic block (bench/train.py's): conv-bn-relu-conv-bn + shortcut (a 1x1 conv-bn
    where the shape changes), then relu."""

    def __init__(self, out, stride):
        super().__init__()
        L = hl.layers
        self.conv1 = L.Conv2d(out, 3, stride=stride, padding=1, bias=False)
        self.bn1 = L.BatchNorm2d()
        self.conv2 = L.Conv2d(out, 3, padding=1, bias=False)
        self.bn2 = L.BatchNorm2d()
        self.out, self.stride, self.short = out, stride, None

    def initialize(self, x):
        if self.stride != 1 or x.shape[1] != self.out:
            L = hl.layers
            self.short = L.Sequential(L.Conv2d(self.out, 1, stride=self.stride, bias=False),
                                      L.BatchNorm2d())

    def forward(self, x):
        y = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (y + (self.short(x) if self.short is not None else x)).relu()


def image_batches(rng, n, shape, classes=5):
    return [(rng.standard_normal(shape).astype(np.float32), rng.integers(0, classes, shape[0]))
            for _ in range(n)]


def assert_graph_trains_as_eager(make_model, data, device="cpu", seed=0):
    """Trains make_model() eagerly and in graph mode from the same seed on data ([(x, y)],
    on device) and asserts every loss and every parameter and buffer equal bit for bit;
    returns the graph model and the core stats of its train_one_batch plan."""
    runs = []
    for graph in (False, True):
        hl.manual_seed(seed)
        m = make_model()
        m.compile([hl.Placeholder(data[0][0].shape, device=device)], is_train=True,
                  use_graph=graph)
        m.to(device)
        losses = [float(m.train_one_batch(hl.tensor(x, device=device),
                                          hl.tensor(y, device=device)).numpy())
                  for x, y in data]
        runs.append((m, losses))
    (eager, le), (graph, lg) = runs
    assert le == lg
    pe, pg = params(eager), params(graph)
    assert pe.keys() == pg.keys()
    for k in pe:
        np.testing.assert_array_equal(pe[k], pg[k], err_msg=k)
    plan = [e.plan for e in graph._graph_runner().caches["train_one_batch"].entries.values()][0]
    return graph, _core.plan_stats(plan.core)
