"""Training's batch norm and the ReLU (and residual add) around it run as one call in a plan
(libcore/src/plan/fuse_norm.c): batch_norm -> relu, batch_norm -> add -> relu (either operand
order) and relu_grad -> batch_norm_grad. A fused replay must equal the unfused replay and the
eager ops bit for bit (NaN included); where anything else sees the intermediate nothing is
fused. PyTorch's batch_norm / relu and their autograd are the reference for the values (rtol
1e-5 in float32, 1e-12 in float64), and ResNet-style blocks train in graph mode ('sequence' and
'topological', one and two threads) exactly as eagerly."""
import numpy as np
import pytest

import hl
from hl import _core, ops
from hl import layers as L

from ..graph.models import CNN, ResBlock, image_batches, params
from .replaying import replay

TOL = {np.float32: 1e-5, np.float64: 1e-12}


def _stats_of(f):
    """(fused plan's stats, fused result, unfused result, eager result) of f; the replay with
    only this fusion off (PLAN_NO_NORM_FUSION) fuses nothing here and equals them too."""
    plan, fused = replay(f)
    _, plain = replay(f, _core.PLAN_NO_FUSION)
    apart_plan, apart = replay(f, _core.PLAN_NO_NORM_FUSION)
    assert _core.plan_stats(apart_plan)["norm_fusions"] == 0
    _assert_all_equal(apart, plain, plain)
    return _core.plan_stats(plan), fused, plain, f()


def _as_list(out):
    return [t.numpy() for t in (out if isinstance(out, tuple) else (out,))]


def _assert_all_equal(fused, plain, eager):
    for a, b, c in zip(_as_list(fused), _as_list(plain), _as_list(eager)):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, c)


def _bn_data(rng, dtype, shape=(3, 4, 5, 6)):
    x = rng.standard_normal(shape).astype(dtype)
    x[0, 1, 0, :2] = np.nan  # a NaN channel stays NaN through the epilogue, as through relu
    g = rng.standard_normal(shape[1]).astype(dtype)
    b = rng.standard_normal(shape[1]).astype(dtype)
    r = rng.standard_normal(shape).astype(dtype)
    return x, g, b, r


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("epilogue", ["relu", "add_relu", "res_add_relu"])
def test_batch_norm_epilogue_is_one_call_and_equals_the_unfused_ops(rng, dtype, epilogue):
    torch = pytest.importorskip("torch")
    x_np, g_np, b_np, r_np = _bn_data(rng, dtype)
    x, g, b, r = (hl.tensor(a) for a in (x_np, g_np, b_np, r_np))

    def f():
        y = ops.batch_norm_forward(x, None, None, g, b, training=True)
        if epilogue == "add_relu":
            y = y + r
        elif epilogue == "res_add_relu":
            y = r + y
        return hl.relu(y)

    stats, fused, plain, eager = _stats_of(f)
    assert stats["norm_fusions"] == 1 and stats["calls"] == 1, stats
    _assert_all_equal(fused, plain, eager)
    t = torch.nn.functional.batch_norm(torch.tensor(x_np), None, None, torch.tensor(g_np),
                                       torch.tensor(b_np), training=True)
    if epilogue != "relu":
        t = t + torch.tensor(r_np)
    want = torch.relu(t).numpy()
    np.testing.assert_allclose(fused.numpy(), want, rtol=TOL[dtype], atol=TOL[dtype])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("training", [True, False])
def test_relu_grad_into_batch_norm_grad_equals_the_unfused_ops(rng, dtype, training):
    torch = pytest.importorskip("torch")
    x_np, g_np, b_np, _ = _bn_data(rng, dtype)
    x_np[0, 1, 0, :2] = 0.5  # finite: NaN inputs are the forward test's
    dz_np = rng.standard_normal(x_np.shape).astype(dtype)
    x, g, b = (hl.tensor(a) for a in (x_np, g_np, b_np))
    y, mean, invstd = ops.batch_norm_forward(x, None, None, g, b, training=True,
                                             return_stats=True)
    z = hl.relu(y)
    # a NaN gradient where z == 0: relu_grad drops it (the fused kernel must too)
    dz_np.reshape(-1)[np.flatnonzero(z.numpy() == 0)[0]] = np.nan
    dz = hl.tensor(dz_np)

    def f():
        return ops.batch_norm_grad(ops.relu_grad(dz, z), x, mean, invstd, g, training=training)

    stats, fused, plain, eager = _stats_of(f)
    assert stats["norm_fusions"] == 1 and stats["calls"] == 1, stats
    _assert_all_equal(fused, plain, eager)
    assert all(np.isfinite(a).all() for a in _as_list(fused))
    tx, tg, tb = (torch.tensor(a, requires_grad=True) for a in (x_np, g_np, b_np))
    if training:
        tz = torch.relu(torch.nn.functional.batch_norm(tx, None, None, tg, tb, training=True))
    else:  # the statistics are constants: the gradient of the normalisation they define
        m, v = torch.tensor(mean.numpy()), torch.tensor(invstd.numpy())
        shape = (1, -1, 1, 1)
        tz = torch.relu((tx - m.view(shape)) * v.view(shape) * tg.view(shape) +
                        tb.view(shape))
    tz.backward(torch.tensor(np.nan_to_num(dz_np, nan=0.0)))
    for got, want in zip(_as_list(fused), (tx.grad, tg.grad, tb.grad)):
        np.testing.assert_allclose(got, want.numpy(), rtol=TOL[dtype] * 10,
                                   atol=TOL[dtype] * 10)


