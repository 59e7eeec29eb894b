"""Graph mode's memory (issue 20, item 5), counted as hl.memory_stats()['peak'] counts it: the
bytes handed out to tensors, plan arenas and kernel work buffers included. A replayed training
step of a small CNN holds less at its peak than the same step eagerly (the plan frees each
intermediate at its last use, writes element-wise results over dying inputs and places
everything in one arena of the liveness floor's size), and gives the same bits."""
import gc

import numpy as np

import hl
from hl import _core
from hl import layers as L


class CNN(hl.Module):
    """bench/train.py's MNIST CNN, smaller."""

    def __init__(self):
        super().__init__()
        self.net = L.Sequential(L.Conv2d(8, 5), L.ReLU(), L.MaxPool2d(2, 2), L.Conv2d(16, 5),
                                L.ReLU(), L.MaxPool2d(2, 2), L.Flatten(), L.Linear(64),
                                L.ReLU(), L.Linear(10))
        self.optim = hl.opt.SGD(lr=0.01, momentum=0.9)

    def forward(self, x):
        return self.net(x)

    def train_one_batch(self, x, y):
        loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
        self.optim.backward_and_update(loss)
        return loss


def _peak_of_a_step(graph, x, y):
    hl.manual_seed(0)
    m = CNN()
    m.compile([hl.Placeholder(x.shape)], is_train=True, use_graph=graph)
    for _ in range(3):  # eager (slots), recorded (scratch measured), replay (memory planned)
        m.train_one_batch(x, y)
    gc.collect()
    hl.reset_peak_memory_stats()
    base = hl.memory_stats()["in_use"]
    loss = m.train_one_batch(x, y).item()
    peak = hl.memory_stats()["peak"]
    states = {k: v.numpy().copy() for k, v in m.get_states().items()}
    return m, base, peak, loss, states


def test_replayed_step_peaks_lower_than_eager_with_the_same_bits(rng):
    x = hl.tensor(rng.standard_normal((32, 1, 28, 28)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 10, 32))
    _, _, eager_peak, eager_loss, eager_states = _peak_of_a_step(False, x, y)
    m, base, graph_peak, graph_loss, graph_states = _peak_of_a_step(True, x, y)
    assert graph_loss == eager_loss
    for k, v in eager_states.items():
        np.testing.assert_array_equal(graph_states[k], v, err_msg=k)
    (entry,) = [e for e in m._graph_runner().caches["train_one_batch"].entries.values()
                if e.plan is not None]
    s = _core.plan_stats(entry.plan.core)
    assert s["memory_planned"] and s["planned_tensors"] > 20
    # the arena is placed down to the floor (the most bytes alive at one call) and allocated
    # at its size: what a replay adds to the memory held between steps is the arena and the
    # step's returned loss
    assert s["arena_bytes"] == s["alive_peak_bytes"]
    assert graph_peak - base <= 1024
    assert graph_peak < 0.95 * eager_peak, (graph_peak, eager_peak)  # 0.88 measured
