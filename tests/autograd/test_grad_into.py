"""engine.backward(..., into=): each leaf's gradient written into a given destination (the
data-parallel gradient buckets, PyTorch DDP's gradient_as_bucket_view). Reference: the same
walk without destinations; the ops that make parameter gradients (gemm / linear, matmul,
conv, bias sums, batch and layer norm) write there themselves, with no copy, and give
bitwise the same values (the same kernels, only the output memory differs)."""
import numpy as np
import pytest

import hl
from hl import _core
from hl.autograd.engine import backward

L = hl.layers


def _param(values):
    return hl.Tensor(values, requires_grad=True, stores_grad=True)


class Net(hl.Module):
    """Every kind of parameter gradient: conv (weight, bias), batch norm, Linear (gemm),
    layer norm, a bare matmul weight used twice (two contributions), a 1-D bias added by
    broadcasting, and a leaf used as two inputs of one op (w * w)."""

    def __init__(self, dtype):
        super().__init__()
        self.conv = L.Conv2d(4, 3, padding=1)
        self.bn = L.BatchNorm2d()
        self.fc = L.Linear(16)
        self.ln = L.LayerNorm(16)
        rng = np.random.default_rng(3)
        self.w = _param(rng.standard_normal((16, 16)).astype(dtype))
        self.b = _param(rng.standard_normal(16).astype(dtype))
        self.s = _param(rng.standard_normal(16).astype(dtype))

    def forward(self, x):
        h = hl.relu(self.bn(self.conv(x)))
        h = self.ln(self.fc(hl.reshape(h, (h.shape[0], -1))))
        h = hl.relu(hl.matmul(h, self.w) + self.b)
        h = hl.matmul(h, self.w) * (self.s * self.s)
        return hl.sum(h * h)


def _run(dtype, dests):
    hl.manual_seed(0)
    net = Net(dtype)
    net.train()
    x = hl.tensor(np.random.default_rng(1).standard_normal((3, 2, 5, 5)).astype(dtype))
    net(hl.Placeholder(x.shape, dtype))
    params = list(net.get_params().values()) + [net.w, net.b, net.s]
    into = None
    if dests:
        into = {id(p): hl.tensor(np.full(p.shape, 7.0, dtype)) for p in params}
    loss = net(x)
    got = {p.name or str(i): (p, g) for i, (p, g) in enumerate(backward(loss, into=into))}
    return params, into, got


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_destinations_receive_the_same_gradients_without_a_copy(monkeypatch, dtype):
    _, _, ref = _run(dtype, False)
    copies = []
    real = _core.copy_into
    monkeypatch.setattr(_core, "copy_into", lambda d, s: (copies.append(d), real(d, s)))
    params, into, got = _run(dtype, True)
    assert len(got) == len(ref) == len(params) == 11
    for name, (p, g) in got.items():
        assert g is into[id(p)], name  # the destination itself is handed out
        np.testing.assert_array_equal(g.numpy(), ref[name][1].numpy(), err_msg=name)
    # every op wrote its parameter's gradient in place, but mul's for s * s: the engine
    # copied the first of its two contributions in and added the second
    assert copies == [into[id(params[-1])]._h]


def test_a_gradient_no_op_writes_is_copied_in_and_sums_accumulate():
    """x + b with b of x's shape hands dy itself to b: the engine copies it into the
    destination; b used in three places sums the other two contributions in place."""
    b = _param(np.arange(6.0).reshape(2, 3))
    x = hl.tensor(np.ones((2, 3)) * 2.0)
    dest = hl.tensor(np.full((2, 3), -1.0))
    loss = hl.sum((x + b) * 3.0 + b * b + b)
    (p, g), = backward(loss, into={id(b): dest})
    assert p is b and g is dest
    np.testing.assert_array_equal(dest.numpy(), 3.0 + 2 * np.arange(6.0).reshape(2, 3) + 1)


def test_without_destinations_and_a_retained_graph_nothing_is_offered():
    """A graph walked twice (retain_graph): the second walk, without destinations, gives
    fresh gradients and leaves the first walk's destination alone."""
    w = _param(np.ones((3, 2)))
    x = hl.tensor(np.arange(6.0).reshape(2, 3))
    loss = hl.sum(hl.matmul(x, w))
    dest = hl.tensor(np.zeros((3, 2)))
    (_, g1), = backward(loss, retain_graph=True, into={id(w): dest})
    (_, g2), = backward(loss)
    assert g1 is dest and g2 is not dest and not g2.shares_memory(dest)
    np.testing.assert_array_equal(g2.numpy(), dest.numpy())


def test_a_destination_of_another_dtype_is_not_used():
    """A leaf whose dtype (or device) is not its destination's (a model moved after DistOpt
    made its buckets) gets a gradient of its own; the destination is left alone."""
    w = _param(np.ones((3, 2)))
    x = hl.tensor(np.arange(6.0).reshape(2, 3))
    dest = hl.tensor(np.zeros((3, 2), np.float32))
    (_, g), = backward(hl.sum(hl.matmul(x, w)), into={id(w): dest})
    assert g is not dest and g.dtype == hl.float64
    np.testing.assert_array_equal(dest.numpy(), 0)
    np.testing.assert_array_equal(g.numpy(), x.numpy().T @ np.ones((2, 2)))
