"""Gradients of softmax, log_softmax, softmax_cross_entropy (integer labels, ignore_index,
probability targets, every reduction) and nll_loss: float64 finite differences, PyTorch
(float32), shape inference, bad labels."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer


def tf():
    return pytest.importorskip("torch").nn.functional


@pytest.mark.parametrize("xs, axis", [((5,), -1), ((3, 4), 1), ((2, 3, 4), 0), ((2, 3, 4), -2)])
def test_softmax_and_log_softmax(xs, axis):
    check_grad(lambda x: hl.softmax(x, axis), [randn(*xs)])
    check_grad(lambda x: hl.log_softmax(x, axis), [randn(*xs)])
    check_torch(lambda x: hl.softmax(x, axis), lambda x: tf().softmax(x, axis), [randn(*xs)])
    check_torch(lambda x: hl.log_softmax(x, axis), lambda x: tf().log_softmax(x, axis),
                [randn(*xs)])
    check_infer(lambda x: hl.softmax(x, axis), [randn(*xs)])
    check_infer(lambda x: x.log_softmax(axis), [randn(*xs)])


def test_softmax_non_contiguous_and_method():
    torch = pytest.importorskip("torch")
    a = randn(3, 4).astype(np.float32)
    dy = randn(4, 3).astype(np.float32)
    x = hl.tensor(a).T
    x.requires_grad = True
    (x.softmax(0) * hl.tensor(dy)).sum().backward()
    tx = torch.tensor(a).T.detach().requires_grad_()
    (tx.softmax(0) * torch.tensor(dy)).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6)


def _labels(shape, classes, seed, ignore=None):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, size=shape)
    if ignore is not None and labels.size > 1:
        labels.flat[1] = ignore
    return labels


LOGIT_SHAPES = [(4, 5), (2, 3, 4), (2, 4, 2, 3), (5,)]


def _sample_shape(shape):
    return () if len(shape) == 1 else (shape[0],) + shape[2:]


@pytest.mark.parametrize("shape", LOGIT_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_labels(shape, reduction):
    classes = shape[0] if len(shape) == 1 else shape[1]
    labels = _labels(_sample_shape(shape), classes, 1, ignore=-100)
    inputs = [randn(*shape) * 2, labels]

    def f(x, t):
        return hl.softmax_cross_entropy(x, t, reduction=reduction)

    def ft(x, t):
        return tf().cross_entropy(x, t, reduction=reduction)
    check_grad(f, inputs)
    check_torch(f, ft, inputs)
    check_infer(f, inputs)


@pytest.mark.parametrize("shape", LOGIT_SHAPES[:3])
def test_cross_entropy_ignore_index(shape):
    classes = shape[1]
    labels = _labels(_sample_shape(shape), classes, 2, ignore=2)

    def f(x, t):
        return hl.softmax_cross_entropy(x, t, ignore_index=2)

    def ft(x, t):
        return tf().cross_entropy(x, t, ignore_index=2)
    check_grad(f, [randn(*shape), labels])
    check_torch(f, ft, [randn(*shape), labels])


@pytest.mark.parametrize("shape", LOGIT_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_probability_targets(shape, reduction):
    """Soft targets: both the logits and the target get gradients (as in PyTorch)."""
    axis = 0 if len(shape) == 1 else 1
    rng = np.random.default_rng(3)
    target = rng.random(shape)
    target /= target.sum(axis=axis, keepdims=True)
    inputs = [randn(*shape), target]

    def f(x, t):
        return hl.softmax_cross_entropy(x, t, reduction=reduction)

    def ft(x, t):
        return tf().cross_entropy(x, t, reduction=reduction)
    check_grad(f, inputs)
    check_torch(f, ft, inputs)
    check_infer(f, inputs)


def test_cross_entropy_one_hot_equals_labels():
    labels = np.array([2, 0, 1, 2])
    logits = randn(4, 3)
    onehot = np.eye(3)[labels]
    a = hl.tensor(logits, requires_grad=True)
    b = hl.tensor(logits, requires_grad=True)
    la = hl.softmax_cross_entropy(a, labels)
    lb = hl.softmax_cross_entropy(b, onehot)
    la.backward()
    lb.backward()
    np.testing.assert_allclose(la.numpy(), lb.numpy(), rtol=1e-12)
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-12, atol=1e-15)


def test_cross_entropy_return_log_prob():
    logits = randn(3, 4).astype(np.float32)
    loss, lp = hl.softmax_cross_entropy(hl.tensor(logits), np.array([0, 1, 3]),
                                        return_log_prob=True)
    ref = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    np.testing.assert_allclose(lp.numpy(), ref, rtol=1e-5, atol=1e-6)
    lph = hl.softmax_cross_entropy(hl.Placeholder((3, 4)), hl.Placeholder((3,), hl.int64),
                                   return_log_prob=True)
    assert [p.shape for p in lph] == [(), (3, 4)]


@pytest.mark.parametrize("shape", LOGIT_SHAPES)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_loss(shape, reduction):
    classes = shape[0] if len(shape) == 1 else shape[1]
    labels = _labels(_sample_shape(shape), classes, 4, ignore=-100)
    inputs = [randn(*shape), labels]

    def f(x, t):
        return hl.nll_loss(x, t, reduction=reduction)

    def ft(x, t):
        return tf().nll_loss(x, t, reduction=reduction)
    check_grad(f, inputs)
    check_torch(f, ft, inputs)
    check_infer(f, inputs)


def test_nll_of_log_softmax_is_cross_entropy():
    labels = np.array([1, 0, 3])
    check_torch(lambda x, t: hl.nll_loss(hl.log_softmax(x, 1), t, ignore_index=0),
                lambda x, t: tf().cross_entropy(x, t, ignore_index=0), [randn(3, 4), labels])


def test_all_ignored_mean_is_nan():
    x = hl.tensor(randn(2, 3), requires_grad=True)
    for loss in (hl.softmax_cross_entropy(x, np.array([-100, -100])),
                 hl.nll_loss(x, np.array([-100, -100]))):
        assert np.isnan(loss.numpy())


def test_bad_labels_raise():
    x = hl.tensor(randn(2, 3).astype(np.float32), requires_grad=True)
    with pytest.raises(hl.errors.IndexError, match="nll_loss.*3"):
        hl.nll_loss(x, np.array([0, 3]))
    with pytest.raises(hl.errors.IndexError, match="nll_loss.*-1"):
        hl.nll_loss(x, np.array([-1, 0]))
    with pytest.raises(hl.errors.IndexError):
        hl.softmax_cross_entropy(x, np.array([0, 3]))
    with pytest.raises(hl.errors.ShapeError, match="softmax_cross_entropy.*class-label target"):
        hl.softmax_cross_entropy(hl.Placeholder((2, 3)), hl.Placeholder((3,), hl.int64))
    with pytest.raises(hl.errors.ShapeError, match="softmax_cross_entropy.*probability"):
        hl.softmax_cross_entropy(hl.Placeholder((2, 3)), hl.Placeholder((2, 4)))
    with pytest.raises(hl.errors.ShapeError, match="nll_loss.*labels"):
        hl.nll_loss(x, np.array([0, 1, 2]))
    with pytest.raises(hl.errors.ValueError, match="reduction"):
        hl.nll_loss(x, np.array([0, 1]), reduction="avg")
