"""Gradients of resize and interpolate (nearest and linear, the coordinate rules): float64
finite differences, PyTorch's interpolate (float32), shape inference."""
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer import check_infer


def tf():
    return pytest.importorskip("torch").nn.functional


@pytest.mark.parametrize("xs, kw", [
    ((2, 3, 5), dict(scale_factor=2)),
    ((1, 2, 7), dict(size=4, mode="linear")),
    ((1, 2, 4), dict(scale_factor=1.5, mode="linear", align_corners=True)),
    ((2, 2, 3, 4), dict(size=(5, 7))),
    ((1, 2, 4, 3), dict(scale_factor=(2, 1.5), mode="bilinear")),
    ((1, 1, 5, 6), dict(size=(3, 4), mode="bilinear", align_corners=True)),
    ((1, 1, 2, 3, 2), dict(scale_factor=2, mode="trilinear")),
])
def test_interpolate(xs, kw):
    def f(x):
        return hl.interpolate(x, **kw)
    check_grad(f, [randn(*xs)])
    check_torch(f, lambda x: tf().interpolate(x, **kw), [randn(*xs)])
    check_infer(f, [randn(*xs)])


@pytest.mark.parametrize("xs, kw", [
    ((3, 4), dict(size=(5, 2), mode="linear")),
    ((2, 5), dict(scales=(1.0, 1.7), mode="linear", coordinate_transformation_mode="asymmetric")),
    ((3, 4), dict(scales=(2.0, 0.5), mode="nearest", nearest_mode="round_prefer_ceil")),
    ((2, 3, 4), dict(size=(2, 6, 3), mode="linear",
                     coordinate_transformation_mode="pytorch_half_pixel")),
])
def test_resize(xs, kw):
    def f(x):
        return hl.resize(x, **kw)
    check_grad(f, [randn(*xs)])
    check_infer(f, [randn(*xs)])


def test_bad_arguments():
    with pytest.raises(hl.errors.ValueError, match="resize.*exactly one"):
        hl.resize(hl.Placeholder((2, 3)))
    with pytest.raises(hl.errors.ValueError, match="resize.*mode"):
        hl.resize(hl.Placeholder((2, 3)), size=(2, 3), mode="cubic")
    with pytest.raises(hl.errors.ShapeError, match="interpolate"):
        hl.interpolate(hl.Placeholder((2, 3)), size=4)
