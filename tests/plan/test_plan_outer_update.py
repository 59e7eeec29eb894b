"""A batch-1 weight gradient (a gemm with K == 1: an outer product) that only its optimiser
update reads is formed inside the update in a plan (libcore/src/plan/fuse_update.c): the gemm's
call goes and the gradient never reaches memory. The arithmetic is unchanged (each gradient
element is the same one rounded product), so the fused replay must equal the unfused replay
and the eager calls bit for bit, for every update rule, both float dtypes and the operand
layouts a Linear layer's backward produces; where anything else sees the gradient, or the
vectors change between the gemm and the update, nothing is fused. A batch-1 MLP trained in
graph mode equals eager over 100 steps (the reference is eager hl, whose optimisers
tests/opt checks against PyTorch)."""

import numpy as np
import pytest

import hl
from hl import _core, ops
from hl.ops.optim import optim_update

from ..graph.models import MLP, params
from .replaying import replay

M, N = 37, 23  # the weight's shape: rows of the outer product, and its (odd) row length

# rule -> (states, per-step values, constants, flags), per hl_core.h
RULES = {
    "sgd": (0, [-0.05], [1e-3, 0.0, 1.0], ()),
    "sgd_momentum": (1, [-0.05], [1e-3, 0.9, 0.9], ()),
    "sgd_nesterov": (1, [-0.05], [0.0, 0.9, 1.0], ("nesterov",)),
    "adam": (2, [-0.01, 0.3], [1e-3, 0.1, 0.999, 0.001, 1e-8], ()),
    "adamw": (2, [-0.01, 0.3, 0.999], [0.0, 0.1, 0.999, 0.001, 1e-8], ("decoupled",)),
    "amsgrad": (3, [-0.01, 0.3], [0.0, 0.1, 0.999, 0.001, 1e-8], ()),
    "rmsprop": (3, [-0.01], [1e-3, 0.9, 0.1, 1e-6, 0.5], ("centered", "momentum")),
    "adagrad": (1, [-0.1], [1e-4, 1e-10], ()),
    "v2_momentum": (1, [-0.05], [1e-3, 0.9], ()),
    "v2_adam": (2, [-0.01], [0.9, 0.1, 0.999, 0.001, 1e-8], ()),
}


def _kernel_rule(name):
    return "sgd" if name.startswith("sgd") else (
        "adam" if name in ("adamw", "amsgrad") else name)


class Update:
    """One parameter, its states and per-step value tensors, updated from the outer product
    of a column a (M values) and a row b (N values) laid out as in `layout`."""

    def __init__(self, name, dtype, layout, rng, shape=(M, N)):
        self.name, self.layout = name, layout
        n_states, self.values, self.hyper, self.flags = RULES[name]
        self.param = hl.tensor(rng.standard_normal(shape).astype(dtype))
        self.states = [hl.tensor(np.zeros(shape, dtype)) for _ in range(n_states)]
        self.scalars = [hl.tensor(np.array(v, dtype)) for v in self.values]

    def grad(self, a, b):
        if self.layout == "a_t":      # a is (1, M): x^T dy of a Linear layer's backward
            return ops.gemm_forward(a, b, trans_a=True)
        if self.layout == "b_t":      # b is (N, 1) inside a wider matrix: a strided row
            return ops.gemm_forward(a, b, trans_b=True)
        return ops.gemm_forward(a, b)  # a (M, 1), b (1, N)

    def step(self, a, b):
        optim_update(_kernel_rule(self.name), self.param, self.grad(a, b), self.states,
                     self.scalars, self.hyper, self.flags)

    def values_now(self):
        return [self.param.numpy().copy()] + [s.numpy().copy() for s in self.states]


def _vectors(rng, dtype, layout, m=M, n=N):
    """Input tensors a and b (written in place before each step) for the layout."""
    if layout == "a_t":
        a = hl.tensor(np.zeros((1, m), dtype))
    else:
        a = hl.tensor(np.zeros((m, 1), dtype))
    if layout == "b_t":
        wide = hl.tensor(np.zeros((n, 3), dtype))
        b = wide[:, 1:2]            # (n, 1) with a row stride of 3: B's columns are 3 apart
    else:
        b = hl.tensor(np.zeros((1, n), dtype))
    return a, b


def _fill(t, values):
    t.copy_(hl.tensor(values.reshape(t.shape)))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("layout", ["a_t", "plain", "b_t"])
@pytest.mark.parametrize("name", sorted(RULES))
def test_fused_update_equals_unfused_and_eager_bitwise(rng, name, dtype, layout):
    _check_fused_update(rng, name, dtype, layout, M, N)


@pytest.mark.parametrize("name", ["sgd_momentum", "adam"])
def test_fused_update_split_over_two_threads_is_bitwise_too(rng, name):
    """Past the kernel's parallel threshold (32k elements) each thread takes a range that
    starts inside a row and crosses the 1024-element chunks of the formed gradient."""
    with_threads = hl.get_num_threads()
    hl.set_num_threads(2)
    try:
        _check_fused_update(rng, name, np.float32, "a_t", 300, 131)
    finally:
        hl.set_num_threads(with_threads)