def test_nothing_fuses_where_the_intermediate_is_seen(rng):
    x_np, g_np, b_np, r_np = _bn_data(rng, np.float32)
    x, g, b, r = (hl.tensor(a) for a in (x_np, g_np, b_np, r_np))
    held = {}

    def kept():  # the caller keeps the batch norm's output: it must be written
        held["y"] = ops.batch_norm_forward(x, None, None, g, b, training=True)
        return hl.relu(held["y"])

    def read_twice():  # another op reads it too
        y = ops.batch_norm_forward(x, None, None, g, b, training=True)
        return hl.relu(y) + y

    def sum_read_twice():  # the residual sum is read by another op than the relu
        s = ops.batch_norm_forward(x, None, None, g, b, training=True) + r
        return hl.relu(s) * s

    def leaky():  # not a ReLU
        return hl.leaky_relu(ops.batch_norm_forward(x, None, None, g, b, training=True), 0.1)

    y, mean, invstd = ops.batch_norm_forward(x, None, None, g, b, training=True,
                                             return_stats=True)
    z, dz = hl.relu(y), hl.tensor(rng.standard_normal(x_np.shape).astype(np.float32))

    def grad_kept():  # the caller keeps relu_grad's output
        held["dy"] = ops.relu_grad(dz, z)
        return ops.batch_norm_grad(held["dy"], x, mean, invstd, g)

    for f in (kept, read_twice, sum_read_twice, leaky, grad_kept):
        stats, fused, plain, eager = _stats_of(f)
        assert stats["norm_fusions"] == 0, f.__name__
        _assert_all_equal(fused, plain, eager)
    np.testing.assert_array_equal(held["y"].numpy(), y.numpy())
    np.testing.assert_array_equal(held["dy"].numpy(), ops.relu_grad(dz, z).numpy())


def _resnet():
    return CNN(hl.opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-4),
               L.Conv2d(4, 3, padding=1, bias=False), L.BatchNorm2d(), L.ReLU(),
               ResBlock(4, 1), ResBlock(8, 2), L.GlobalAvgPool2d(), L.Flatten(), L.Linear(5))


def _train(mode, data, threads):
    prev = hl.get_num_threads()
    try:
        hl.set_num_threads(threads)
        hl.manual_seed(0)
        m = _resnet()
        m.compile([hl.Placeholder(data[0][0].shape)], is_train=True, use_graph=mode != "eager",
                  graph_alg="sequence" if mode == "eager" else mode)
        losses = [float(m.train_one_batch(hl.tensor(x), hl.tensor(y)).numpy()) for x, y in data]
    finally:
        hl.set_num_threads(prev)
    return m, losses


@pytest.mark.parametrize("threads", [1, 2])
def test_resnet_blocks_train_in_graph_mode_exactly_as_eagerly(rng, threads):
    """30 steps of SGD with momentum and weight decay; every loss, parameter and running
    statistic equal bit for bit, in both graph_alg orders, with the batch norms fused."""
    data = image_batches(rng, 30, (6, 3, 10, 10))
    eager, le = _train("eager", data, threads)
    pe = params(eager)
    for mode in ("sequence", "topological"):
        graph, lg = _train(mode, data, threads)
        assert lg == le, mode
        pg = params(graph)
        assert pg.keys() == pe.keys()
        for k in pe:
            np.testing.assert_array_equal(pg[k], pe[k], err_msg=f"{mode}: {k}")
        entries = graph._graph_runner().caches["train_one_batch"].entries.values()
        stats = [_core.plan_stats(core) for e in entries for core in e.plan.cores()]
        # stem bn+relu, 2 inner bn+relu, 2 block-end bn+add+relu (and their recomputed
        # copies), the inner blocks' relu_grad -> bn_grad: at least 7 fused calls
        assert sum(s["norm_fusions"] for s in stats) >= 7, (mode, stats)
        assert graph._graph_runner().stats()["train_one_batch"]["replayed"] >= 25
