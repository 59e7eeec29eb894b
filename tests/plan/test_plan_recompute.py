"""Recomputation instead of saving (libcore/src/plan/recompute.c, issue 20): a plan makes a
ReLU(batch norm) output again from the batch norm's input and saved statistics where a late
call reads it, and max_pool_grad finds each window's maximum again in the pooled input instead
of reading max_pool's indices. The replay must equal the replay without the rewrite
(HL_PLAN_NO_RECOMPUTE) and the eager ops bit for bit; the arena must shrink by the bytes no
longer alive across the gap; where the rewrite would read something changed or held outside,
nothing is rewritten. PyTorch is the reference for the max-pool gradient's values."""

import numpy as np
import pytest

import hl
from hl import _core, ops
from tests.concurrency import run_threads

from .replaying import replay

GAP = 20  # element-wise calls between the early and the late read (recompute.c: >= 16)


def _filler(h):
    for _ in range(GAP):
        h = h * 0.5 + 1.0
    a, b, d = h * 0.5, h * 0.25, h * 0.125  # the gap's peak: more tensors of x's size
    return a + b + d


def _bn_chain(x, g, b, keep=None, change_weight=False):
    """relu(batch_norm(conv(x))) read early, GAP calls, then read late beside batch norm's
    backward: the shape of a ResNet block's step."""
    w = hl.tensor(np.eye(3, dtype=x.numpy().dtype).reshape(3, 3, 1, 1) * 0.5)
    def f():
        c = hl.conv2d(x, w)  # an intermediate no cheap call makes
        y, mean, invstd = ops.batch_norm_forward(c, None, None, g, b, training=True,
                                                 return_stats=True)
        r = hl.relu(y)
        h = _filler(r * 3.0)
        if change_weight:  # the weight changes before the late read: r cannot be made again
            hl.add(g, 1.0, out=g)
        late = r * h
        dc, dg, db = ops.batch_norm_grad(late, c, mean, invstd, g, training=True)
        if keep is not None:
            keep.append(r)  # the caller holds r: the plan must write it, and keeps it
        return late, dc, dg, db
    return f


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_of_batch_norm_is_made_again_bit_for_bit_and_the_arena_shrinks(rng, dtype):
    x = hl.tensor(rng.standard_normal((4, 3, 8, 8)).astype(dtype) * 2 + 0.5)
    g = hl.tensor(rng.standard_normal(3).astype(dtype))
    b = hl.tensor(rng.standard_normal(3).astype(dtype))
    f = _bn_chain(x, g, b)
    eager = f()
    results = {}
    for options in (0, _core.PLAN_NO_RECOMPUTE, _core.PLAN_NO_FUSION,
                    _core.PLAN_NO_FUSION | _core.PLAN_NO_RECOMPUTE):
        plan, got = replay(f, options)
        results[options] = _core.plan_stats(plan)
        for a, e in zip(got, eager):
            np.testing.assert_array_equal(a.numpy(), e.numpy(), err_msg=str(options))
    stats, plain = results[_core.PLAN_NO_FUSION], results[_core.PLAN_NO_FUSION |
                                                          _core.PLAN_NO_RECOMPUTE]
    assert results[0]["recomputed"] == stats["recomputed"] == 1
    assert plain["recomputed"] == 0
    assert stats["calls"] == plain["calls"] + 2  # batch norm (given statistics) and relu
    # r (x's size) is no longer alive across the gap: the floor drops by its bytes (unfused,
    # where the gap's temporaries have memory of their own)
    nbytes = x.numpy().nbytes
    assert stats["alive_peak_bytes"] <= plain["alive_peak_bytes"] - nbytes, (stats, plain)


def test_nothing_is_made_again_from_a_weight_changed_in_between_or_from_a_held_tensor(rng):
    x = hl.tensor(rng.standard_normal((4, 3, 8, 8)).astype(np.float32))
    for kwargs in ({"change_weight": True}, {"keep": []}):
        g = hl.tensor(rng.standard_normal(3).astype(np.float32))
        b = hl.tensor(rng.standard_normal(3).astype(np.float32))
        g0 = g.numpy().copy()
        plan, got = replay(_bn_chain(x, g, b, **kwargs), runs=1)
        assert _core.plan_stats(plan)["recomputed"] == 0, kwargs
        g.numpy()[...] = g0
        eager = _bn_chain(x, g, b, **kwargs)()
        for a, e in zip(got, eager):
            np.testing.assert_array_equal(a.numpy(), e.numpy())