def _check_fused_update(rng, name, dtype, layout, m, n):
    a, b = _vectors(rng, dtype, layout, m, n)
    seed = int(rng.integers(1 << 30))
    eager, fused, plain = (Update(name, dtype, layout, np.random.default_rng(seed), (m, n))
                           for _ in range(3))
    p_fused, _ = replay(lambda: fused.step(a, b), runs=0)
    p_plain, _ = replay(lambda: plain.step(a, b), _core.PLAN_NO_FUSION, runs=0)
    for i in range(6):
        _fill(a, rng.standard_normal(m).astype(dtype))
        _fill(b, rng.standard_normal(n).astype(dtype))
        if i == 3:  # a schedule's next value, written where the plans read it
            for u in (eager, fused, plain):
                for s, v in zip(u.scalars, u.values):
                    _fill(s, np.array(v * 0.5, dtype))
                u.values = [v * 0.5 for v in u.values]
        eager.step(a, b)
        _core.plan_run(p_fused)
        _core.plan_run(p_plain)
        want = eager.values_now()
        for got in (fused.values_now(), plain.values_now()):
            for k, (g, w) in enumerate(zip(got, want)):
                np.testing.assert_array_equal(g, w, err_msg=f"step {i}, tensor {k}")
    stats = _core.plan_stats(p_fused)
    assert stats["outer_updates"] == 1 and stats["calls"] == 1
    assert _core.plan_stats(p_plain)["outer_updates"] == 0


def test_nothing_fuses_where_the_gradient_is_seen_or_the_vectors_change(rng):
    a, b = _vectors(rng, np.float32, "a_t")
    _fill(a, rng.standard_normal(M).astype(np.float32))
    _fill(b, rng.standard_normal(N).astype(np.float32))
    held = {}
    a2 = hl.tensor(rng.standard_normal((2, M)).astype(np.float32))
    b2 = hl.tensor(rng.standard_normal((2, N)).astype(np.float32))

    def kept():  # the caller keeps the gradient: it must be written
        u = Update("sgd_momentum", np.float32, "a_t", np.random.default_rng(1))
        held["g"] = g = u.grad(a, b)
        optim_update("sgd", u.param, g, u.states, u.scalars, u.hyper)
        return u

    def read_twice():  # gradient clipping's norm reads it too
        u = Update("sgd_momentum", np.float32, "a_t", np.random.default_rng(1))
        g = u.grad(a, b)
        held["norm"] = hl.sum(g * g)
        optim_update("sgd", u.param, g, u.states, u.scalars, u.hyper)
        return u

    def vector_written():  # the row changes between the gemm and the update
        u = Update("sgd_momentum", np.float32, "a_t", np.random.default_rng(1))
        g = u.grad(a, b)
        b.copy_(b * 2.0)
        optim_update("sgd", u.param, g, u.states, u.scalars, u.hyper)
        return u

    def batch_two():  # K == 2: not an outer product
        u = Update("sgd_momentum", np.float32, "a_t", np.random.default_rng(1))
        optim_update("sgd", u.param, ops.gemm_forward(a2, b2, trans_a=True), u.states,
                     u.scalars, u.hyper)
        return u

    for f in (kept, read_twice, vector_written, batch_two):
        b_before = b.numpy().copy()
        plan, u = replay(f, runs=1)
        assert _core.plan_stats(plan)["outer_updates"] == 0, f.__name__
        _fill(b, b_before)
        _, u_plain = replay(f, _core.PLAN_NO_FUSION, runs=1)
        _fill(b, b_before)
        np.testing.assert_array_equal(u.param.numpy(), u_plain.param.numpy(),
                                      err_msg=f.__name__)
    want = np.outer(a.numpy()[0], b.numpy()[0])
    np.testing.assert_array_equal(held["g"].numpy(), want.astype(np.float32))


OPTIMISERS = {
    "sgd": lambda: hl.opt.SGD(lr=0.05, weight_decay=1e-3),
    "momentum": lambda: hl.opt.SGD(lr=hl.opt.StepDecay(0.05, 10, 0.7), momentum=0.9,
                                   dampening=0.1),
    "nesterov": lambda: hl.opt.SGD(lr=0.05, momentum=0.9, nesterov=True),
    "adam": lambda: hl.opt.Adam(lr=hl.opt.CosineDecay(0.01, 100), weight_decay=1e-3),
    "adamw": lambda: hl.opt.AdamW(lr=0.01, weight_decay=0.05),
    "rmsprop": lambda: hl.opt.RMSProp(lr=0.01, centered=True, momentum=0.5),
    "adagrad": lambda: hl.opt.AdaGrad(lr=0.1, weight_decay=1e-4),
}


def _backward_plan_stats(model):
    entry = next(e for e in model._graph_runner().caches["train_one_batch"].entries.values()
                 if e.plan is not None)
    return [_core.plan_stats(c) for p in (entry.plan, entry.second) if p is not None
            for c in p.cores()]


@pytest.mark.parametrize("name", sorted(OPTIMISERS))
def test_batch1_mlp_in_graph_mode_equals_eager_for_100_steps(rng, name):
    models = []
    for graph in (False, True):
        hl.manual_seed(0)
        m = MLP(OPTIMISERS[name](), hidden=24, classes=5)
        m.compile([hl.Placeholder((1, 12))], is_train=True, use_graph=graph)
        models.append(m)
    eager, graph = models
    for i in range(100):
        x = hl.tensor(rng.standard_normal((1, 12)).astype(np.float32))
        y = hl.tensor(rng.integers(0, 5, 1))
        _, le = eager(x, y)
        _, lg = graph(x, y)
        assert float(lg) == float(le), f"step {i}"
    pe, pg = params(eager), params(graph)
    for k in pe:
        np.testing.assert_array_equal(pg[k], pe[k], err_msg=k)
    # both Linear layers' weight gradients were formed inside their updates
    assert sum(s["outer_updates"] for s in _backward_plan_stats(graph)) == 2
