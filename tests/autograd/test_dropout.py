"""dropout: the kept fraction and scale, a fresh mask per call, the gradient through the same
mask, identity outside training, p = 0 and p = 1, seeded generators, shape inference."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import randn
from tests.autograd.infer import check_infer


@pytest.mark.parametrize("p", [0.1, 0.5, 0.8])
def test_mask_statistics_and_scale(p):
    n = 20000
    a = np.abs(randn(n)).astype(np.float32) + 0.5
    y = hl.dropout(hl.tensor(a), p).numpy()
    dropped = y == 0
    # 4.5 standard deviations of a binomial fraction: fails by chance about once in 10**5
    assert abs(dropped.mean() - p) < 4.5 * np.sqrt(p * (1 - p) / n)
    np.testing.assert_allclose(y[~dropped], a[~dropped] / (1 - p), rtol=1e-6)


def test_gradient_is_the_scaled_mask():
    a = randn(6, 7)  # float64
    x = hl.tensor(a, requires_grad=True)
    y = hl.dropout(x, 0.4)
    dy = randn(6, 7)
    (y * hl.tensor(dy)).sum().backward()
    mask = y.numpy() / a  # 0 or 1 / (1 - p), the mask forward used
    np.testing.assert_allclose(np.unique(np.round(mask, 12)), [0, 1 / 0.6], rtol=1e-12)
    np.testing.assert_allclose(x.grad.numpy(), dy * mask, rtol=1e-12)


def test_fresh_mask_each_call():
    x = hl.ones(1000)
    m1, m2 = hl.dropout(x, 0.5).numpy(), hl.dropout(x, 0.5).numpy()
    assert (m1 != m2).mean() > 0.3


def test_generator_makes_masks_reproducible():
    x = hl.ones(500)
    g1, g2 = hl.random.Generator(7), hl.random.Generator(7)
    d1 = hl.dropout(x, 0.3, generator=g1).numpy()
    np.testing.assert_array_equal(d1, hl.dropout(x, 0.3, generator=g2).numpy())
    d2 = hl.dropout(x, 0.3, generator=g1).numpy()
    assert not np.array_equal(d1, d2)  # the generator moved on
    g1.manual_seed(7)
    np.testing.assert_array_equal(hl.dropout(x, 0.3, generator=g1).numpy(), d1)


def test_identity_outside_training_and_at_p0():
    a = randn(3, 4)
    for kw in (dict(p=0.5, training=False), dict(p=0.0)):
        x = hl.tensor(a, requires_grad=True)
        y = hl.dropout(x, **kw)
        np.testing.assert_array_equal(y.numpy(), a)
        (y * 3.0).sum().backward()
        np.testing.assert_array_equal(x.grad.numpy(), np.full_like(a, 3.0))


def test_p1_gives_zeros():
    x = hl.tensor(randn(3, 4), requires_grad=True)
    y = hl.dropout(x, 1.0)
    np.testing.assert_array_equal(y.numpy(), 0)
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), 0)


def test_infer_and_bad_arguments():
    check_infer(lambda x: hl.dropout(x, 0.3), [randn(2, 5)])
    check_infer(lambda x: x.dropout(0.3, training=False), [randn(2, 5)])
    with pytest.raises(hl.errors.ValueError, match="dropout.*p"):
        hl.dropout(hl.ones(3), 1.5)
    with pytest.raises(hl.errors.DTypeError, match="dropout"):
        hl.dropout(hl.tensor(np.arange(3)), 0.5)
