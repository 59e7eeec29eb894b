"""max_pool_grad -> relu_grad as one call in a plan (libcore/src/plan/fuse_norm.c, issue 20):
where a plan's max-pool gradient finds its maxima again in the pooled input (recompute.c) and
that input is a ReLU's output whose relu_grad reads the pool's gradient next and alone, the
pool gradient applies relu_grad's select itself and the relu_grad's call goes. The fused
replay must equal the unfused replay (PLAN_NO_NORM_FUSION) and the eager ops bit for bit
(ties, NaN, -0 and zeros of the ReLU included), for the 2x2 kernel and the general one; PyTorch's
autograd of max_pool2d(relu(x)) is the reference for the values. Where anything else reads the
pool's gradient, or the relu_grad reads another tensor, nothing is fused. The MNIST CNN trains
in graph mode exactly as eagerly with both of its pools fused."""
import numpy as np
import pytest

import hl
from hl import _core, ops
from hl import layers as L

from ..graph.models import CNN, assert_graph_trains_as_eager, image_batches
from .replaying import replay

WINDOWS = [dict(kernel=2, stride=2, padding=0),     # the 2x2 kernel (pool_2x2_impl.h)
           dict(kernel=3, stride=2, padding=1),     # the general loop (pool_impl.h)
           dict(kernel=2, stride=1, padding=0)]     # overlapping windows


def _chain(x, dy_full, win, extra=None):
    """relu(x * 1), max-pooled with indices, its gradient from dy, then relu_grad by the
    ReLU's output: the backward of Conv -> ReLU -> MaxPool in a plan."""
    k, kw = win["kernel"], dict(stride=win["stride"], padding=win["padding"])

    def f():
        z = hl.relu(x * 1.0)
        y, idx = ops.max_pool2d_forward(z, k, return_indices=True, **kw)
        dy = hl.tensor(dy_full[:, :, :y.shape[2], :y.shape[3]].copy()) * 1.0
        dz = ops.max_pool2d_grad(dy, idx, z.shape, k, **kw)
        dx = ops.relu_grad(dz, extra(z) if extra else z)
        return y, dx
    return f


def _data(rng, dtype):
    xn = rng.integers(-2, 3, (2, 3, 9, 9)).astype(dtype)   # ties, zeros and negatives
    xn[0, 0, 0, 0] = np.nan
    xn[1, 2, 4, 4] = -0.0
    dyn = rng.standard_normal((2, 3, 9, 9)).astype(dtype)
    dyn[0, 1, 0, 0] = -0.0   # -0 + 0 is +0 on a picked tap either way
    return hl.tensor(xn), xn, dyn


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("win", WINDOWS, ids=str)
def test_fused_pool_gradient_equals_the_two_calls_bitwise(rng, dtype, win):
    torch = pytest.importorskip("torch")
    x, xn, dyn = _data(rng, dtype)
    f = _chain(x, dyn, win)
    plan, (y, dx) = replay(f)
    stats = _core.plan_stats(plan)
    assert stats["pool_fusions"] == 1 and stats["recomputed"] == 1, stats
    apart_plan, (ay, adx) = replay(f, _core.PLAN_NO_NORM_FUSION)
    assert _core.plan_stats(apart_plan)["pool_fusions"] == 0
    assert _core.plan_stats(apart_plan)["calls"] == stats["calls"] + 1
    ey, edx = f()
    for got in ((y, dx), (ay, adx)):
        np.testing.assert_array_equal(got[0].numpy(), ey.numpy())
        np.testing.assert_array_equal(got[1].numpy(), edx.numpy())
    assert np.array_equal(np.signbit(dx.numpy()), np.signbit(edx.numpy()))
    tx = torch.tensor(np.nan_to_num(xn, nan=5.0), requires_grad=True)  # torch: NaN aside
    k = win["kernel"]
    ty = torch.nn.functional.max_pool2d(torch.relu(tx), k, stride=win["stride"],
                                        padding=win["padding"])
    ty.backward(torch.tensor(dyn[:, :, :ty.shape[2], :ty.shape[3]].copy()))
    got, want = dx.numpy().copy(), tx.grad.numpy()
    # the NaN plane's windows differ by design (NaN wins there); compare the other planes
    np.testing.assert_allclose(got[1], want[1], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got[0, 1:], want[0, 1:], rtol=1e-6, atol=1e-6)


def test_nothing_is_fused_where_the_gradient_or_another_input_is_read(rng):
    x, xn, dyn = _data(rng, np.float32)
    win = WINDOWS[0]
    held = {}

    def other_z(z):   # relu_grad by another tensor than the pooled one
        return z * 1.0

    def read_twice():   # the pool's gradient is read again after the relu_grad
        k = win["kernel"]
        z = hl.relu(x * 1.0)
        y, idx = ops.max_pool2d_forward(z, k, return_indices=True, stride=2)
        dz = ops.max_pool2d_grad(y * 1.0, idx, z.shape, k, stride=2)
        return ops.relu_grad(dz, z) + dz

    def kept():   # the caller holds the pool's gradient
        k = win["kernel"]
        z = hl.relu(x * 1.0)
        y, idx = ops.max_pool2d_forward(z, k, return_indices=True, stride=2)
        held["dz"] = ops.max_pool2d_grad(y * 1.0, idx, z.shape, k, stride=2)
        return ops.relu_grad(held["dz"], z)

    for f in (_chain(x, dyn, win, extra=other_z), read_twice, kept):
        plan, out = replay(f)
        assert _core.plan_stats(plan)["pool_fusions"] == 0, f
        eager = f()
        for a, e in zip(out if isinstance(out, tuple) else (out,),
                        eager if isinstance(eager, tuple) else (eager,)):
            np.testing.assert_array_equal(a.numpy(), e.numpy())


@pytest.mark.parametrize("threads", [1, 2])
def test_mnist_cnn_trains_in_graph_mode_exactly_as_eagerly_with_its_pools_fused(rng, threads):
    """The MNIST CNN of bench/train.py (channels cut to 6 and 10): 5x5 convolutions on the
    direct kernels (conv_direct.c), Conv -> ReLU epilogues, both max-pool gradients fused with
    their relu_grad; 8 SGD-with-momentum steps equal eager's bit for bit."""
    def model():
        return CNN(hl.opt.SGD(lr=0.05, momentum=0.9), L.Conv2d(6, 5), L.ReLU(),
                   L.MaxPool2d(2, 2), L.Conv2d(10, 5), L.ReLU(), L.MaxPool2d(2, 2),
                   L.Flatten(), L.Linear(32), L.ReLU(), L.Linear(10))
    prev = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        graph, stats = assert_graph_trains_as_eager(model, image_batches(rng, 8, (8, 1, 28, 28),
                                                                         classes=10))
    finally:
        hl.set_num_threads(prev)
    assert stats["pool_fusions"] == 2 and stats["conv_epilogues"] == 2, stats