def test_batch_norm_normalises_with_its_saved_statistics(rng):
    """y is computed from the mean and invstd as returned (float32), so that recomputing it
    from them is exact; against PyTorch within float32 rounding."""
    torch = pytest.importorskip("torch")
    xn = (rng.standard_normal((5, 4, 6, 6)) * 3 + 7).astype(np.float32)
    gn, bn = rng.standard_normal(4).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    y, mean, invstd = ops.batch_norm_forward(hl.tensor(xn), None, None, hl.tensor(gn),
                                             hl.tensor(bn), training=True, return_stats=True)
    m = mean.numpy().astype(np.float64)[None, :, None, None]
    s = invstd.numpy().astype(np.float64)[None, :, None, None]
    want = ((xn - m) * (gn.astype(np.float64)[None, :, None, None] * s) +
            bn.astype(np.float64)[None, :, None, None]).astype(np.float32)
    np.testing.assert_array_equal(y.numpy(), want)
    ref = torch.nn.functional.batch_norm(torch.tensor(xn), None, None, torch.tensor(gn),
                                         torch.tensor(bn), training=True)
    np.testing.assert_allclose(y.numpy(), ref.numpy(), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("kernel,stride,padding,dilation,ceil_mode", [
    (2, 2, 0, 1, False), (3, 2, 1, 1, True), (3, 1, 1, 2, False), (2, 1, 0, 1, False)])
def test_max_pool_grad_finds_the_maxima_again_in_its_input(rng, dtype, kernel, stride, padding,
                                                           dilation, ceil_mode):
    torch = pytest.importorskip("torch")
    xn = rng.integers(-3, 4, (2, 3, 9, 9)).astype(dtype)  # many ties: the first tap must win
    xn[0, 0, 0, 0] = np.nan  # NaN wins its windows, as in max_pool
    x = hl.tensor(xn)
    dyn = rng.standard_normal((2, 3, 9, 9)).astype(dtype)  # cut to the output's shape below
    kw = dict(stride=stride, padding=padding, dilation=dilation, ceil_mode=ceil_mode)

    def f():
        r = x * 1.0  # the pooled input, an intermediate read again after the grad
        y, idx = ops.max_pool2d_forward(r, kernel, return_indices=True, **kw)
        dy = hl.tensor(dyn[:, :, :y.shape[2], :y.shape[3]].copy())
        dx = ops.max_pool2d_grad(dy * 1.0, idx, r.shape, kernel, **kw)
        return y, dx + r * 0.0

    plan, (y, dx) = replay(f)
    assert _core.plan_stats(plan)["recomputed"] == 1
    _, (py, pdx) = replay(f, _core.PLAN_NO_RECOMPUTE)
    ey, edx = f()
    for a, p, e in ((y, py, ey), (dx, pdx, edx)):
        np.testing.assert_array_equal(a.numpy(), p.numpy())
        np.testing.assert_array_equal(a.numpy(), e.numpy())
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, kernel, **kw)
    ty.backward(torch.tensor(dyn[:, :, :ty.shape[2], :ty.shape[3]].copy()))
    np.testing.assert_array_equal(y.numpy(), ty.detach().numpy())
    got = dx.numpy()
    got[np.isnan(xn)] = 0  # r * 0.0 is NaN there
    want = tx.grad.numpy().copy()
    want[np.isnan(xn)] = 0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_indices_the_caller_holds_are_still_written(rng):
    x = hl.tensor(rng.standard_normal((1, 2, 6, 6)).astype(np.float32))
    held = {}

    def f():
        r = x * 1.0
        y, held["idx"] = ops.max_pool2d_forward(r, 2, return_indices=True)
        dx = ops.max_pool2d_grad(y * 1.0, held["idx"], r.shape, 2)
        return dx + r

    plan, _ = replay(f)
    assert _core.plan_stats(plan)["recomputed"] == 0
    _, want = ops.max_pool2d_forward(x, 2, return_indices=True)
    np.testing.assert_array_equal(held["idx"].numpy(), want.numpy())


