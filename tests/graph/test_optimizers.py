"""Graph mode equals eager over 100 steps for every hl.opt optimiser, with a schedule and
gradient clipping: bitwise (nothing in a plan reorders arithmetic today: the plan replays the
same kernels on the same tensors, with per-step values written into 0-d tensors of the
parameters' dtype, the same float32 the eager path makes of a Python scalar)."""
import numpy as np
import pytest

import hl

from .models import batches, params, stats, twins

STEPS = 100

OPTIMISERS = {
    "sgd": lambda: hl.opt.SGD(lr=0.05),
    "momentum": lambda: hl.opt.SGD(lr=0.05, momentum=0.9, dampening=0.1, weight_decay=1e-3),
    "nesterov": lambda: hl.opt.SGD(lr=hl.opt.StepDecay(0.05, 10, 0.7), momentum=0.9,
                                   nesterov=True, clip_norm=0.5),
    "adam": lambda: hl.opt.Adam(lr=hl.opt.CosineDecay(0.01, STEPS), weight_decay=1e-3),
    "adam_amsgrad_clip": lambda: hl.opt.Adam(lr=0.01, amsgrad=True, clip_norm=0.3),
    "adamw": lambda: hl.opt.AdamW(lr=hl.opt.LinearWarmup(10, 0.01), weight_decay=0.05),
    "rmsprop": lambda: hl.opt.RMSProp(lr=lambda step: 0.01 / (1 + step), momentum=0.5),
    "rmsprop_centered": lambda: hl.opt.RMSProp(lr=0.005, centered=True, weight_decay=1e-3,
                                               clip_norm=1.0),
    "adagrad": lambda: hl.opt.AdaGrad(lr=hl.opt.ExponentialDecay(0.1, 0.98), lr_decay=0.01,
                                      weight_decay=1e-4),
}


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_graph_equals_eager_for_100_steps(name, rng):
    eager, graph = twins(OPTIMISERS[name])
    for i, (x, y) in enumerate(batches(rng, STEPS)):
        _, le = eager(hl.tensor(x), hl.tensor(y))
        _, lg = graph(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le), f"step {i}: loss {float(lg)} vs eager {float(le)}"
    pe, pg = params(eager), params(graph)
    for k in pe:
        np.testing.assert_array_equal(pg[k], pe[k], err_msg=k)
    assert graph.optim.step_count == eager.optim.step_count == STEPS
    assert graph.optim.lr == eager.optim.lr
    # the optimiser's states (step counts, slots) come out the same too
    se, sg = eager.optim.get_states(), graph.optim.get_states()
    assert sorted(se) == sorted(sg)
    for k in se:
        np.testing.assert_array_equal(np.asarray(sg[k]), np.asarray(se[k]), err_msg=k)
    assert stats(graph) == {"eager": 1, "recorded": 1, "replayed": STEPS - 2, "plans": 1}


def test_lr_set_between_steps_is_read_at_replay(rng):
    """A callback's opt.lr = x (what ReduceLROnPlateau does) reaches a recorded plan."""
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.1, momentum=0.9))
    for i, (x, y) in enumerate(batches(rng, 12)):
        if i in (4, 9):
            eager.optim.lr = graph.optim.lr = 0.1 / (i + 1)
        _, le = eager(hl.tensor(x), hl.tensor(y))
        _, lg = graph(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le)
    np.testing.assert_array_equal(params(graph)["l1.W"], params(eager)["l1.W"])
    assert stats(graph)["replayed"] == 10


def test_batchnorm_running_statistics_match_eager(rng):
    eager, graph = twins(lambda: hl.opt.Adam(lr=0.01), batchnorm=True)
    for x, y in batches(rng, 20):
        eager(hl.tensor(x), hl.tensor(y))
        graph(hl.tensor(x), hl.tensor(y))
    pe, pg = params(eager), params(graph)
    assert "bn.running_mean" in pe
    for k in pe:
        np.testing.assert_array_equal(pg[k], pe[k], err_msg=k)


