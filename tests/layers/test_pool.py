"""Pooling layers against torch.nn, shape inference and errors."""
import numpy as np
import pytest

import hl
from hl.layers import (AvgPool1d, AvgPool2d, GlobalAvgPool2d, GlobalMaxPool2d, MaxPool1d,
                       MaxPool2d)

from .reference import build, compare

torch = pytest.importorskip("torch")


def _x(*shape, seed=0):
    # distinct values, so max pooling has no ties and its gradient is unambiguous
    n = int(np.prod(shape))
    return np.random.default_rng(seed).permutation(n).reshape(shape).astype(np.float32) / n


POOL2D = [dict(kernel_size=2), dict(kernel_size=3, stride=2), dict(kernel_size=3, stride=2,
                                                                   padding=1),
          dict(kernel_size=(2, 3), stride=(1, 2)), dict(kernel_size=3, stride=2, ceil_mode=True)]


@pytest.mark.parametrize("kw", POOL2D + [dict(kernel_size=2, dilation=2)])
def test_max_pool2d_matches_torch(kw):
    compare(MaxPool2d(**kw), torch.nn.MaxPool2d(**kw), _x(2, 3, 9, 8), {})


@pytest.mark.parametrize("kw", POOL2D + [dict(kernel_size=3, padding=1,
                                              count_include_pad=False)])
def test_avg_pool2d_matches_torch(kw):
    compare(AvgPool2d(**kw), torch.nn.AvgPool2d(**kw), _x(2, 3, 9, 8), {})


@pytest.mark.parametrize("kw", [dict(kernel_size=2), dict(kernel_size=3, stride=2, padding=1),
                                dict(kernel_size=3, stride=2, ceil_mode=True)])
def test_pool1d_matches_torch(kw):
    compare(MaxPool1d(**kw), torch.nn.MaxPool1d(**kw), _x(2, 3, 10), {})
    compare(AvgPool1d(**kw), torch.nn.AvgPool1d(**kw), _x(2, 3, 10), {})


@pytest.mark.parametrize("layer,tfn", [(GlobalAvgPool2d(), torch.nn.AdaptiveAvgPool2d(1)),
                                       (GlobalMaxPool2d(), torch.nn.AdaptiveMaxPool2d(1))])
def test_global_pools_match_torch(layer, tfn):
    compare(layer, tfn, _x(2, 5, 6, 7), {})


def test_global_pool_keepdims_false_gives_n_c():
    x = _x(2, 5, 6, 7)
    y = build(GlobalAvgPool2d(keepdims=False), x)
    assert y.shape == (2, 5)
    np.testing.assert_allclose(y.numpy(), x.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(build(GlobalMaxPool2d(keepdims=False), x).numpy(),
                                  x.max(axis=(2, 3)))


def test_stride_defaults_to_kernel():
    assert MaxPool2d(3).stride == (3, 3)
    assert AvgPool1d(4, 2).stride == (2,)


def test_placeholder_shapes():
    assert MaxPool2d(2)(hl.Placeholder((4, 3, 9, 9))).shape == (4, 3, 4, 4)
    assert MaxPool2d(2, ceil_mode=True)(hl.Placeholder((4, 3, 9, 9))).shape == (4, 3, 5, 5)
    assert AvgPool1d(3, 1, 1)(hl.Placeholder((4, 3, 9))).shape == (4, 3, 9)
    assert GlobalAvgPool2d()(hl.Placeholder((4, 3, 9, 9))).shape == (4, 3, 1, 1)
    assert GlobalMaxPool2d(False)(hl.Placeholder((4, 3, 9, 9))).shape == (4, 3)


@pytest.mark.parametrize("make,shape,cls,match", [
    (lambda: MaxPool2d(2), (3, 8, 8), hl.errors.ShapeError,
     r"MaxPool2d: expected a 4-D input \(N, C, H, W\), received shape \(3, 8, 8\)"),
    (lambda: AvgPool1d(2), (2, 3, 8, 8), hl.errors.ShapeError, r"expected a 3-D input"),
    (lambda: MaxPool2d(5), (1, 1, 4, 9), hl.errors.ShapeError,
     r"spatial size \(4, 9\).*smaller than the kernel \(5, 5\)"),
    (lambda: GlobalAvgPool2d(), (2, 3, 4), hl.errors.ShapeError, r"expected a 4-D input"),
])
def test_bad_inputs(make, shape, cls, match):
    with pytest.raises(cls, match=match):
        build(make(), _x(*shape))


@pytest.mark.parametrize("make,match", [
    (lambda: MaxPool2d(2, padding=2), r"padding 2 must be at most half the kernel size"),
    (lambda: MaxPool2d(0), r"kernel_size must be positive"),
    (lambda: AvgPool2d(2, padding="same"), r"padding must be numbers"),
    (lambda: MaxPool2d(2, stride=(1, 2, 3)), r"stride must be an int or 2 ints"),
])
def test_bad_arguments(make, match):
    with pytest.raises(hl.errors.ValueError, match=match):
        make()
