"""graph_alg='topological' (SINGA's sequential=False): the plans' calls run in dependency order
(libcore's plan/order.c) and give exactly the bits of graph_alg='sequence' and of eager, on a
model with independent branches (a residual block with a projection shortcut), through fit and
train_one_batch."""
import numpy as np
import pytest

import hl
from hl import layers as L


class Block(hl.layers.Layer):
    """Two branches from one input: conv-bn-relu-conv-bn and a 1x1 conv-bn shortcut."""

    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = L.Conv2d(6, 3, padding=1, bias=False), L.BatchNorm2d()
        self.conv2, self.bn2 = L.Conv2d(6, 3, padding=1, bias=False), L.BatchNorm2d()
        self.short, self.bn3 = L.Conv2d(6, 1, bias=False), L.BatchNorm2d()

    def forward(self, x):
        y = self.bn2(self.conv2(self.bn1(self.conv1(x)).relu()))
        return (y + self.bn3(self.short(x))).relu()


def _model(mode):
    hl.manual_seed(7)
    m = hl.Sequential([Block(), L.GlobalAvgPool2d(), L.Flatten(), L.Linear(3)])
    m.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-3),
              loss="cross_entropy")
    if mode != "eager":
        m.compile([hl.Placeholder((8, 2, 6, 6))], use_graph=True, graph_alg=mode)
    return m


@pytest.mark.parametrize("step", ["fit", "train_on_batch"])
def test_topological_equals_sequence_and_eager(step, rng):
    x = rng.standard_normal((32, 2, 6, 6)).astype(np.float32)
    y = rng.integers(0, 3, 32)
    results = {}
    for mode in ("eager", "sequence", "topological"):
        m = _model(mode)
        if step == "fit":
            logs = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=False).history
        else:
            logs = [m.train_on_batch(x[i:i + 8], y[i:i + 8]) for i in range(0, 32, 8) for _ in
                    range(2)]
        results[mode] = (logs, {k: v.numpy().copy() for k, v in m.get_states().items()}, m)
    logs_e, states_e, _ = results["eager"]
    for mode in ("sequence", "topological"):
        logs, states, m = results[mode]
        assert logs == logs_e, mode
        for k, v in states_e.items():
            np.testing.assert_array_equal(states[k], v, err_msg=f"{mode}: {k}")
        s = m._graph_runner().stats()
        assert s["fit"]["replayed"] >= 5, (mode, s)  # train_on_batch runs fit's step
    assert results["topological"][2]._graph_runner().caches  # its plans ran topologically
    for cache in results["topological"][2]._graph_runner().caches.values():
        assert cache.options != 0