def test_dropout_draws_a_fresh_mask_per_replay(rng):
    """Masks differ from one replay to the next (the core moves a random record's key on
    after each replay); they are not eager's masks (see docs/training.md, graph mode)."""
    hl.manual_seed(3)
    m = twins(lambda: hl.opt.SGD(lr=0.0), dropout=0.5)[1]  # lr 0: weights stay, masks show
    x, y = batches(rng, 1)[0]
    outs = [m(hl.tensor(x), hl.tensor(y))[0].numpy().copy() for _ in range(6)]
    assert stats(m)["replayed"] == 4
    replays = {o.tobytes() for o in outs[2:]}  # same input and weights: only masks differ
    assert len(replays) == 4


def test_outputs_are_copies_that_later_steps_do_not_change(rng):
    m = twins(lambda: hl.opt.SGD(lr=0.1))[1]
    kept = []
    for x, y in batches(rng, 5):
        kept.append(m(hl.tensor(x), hl.tensor(y))[1])
    values = [float(v) for v in kept]
    assert len(set(values)) == 5


class TorchStyle(hl.Module):
    """PyTorch's loop inside train_one_batch: zero_grad, backward, clip_grad_norm, step."""

    def __init__(self):
        super().__init__()
        self.l1 = hl.layers.Linear(16)
        self.l2 = hl.layers.Linear(4)

    def forward(self, x):
        return self.l2(hl.tanh(self.l1(x)))

    def train_one_batch(self, x, y):
        self.optim.zero_grad()
        loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
        loss.backward()
        hl.opt.clip_grad_norm(list(self.get_params().values()), 0.5)
        self.optim.step()
        return loss


def test_pytorch_style_step_equals_eager(rng):
    models = []
    for graph in (False, True):
        hl.manual_seed(0)
        m = TorchStyle()
        m.compile([hl.Placeholder((8, 12))], is_train=True)
        m.optim = hl.opt.AdamW(lr=hl.opt.StepDecay(0.01, 7, 0.5),
                               params=list(m.get_params().values()))
        m.graph(graph)
        models.append(m)
    eager, graph = models
    for i, (x, y) in enumerate(batches(rng, 30)):
        le = eager.train_one_batch(hl.tensor(x), hl.tensor(y))
        lg = graph.train_one_batch(hl.tensor(x), hl.tensor(y))
        assert float(lg) == float(le), f"step {i}"
    for k, v in params(eager).items():
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)
    assert stats(graph)["replayed"] == 28


class MixedDtypes(hl.Module):
    """A float64 layer feeding a float32 one."""

    def __init__(self, optim):
        super().__init__()
        self.l1 = hl.layers.Linear(16)
        self.l2 = hl.layers.Linear(4)
        self.optim = optim

    def forward(self, x):
        return self.l2(hl.relu(self.l1(x)).astype(hl.float32))

    def train_one_batch(self, x, y):
        loss = hl.losses.softmax_cross_entropy(self.forward(x), y)
        self.optim.backward_and_update(loss)
        return loss


def test_sgd_over_parameters_of_two_dtypes_equals_eager(rng):
    """A recorded SGD step reads one -lr tensor per dtype and device that every update of
    that dtype shares (written once per replay): float64 and float32 parameters each get
    theirs, and a schedule's changing lr reaches both, bitwise as eagerly."""
    models = []
    for graph in (False, True):
        hl.manual_seed(0)
        m = MixedDtypes(hl.opt.SGD(lr=hl.opt.StepDecay(0.05, 5, 0.5), momentum=0.9))
        m.compile([hl.Placeholder((8, 12), dtype=hl.float64)], is_train=True, use_graph=graph)
        models.append(m)
    eager, graph = models
    for i, (x, y) in enumerate(batches(rng, 30)):
        le = eager.train_one_batch(hl.tensor(x.astype(np.float64)), hl.tensor(y))
        lg = graph.train_one_batch(hl.tensor(x.astype(np.float64)), hl.tensor(y))
        assert float(lg) == float(le), f"step {i}"
    pe, pg = params(eager), params(graph)
    assert pe["l1.W"].dtype == np.float64 and pe["l2.W"].dtype == np.float32
    for k in pe:
        np.testing.assert_array_equal(pg[k], pe[k], err_msg=k)
    assert stats(graph)["replayed"] == 28
    shared = [k for k in graph.optim._step_values if k[0] is None]
    assert len(shared) == 2  # (None, dtype, device) for float64 and for float32
