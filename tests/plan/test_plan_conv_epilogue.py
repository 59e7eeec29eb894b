"""A convolution whose output only a ReLU reads runs, in a plan, as one conv_fused call with
the ReLU as its epilogue (libcore/src/plan/fuse.c). The replay must equal the unfused replay
and the eager ops bit for bit; where anything else sees the convolution's output (the caller
holds it, another op reads it) or the activation is not a ReLU, nothing is fused. PyTorch's
conv2d + relu is the reference for the values; graph-mode training of a CNN equals eager."""

import numpy as np
import pytest

import hl
from hl import _core

from ..graph.models import CNN, assert_graph_trains_as_eager, image_batches
from .replaying import replay


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("bias,stride,padding,groups", [
    (True, 1, 0, 1), (False, 2, 1, 1), (True, 1, 2, 2)])
def test_conv_then_relu_is_one_call_and_equals_the_unfused_ops(rng, dtype, bias, stride,
                                                               padding, groups):
    torch = pytest.importorskip("torch")
    x_np = rng.standard_normal((2, 4, 9, 9)).astype(dtype)
    x_np[0, 0, 0, :3] = np.nan  # NaN stays NaN through the ReLU epilogue, as through relu
    w_np = rng.standard_normal((6, 4 // groups, 3, 3)).astype(dtype)
    b_np = rng.standard_normal(6).astype(dtype) if bias else None
    x, w = hl.tensor(x_np), hl.tensor(w_np)
    b = hl.tensor(b_np) if bias else None

    def f():
        return hl.relu(hl.conv2d(x, w, b, stride=stride, padding=padding, groups=groups))

    plan, fused = replay(f)
    stats = _core.plan_stats(plan)
    assert stats["conv_epilogues"] == 1 and stats["calls"] == 1
    _, plain = replay(f, _core.PLAN_NO_FUSION)
    eager = f()
    np.testing.assert_array_equal(fused.numpy(), plain.numpy())
    np.testing.assert_array_equal(fused.numpy(), eager.numpy())
    want = torch.relu(torch.nn.functional.conv2d(
        torch.tensor(x_np), torch.tensor(w_np), None if b_np is None else torch.tensor(b_np),
        stride=stride, padding=padding, groups=groups)).numpy()
    tol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(fused.numpy(), want, rtol=tol, atol=tol)


def test_nothing_fuses_where_the_convolution_output_is_seen(rng):
    x = hl.tensor(rng.standard_normal((1, 2, 6, 6)).astype(np.float32))
    w = hl.tensor(rng.standard_normal((3, 2, 3, 3)).astype(np.float32))
    held = {}

    def kept():  # the caller keeps the convolution's output: it must be written
        held["c"] = hl.conv2d(x, w)
        return hl.relu(held["c"])

    def read_twice():  # another op reads it too
        c = hl.conv2d(x, w)
        return hl.relu(c) + c

    def leaky():  # not a ReLU
        return hl.leaky_relu(hl.conv2d(x, w), 0.1)

    for f in (kept, read_twice, leaky):
        plan, out = replay(f)
        assert _core.plan_stats(plan)["conv_epilogues"] == 0, f.__name__
        np.testing.assert_array_equal(out.numpy(), f().numpy())
    np.testing.assert_array_equal(held["c"].numpy(), hl.conv2d(x, w).numpy())


def test_cnn_training_in_graph_mode_equals_eager_bitwise(rng):
    L = hl.layers

    def model():
        return CNN(hl.opt.SGD(lr=0.05, momentum=0.9), L.Conv2d(4, 3), L.ReLU(),
                   L.MaxPool2d(2, 2), L.Conv2d(6, 3), L.ReLU(), L.Flatten(), L.Linear(5))
    graph, stats = assert_graph_trains_as_eager(model, image_batches(rng, 12, (4, 2, 12, 12)))
    assert graph._graph_runner().stats()["train_one_batch"]["replayed"] >= 10
    assert stats["conv_epilogues"] == 2
