"""hl.losses against torch.nn.functional (value and gradient, float32) and finite differences
(float64), every reduction; the classes against the functions; bad arguments."""
import numpy as np
import pytest

import hl
from hl import losses
from tests.autograd.harness import check_grad, check_torch, randn


def tf():
    return pytest.importorskip("torch").nn.functional


REDUCTIONS = ["mean", "sum", "none"]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 4)])
def test_softmax_cross_entropy_labels(reduction, shape):
    labels = np.random.default_rng(0).integers(0, shape[1], size=(shape[0],) + shape[2:])
    labels.flat[0] = -100
    inputs = [randn(*shape), labels]
    f = losses.SoftmaxCrossEntropy(reduction)
    check_grad(f, inputs)
    check_torch(f, lambda x, t: tf().cross_entropy(x, t, reduction=reduction), inputs)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_softmax_cross_entropy_one_hot(reduction):
    labels = np.array([1, 0, 3])
    onehot = np.eye(4)[labels]
    inputs = [randn(3, 4), onehot]

    def f(x, t):
        return losses.softmax_cross_entropy(x, t, reduction=reduction)
    check_grad(f, inputs, grad_of=[0])
    check_torch(f, lambda x, t: tf().cross_entropy(x, t, reduction=reduction), inputs,
                grad_of=[0])
    a = hl.tensor(inputs[0])
    np.testing.assert_allclose(f(a, onehot).numpy(), f(a, labels).numpy(), rtol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(5,), (3, 4), (2, 3, 2)])
def test_mse(reduction, shape):
    inputs = [randn(*shape), randn(*shape)]
    f = losses.MSELoss(reduction)
    check_grad(f, inputs)
    check_torch(f, lambda x, t: tf().mse_loss(x, t, reduction=reduction), inputs)
    assert losses.MeanSquaredError is losses.MSELoss


def test_mse_numpy_target():
    x = hl.tensor(randn(3, 2).astype(np.float32), requires_grad=True)
    t = randn(3, 2)  # float64 numpy: taken in the prediction's dtype
    loss = losses.mse(x, t)
    assert loss.dtype is hl.float32
    np.testing.assert_allclose(loss.numpy(), ((x.numpy() - t.astype(np.float32)) ** 2).mean(),
                               rtol=1e-6)
    loss.backward()
    np.testing.assert_allclose(x.grad.numpy(), 2 * (x.numpy() - t) / 6, rtol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("shape", [(6,), (3, 4)])
def test_bce_with_logits(reduction, shape):
    targets = np.random.default_rng(1).random(shape)
    inputs = [randn(*shape) * 3, targets]
    f = losses.BCEWithLogits(reduction)
    check_grad(f, inputs)
    check_torch(f, lambda x, t: tf().binary_cross_entropy_with_logits(x, t, reduction=reduction),
                inputs)


def test_bce_with_logits_is_stable_for_large_logits():
    torch = pytest.importorskip("torch")
    a = np.array([-200.0, -50.0, -1e-3, 0.0, 30.0, 200.0], np.float32)
    t = np.array([1.0, 0.0, 1.0, 0.5, 0.0, 1.0], np.float32)
    x = hl.tensor(a, requires_grad=True)
    loss = losses.binary_cross_entropy_with_logits(x, t, reduction="none")
    tx = torch.tensor(a, requires_grad=True)
    ref = tf().binary_cross_entropy_with_logits(tx, torch.tensor(t), reduction="none")
    assert np.all(np.isfinite(loss.numpy()))
    np.testing.assert_allclose(loss.numpy(), ref.detach().numpy(), rtol=1e-6, atol=1e-6)
    loss.sum().backward()
    ref.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_nll(reduction):
    labels = np.array([2, -100, 0, 1])
    inputs = [randn(4, 3), labels]
    f = losses.NLLLoss(reduction)
    check_grad(f, inputs)
    check_torch(f, lambda x, t: tf().nll_loss(x, t, reduction=reduction), inputs)
    g = losses.NLLLoss(reduction, ignore_index=2)
    check_torch(g, lambda x, t: tf().nll_loss(x, t, ignore_index=2, reduction=reduction),
                [randn(4, 3), np.array([2, 1, 0, 1])])


def test_losses_drive_training():
    """Differentiable end to end: a few gradient steps on a linear model lower each loss."""
    rng = np.random.default_rng(5)
    # x @ w as a broadcast product and a sum (x is data; only w needs the gradient)
    x = hl.tensor(rng.standard_normal((16, 3, 1)).astype(np.float32))
    scores = np.einsum("nik,ij->nj", x.numpy(), rng.standard_normal((3, 3)))  # learnable
    labels = scores.argmax(1)
    cases = [(losses.SoftmaxCrossEntropy(), labels),
             (losses.MSELoss(), scores.astype(np.float32)),
             (losses.BCEWithLogits(), (scores > 0).astype(np.float32)),
             (lambda out, t: losses.nll(hl.log_softmax(out, 1), t), labels)]
    for loss_fn, target in cases:
        w = hl.tensor(np.zeros((3, 3), np.float32), requires_grad=True)
        first = None
        for _ in range(20):
            loss = loss_fn((x * w).sum(axis=1), target)
            first = float(loss.numpy()) if first is None else first
            w.grad = None
            loss.backward()
            with hl.no_grad():
                w = hl.tensor(w.numpy() - 0.5 * w.grad.numpy(), requires_grad=True)
        assert float(loss_fn((x * w).sum(axis=1), target).numpy()) < 0.9 * first


def test_bad_arguments():
    x = hl.tensor(randn(3, 4).astype(np.float32))
    with pytest.raises(hl.errors.ValueError, match="MSELoss.*reduction"):
        losses.MSELoss("avg")
    with pytest.raises(hl.errors.ValueError, match="mse.*reduction"):
        losses.mse(x, x, reduction="avg")
    with pytest.raises(hl.errors.ShapeError, match="mse.*same shape"):
        losses.mse(x, randn(4, 3))
    with pytest.raises(hl.errors.ShapeError, match="binary_cross_entropy_with_logits"):
        losses.binary_cross_entropy_with_logits(x, randn(3))
    with pytest.raises(hl.errors.IndexError):
        losses.softmax_cross_entropy(x, np.array([0, 1, 4]))
    assert "reduction='sum'" in repr(losses.NLLLoss("sum"))