def test_recomputing_plans_replayed_on_two_threads_at_once_give_one_threads_answers(rng):
    """Each thread records its own plans, the batch-norm chain and the max-pool gradient (both
    rewritten to recompute), on data of its own, and replays them 25 times while the other
    thread does the same: every replay gives bit for bit what the same plans give replayed
    by one thread alone (the recomputed calls, their scratch and the arena are the plan's and
    the replaying thread's, never shared)."""
    def inputs(k):
        r = np.random.default_rng(100 + k)
        x = hl.tensor(r.standard_normal((4, 3, 8, 8)).astype(np.float32) * 2 + 0.5)
        g, b = (hl.tensor(r.standard_normal(3).astype(np.float32)) for _ in range(2))
        p = hl.tensor(r.integers(-3, 4, (2, 3, 9, 9)).astype(np.float32))  # ties
        return _bn_chain(x, g, b), _pool_chain(p)

    def replays(k, runs):
        outs = []
        for f in inputs(k):
            plan, got = replay(f, runs=1)
            assert _core.plan_stats(plan)["recomputed"] == 1
            for _ in range(runs):
                _core.plan_run(plan)
                outs.append([t.numpy().copy() for t in got])
        return outs

    alone = [replays(k, 2)[1::2] for k in range(2)]  # [bn, pool]: second replays, 1 thread
    assert not np.array_equal(alone[0][0][0], alone[1][0][0])  # the threads' data differ
    both = run_threads(lambda k: replays(k, 25), 2)
    for k in range(2):
        for runs, want in ((both[k][:25], alone[k][0]), (both[k][25:], alone[k][1])):
            for got in runs:
                for a, e in zip(got, want):
                    np.testing.assert_array_equal(a, e)


def _pool_chain(x):
    """max_pool's gradient read after its input's last other use: the rewrite finds the
    maxima again in the pooled input (test_max_pool_grad_finds_the_maxima_again_in_its_input)."""
    def f():
        r = x * 1.0
        y, idx = ops.max_pool2d_forward(r, 3, stride=2, padding=1, return_indices=True)
        dx = ops.max_pool2d_grad(y * 1.0, idx, r.shape, 3, stride=2, padding=1)
        return y, dx + r * 0.0
    return f


def test_graph_mode_training_that_recomputes_on_two_threads_gives_one_threads_answers():
    """Two models trained in graph mode at once, one per thread (batch norm + ReLU and max
    pooling: the plans recompute): losses and weights bit for bit those of one model trained
    alone."""
    from tests.graph import models
    L = hl.layers
    data = models.image_batches(np.random.default_rng(3), 6, (8, 1, 16, 16), classes=10)

    def model():
        hl.manual_seed(0)
        m = models.CNN(hl.opt.SGD(lr=0.05, momentum=0.9), L.Conv2d(8, 3, padding=1, bias=False),
                       L.BatchNorm2d(), L.ReLU(), L.MaxPool2d(2, 2), L.Conv2d(16, 3), L.ReLU(),
                       L.MaxPool2d(2, 2), L.Flatten(), L.Linear(10))
        m.compile([hl.Placeholder(data[0][0].shape)], is_train=True, use_graph=True)
        m.train_one_batch(hl.tensor(data[0][0]), hl.tensor(data[0][1]))  # built, slots made
        return m

    def train(m):
        losses = [float(m.train_one_batch(hl.tensor(x), hl.tensor(y)).numpy())
                  for x, y in data[1:] * 3]
        return losses, models.params(m)

    alone = train(model())
    ms = [model(), model()]  # built here: their initial draws are not concurrent
    both = run_threads(lambda k: train(ms[k]), 2)
    for m, (losses, params) in zip(ms, both):
        plan = [e.plan for e in m._graph_runner().caches["train_one_batch"].entries.values()][0]
        assert _core.plan_stats(plan.core)["recomputed"] >= 1
        assert losses == alone[0]
        for k in params:
            np.testing.assert_array_equal(params[k], alone[1][k], err_msg=k)
