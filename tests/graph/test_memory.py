"""Graph mode's memory (issue 20, item 5), counted as hl.memory_stats()['peak'] counts it: the
bytes handed out to tensors, plan arenas and kernel work buffers included. A replayed training
step of a small CNN holds less at its peak than the same step eagerly (the plan frees each
intermediate at its last use, writes element-wise results over dying inputs and places
everything in one arena of the liveness floor's size), and gives the same bits."""
import gc

import numpy as np
import pytest

import hl
from hl import _core
from hl import layers as L

from . import models


class CNN(models.CNN):
    """bench/train.py's MNIST CNN, smaller."""

    def __init__(self):
        super().__init__(hl.opt.SGD(lr=0.01, momentum=0.9), L.Conv2d(8, 5), L.ReLU(),
                         L.MaxPool2d(2, 2), L.Conv2d(16, 5), L.ReLU(), L.MaxPool2d(2, 2),
                         L.Flatten(), L.Linear(64), L.ReLU(), L.Linear(10))


def _in_use_before():
    """Bytes earlier tests still hold: every peak here is counted above them, as a fresh
    process (bench/graph_memory.py) counts it."""
    gc.collect()
    return hl.memory_stats()["in_use"]


def _peak_of_a_step(graph, x, y):
    start = _in_use_before()
    hl.manual_seed(0)
    m = CNN()
    m.compile([hl.Placeholder(x.shape)], is_train=True, use_graph=graph)
    for _ in range(3):  # eager (slots), recorded (scratch measured), replay (memory planned)
        m.train_one_batch(x, y)
    gc.collect()
    hl.reset_peak_memory_stats()
    base = hl.memory_stats()["in_use"] - start
    loss = m.train_one_batch(x, y).item()
    peak = hl.memory_stats()["peak"] - start
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


class SmallResNet(CNN):
    def __init__(self):
        super().__init__()
        self.net = L.Sequential(L.Conv2d(16, 3, padding=1, bias=False), L.BatchNorm2d(),
                                L.ReLU(), *(models.ResBlock(16, 1) for _ in range(3)),
                                models.ResBlock(32, 2),
                                L.GlobalAvgPool2d(), L.Flatten(), L.Linear(10))


def _steps(make, graph, x, y, steps):
    """Peak of the last of `steps` training steps, the losses, the states and the plan's
    statistics (graph mode)."""
    start = _in_use_before()
    hl.manual_seed(0)
    m = make()
    m.compile([hl.Placeholder(x.shape)], is_train=True, use_graph=graph)
    losses = []
    for i in range(steps):
        if i == steps - 1:
            gc.collect()
            hl.reset_peak_memory_stats()
        losses.append(m.train_one_batch(x, y).item())
    peak = hl.memory_stats()["peak"] - start
    states = {k: v.numpy().copy() for k, v in m.get_states().items()}
    stats = None
    if graph:
        (entry,) = [e for e in m._graph_runner().caches["train_one_batch"].entries.values()
                    if e.plan is not None]
        stats = _core.plan_stats(entry.plan.core)
    return peak, losses, states, stats


@pytest.fixture
def one_thread():
    """Kernel work buffers grow with the thread count (conv's column tiles): one thread
    gives every machine the figures measured here."""
    threads = hl.get_num_threads()
    hl.set_num_threads(1)
    yield
    hl.set_num_threads(threads)


def test_a_resnet_step_recomputes_its_relu_outputs_and_peaks_below_eager(rng, one_thread):
    """Batch norm + ReLU outputs are made again from the convolution outputs during the
    backward (plan/recompute.c) instead of being kept across the turn of the step: the
    replayed steps equal eager bit for bit (running statistics included) and the replay's
    peak is below 0.85 of eager's (0.77 measured; 0.93 with HL_PLAN_NO_RECOMPUTE)."""
    x = hl.tensor(rng.standard_normal((32, 3, 16, 16)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 10, 32))
    eager_peak, eager_losses, eager_states, _ = _steps(SmallResNet, False, x, y, 5)
    graph_peak, graph_losses, graph_states, stats = _steps(SmallResNet, True, x, y, 5)
    assert graph_losses == eager_losses
    for k, v in eager_states.items():
        np.testing.assert_array_equal(graph_states[k], v, err_msg=k)
    # the stem's and each block's relu(bn(conv)), and block outputs
    assert stats["recomputed"] >= 8, stats
    assert graph_peak < 0.85 * eager_peak, (graph_peak, eager_peak)


def test_the_mnist_cnn_step_drops_max_pool_indices_and_peaks_below_eager(rng, one_thread):
    """bench/graph_memory.py's MNIST CNN at batch 64: max_pool_grad finds the maxima again in
    the ReLU outputs ReLU's backward keeps anyway, so max_pool's int64 indices are never
    alive across the turn: graph / eager 0.73 measured (0.86 with HL_PLAN_NO_RECOMPUTE)."""
    class MnistCNN(CNN):
        def __init__(self):
            super().__init__()
            self.net = L.Sequential(L.Conv2d(20, 5), L.ReLU(), L.MaxPool2d(2, 2),
                                    L.Conv2d(50, 5), L.ReLU(), L.MaxPool2d(2, 2), L.Flatten(),
                                    L.Linear(500), L.ReLU(), L.Linear(10))

    x = hl.tensor(rng.standard_normal((64, 1, 28, 28)).astype(np.float32))
    y = hl.tensor(rng.integers(0, 10, 64))
    eager_peak, eager_losses, eager_states, _ = _steps(MnistCNN, False, x, y, 4)
    graph_peak, graph_losses, graph_states, stats = _steps(MnistCNN, True, x, y, 4)
    assert graph_losses == eager_losses
    for k, v in eager_states.items():
        np.testing.assert_array_equal(graph_states[k], v, err_msg=k)
    assert stats["recomputed"] == 2, stats  # the two max-pools' indices
    assert graph_peak < 0.78 * eager_peak, (graph_peak, eager_peak)
