"""Gradients of batch norm (training and eval), layer norm, group norm and instance norm:
float64 finite differences, PyTorch (float32), shape inference; batch norm's running
statistics against PyTorch's over several steps."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer


def tf():
    return pytest.importorskip("torch").nn.functional


BN_SHAPES = [(4, 3), (3, 2, 5), (2, 3, 3, 4)]


@pytest.mark.parametrize("xs", BN_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training(xs, affine):
    c = xs[1]
    inputs = [randn(*xs) * 2 + 1] + ([randn(c), randn(c)] if affine else [])

    def f(x, w=None, b=None):
        return hl.batch_norm(x, None, None, w, b, training=True)

    def ft(x, w=None, b=None):
        return tf().batch_norm(x, None, None, w, b, training=True)
    check_grad(f, inputs, rtol=1e-4, atol=1e-6)
    check_torch(f, ft, inputs, rtol=1e-4, atol=1e-4)
    check_infer(f, inputs)


@pytest.mark.parametrize("xs", BN_SHAPES)
def test_batch_norm_eval(xs):
    c = xs[1]
    rm, rv = randn(c), np.abs(randn(c)) + 0.5
    inputs = [randn(*xs), randn(c), randn(c)]

    def f(x, w, b):
        return hl.batch_norm(x, hl.tensor(rm.astype(x.dtype.np)), hl.tensor(rv.astype(x.dtype.np)),
                             w, b, training=False)

    def ft(x, w, b):
        import torch
        return tf().batch_norm(x, torch.tensor(rm, dtype=x.dtype), torch.tensor(rv, dtype=x.dtype),
                               w, b, training=False)
    check_grad(f, inputs)
    check_torch(f, ft, inputs)
    check_infer(f, inputs)


@pytest.mark.parametrize("xs", [(4, 3), (3, 2, 5, 2)])
def test_batch_norm_running_statistics(xs):
    """Each training step moves the running stats like PyTorch's (unbiased variance); eval
    then normalises with them."""
    torch = pytest.importorskip("torch")
    c = xs[1]
    hm, hv = hl.zeros(c), hl.ones(c)
    tm, tv = torch.zeros(c), torch.ones(c)
    for step in range(3):
        a = (randn(*xs) * (step + 1) + step).astype(np.float32)
        x = hl.tensor(a, requires_grad=True)
        hl.batch_norm(x, hm, hv, training=True, momentum=0.2).sum().backward()
        tf().batch_norm(torch.tensor(a), tm, tv, training=True, momentum=0.2)
        np.testing.assert_allclose(hm.numpy(), tm.numpy(), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(hv.numpy(), tv.numpy(), rtol=1e-5, atol=1e-6)
    a = randn(*xs).astype(np.float32)
    np.testing.assert_allclose(hl.batch_norm(hl.tensor(a), hm, hv).numpy(),
                               tf().batch_norm(torch.tensor(a), tm, tv).numpy(), rtol=1e-5,
                               atol=1e-5)


def test_batch_norm_stats_and_placeholders_leave_running_stats_alone():
    m, v = hl.zeros(3), hl.ones(3)
    y, mean, invstd = hl.batch_norm(hl.Placeholder((2, 3, 4)), m, v, training=True,
                                    return_stats=True)
    assert isinstance(y, hl.Placeholder) and mean.shape == invstd.shape == (3,)
    np.testing.assert_array_equal(m.numpy(), 0)  # compile computes nothing
    np.testing.assert_array_equal(v.numpy(), 1)
    a = randn(2, 3, 4).astype(np.float32)
    y, mean, invstd = hl.batch_norm(hl.tensor(a), None, None, training=True, return_stats=True)
    np.testing.assert_allclose(mean.numpy(), a.mean(axis=(0, 2)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(invstd.numpy(), 1 / np.sqrt(a.var(axis=(0, 2)) + 1e-5), rtol=1e-4)


@pytest.mark.parametrize("xs, normalized", [((3, 5), (5,)), ((2, 3, 4), (3, 4)),
                                            ((2, 2, 3, 4), 4)])
@pytest.mark.parametrize("affine", [True, False])
def test_layer_norm(xs, normalized, affine):
    tail = (normalized,) if isinstance(normalized, int) else normalized
    inputs = [randn(*xs) * 3 - 1] + ([randn(*tail), randn(*tail)] if affine else [])

    def f(x, w=None, b=None):
        return hl.layer_norm(x, normalized, w, b)

    def ft(x, w=None, b=None):
        return tf().layer_norm(x, tail, w, b)
    check_grad(f, inputs, rtol=1e-4, atol=1e-6)
    check_torch(f, ft, inputs, rtol=1e-4, atol=1e-4)
    check_infer(f, inputs)


def test_layer_norm_by_axis():
    inputs = [randn(2, 3, 4), randn(3, 4), randn(3, 4)]
    check_grad(lambda x, w, b: hl.layer_norm(x, weight=w, bias=b, axis=1), inputs, rtol=1e-4,
               atol=1e-6)


@pytest.mark.parametrize("xs, groups", [((2, 4, 3), 2), ((2, 6, 2, 3), 3), ((1, 4, 5), 1)])
@pytest.mark.parametrize("affine", [True, False])
def test_group_norm(xs, groups, affine):
    c = xs[1]
    inputs = [randn(*xs)] + ([randn(c), randn(c)] if affine else [])

    def f(x, w=None, b=None):
        return hl.group_norm(x, groups, w, b)

    def ft(x, w=None, b=None):
        return tf().group_norm(x, groups, w, b)
    check_grad(f, inputs, rtol=1e-4, atol=1e-6)
    check_torch(f, ft, inputs, rtol=1e-4, atol=1e-4)
    check_infer(f, inputs)


@pytest.mark.parametrize("xs", [(2, 3, 4), (2, 2, 3, 3)])
def test_instance_norm(xs):
    c = xs[1]
    inputs = [randn(*xs), randn(c), randn(c)]

    def f(x, w, b):
        return hl.instance_norm(x, weight=w, bias=b)

    def ft(x, w, b):
        return tf().instance_norm(x, weight=w, bias=b)
    check_grad(f, inputs, rtol=1e-4, atol=1e-6)
    check_torch(f, ft, inputs, rtol=1e-4, atol=1e-4)
    check_infer(f, inputs)


def test_non_contiguous_input():
    torch = pytest.importorskip("torch")
    a = randn(3, 4, 5).astype(np.float32)
    dy = randn(3, 5, 4).astype(np.float32)
    x = hl.tensor(a).permute(0, 2, 1)
    x.requires_grad = True
    (hl.batch_norm(x, None, None, training=True) * hl.tensor(dy)).sum().backward()
    tx = torch.tensor(a).permute(0, 2, 1).detach().requires_grad_()
    (tf().batch_norm(tx, None, None, training=True) * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_bad_shapes_raise():
    x = hl.Placeholder((2, 3, 4))
    with pytest.raises(hl.errors.ShapeError, match="batch_norm.*scale"):
        hl.batch_norm(x, None, None, hl.Placeholder((4,)))
    with pytest.raises(hl.errors.ShapeError, match="batch_norm.*running_mean"):
        hl.batch_norm(x, hl.zeros(4), hl.ones(3))
    with pytest.raises(hl.errors.ShapeError, match="layer_norm.*tail"):
        hl.layer_norm(x, (3,))
    with pytest.raises(hl.errors.ShapeError, match="layer_norm.*bias"):
        hl.layer_norm(x, (4,), None, hl.Placeholder((3,)))
    with pytest.raises(hl.errors.ShapeError, match="group_norm.*groups"):
        hl.group_norm(hl.tensor(np.zeros((2, 3, 4), np.float32)), 2)
    with pytest.raises(hl.errors.ValueError, match="instance_norm.*running"):
        hl.instance_norm(hl.tensor(np.zeros((2, 3, 4), np.float32)), hl.zeros(3), hl.ones(3))
