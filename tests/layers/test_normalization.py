"""BatchNorm1d/2d and LayerNorm against torch.nn: forward, backward, running statistics
over several training steps, eval mode, and errors."""
import numpy as np
import pytest

import hl
from hl.layers import BatchNorm1d, BatchNorm2d, LayerNorm

from .reference import build, compare, copy_states

torch = pytest.importorskip("torch")

BN = {"scale": "weight", "bias": "bias", "running_mean": "running_mean",
      "running_var": "running_var"}
LN = {"scale": "weight", "bias": "bias"}


def _x(*shape, seed=0, loc=0.0, sd=1.0):
    return (loc + sd * np.random.default_rng(seed).standard_normal(shape)).astype(np.float32)


def _randomise(tmod, seed):
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in tmod.parameters():
            p.copy_(torch.rand(p.shape, generator=g) + 0.5)


@pytest.mark.parametrize("cls,tcls,shape", [(BatchNorm2d, torch.nn.BatchNorm2d, (4, 3, 5, 6)),
                                            (BatchNorm1d, torch.nn.BatchNorm1d, (8, 5)),
                                            (BatchNorm1d, torch.nn.BatchNorm1d, (4, 5, 7))])
@pytest.mark.parametrize("momentum", [0.1, 0.3])
def test_batch_norm_training_matches_torch(cls, tcls, shape, momentum):
    tmod = tcls(shape[1], momentum=momentum, eps=1e-3)
    _randomise(tmod, 0)
    layer = cls(momentum=momentum, eps=1e-3)
    compare(layer, tmod, _x(*shape, loc=2.0, sd=3.0), BN, rtol=1e-4, atol=1e-4)
    # the forward above updated both sets of running statistics from the same batch
    np.testing.assert_allclose(layer.running_mean.numpy(), tmod.running_mean.numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.running_var.numpy(), tmod.running_var.numpy(),
                               rtol=1e-5, atol=1e-6)


def test_running_statistics_after_several_steps_then_eval():
    tmod = torch.nn.BatchNorm2d(3)
    _randomise(tmod, 1)
    layer = BatchNorm2d(3)
    build(layer, _x(2, 3, 4, 4))
    copy_states(layer, tmod, BN)
    for step in range(4):
        x = _x(5, 3, 4, 4, seed=10 + step, loc=step - 1.0, sd=1.0 + step)
        y = layer(hl.tensor(x))
        yt = tmod(torch.tensor(x))
        np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(layer.running_mean.numpy(), tmod.running_mean.numpy(),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(layer.running_var.numpy(), tmod.running_var.numpy(),
                               rtol=1e-5, atol=1e-5)

    layer.eval()
    tmod.eval()
    x = _x(2, 3, 4, 4, seed=99)
    before = layer.running_mean.numpy().copy()
    x_hl = hl.tensor(x, requires_grad=True)
    y = layer(x_hl)
    xt = torch.tensor(x, requires_grad=True)
    yt = tmod(xt)
    np.testing.assert_allclose(y.numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(layer.running_mean.numpy(), before)  # eval: no update
    dy = _x(*y.shape, seed=5)
    y.backward(hl.tensor(dy))
    yt.backward(torch.tensor(dy))
    np.testing.assert_allclose(x_hl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(layer.scale.grad.numpy(), tmod.weight.grad.numpy(), rtol=1e-4,
                               atol=1e-4)


def test_batch_norm_without_affine():
    tmod = torch.nn.BatchNorm2d(3, affine=False)
    layer = BatchNorm2d(affine=False)
    compare(layer, tmod, _x(4, 3, 3, 3), {"running_mean": "running_mean",
                                          "running_var": "running_var"}, atol=1e-4)
    assert layer.get_params() == {}
    assert sorted(layer.get_states()) == ["running_mean", "running_var"]


def test_states_and_params_and_initial_values():
    layer = BatchNorm2d(momentum=0.2)
    assert layer.get_states() == {}
    layer(hl.Placeholder((2, 6, 4, 4)))
    assert sorted(layer.get_params()) == ["bias", "scale"]
    states = layer.get_states()
    assert sorted(states) == ["bias", "running_mean", "running_var", "scale"]
    assert all(t.shape == (6,) for t in states.values())
    np.testing.assert_array_equal(states["scale"].numpy(), np.ones(6))
    np.testing.assert_array_equal(states["running_var"].numpy(), np.ones(6))
    np.testing.assert_array_equal(states["running_mean"].numpy(), np.zeros(6))
    assert not states["running_mean"].requires_grad
    assert layer.scale.requires_grad


def test_training_mode_follows_global_flag_until_switched():
    x = _x(4, 2, 3, 3, loc=5.0)
    mean = x.mean(axis=(0, 2, 3))
    layer = BatchNorm2d()
    old = hl.autograd.training
    try:
        hl.autograd.training = False  # SINGA scripts evaluate this way
        layer(hl.tensor(x))
        np.testing.assert_array_equal(layer.running_mean.numpy(), np.zeros(2))
        hl.autograd.training = True
        layer(hl.tensor(x))
        np.testing.assert_allclose(layer.running_mean.numpy(), 0.1 * mean, rtol=1e-5)
        layer.eval()  # the layer's own mode wins over the global flag
        layer(hl.tensor(x))
        np.testing.assert_allclose(layer.running_mean.numpy(), 0.1 * mean, rtol=1e-5)
        hl.autograd.training = False
        layer.train()
        layer(hl.tensor(x))
        np.testing.assert_allclose(layer.running_mean.numpy(), 0.19 * mean, rtol=1e-5)
    finally:
        hl.autograd.training = old


@pytest.mark.parametrize("normalized_shape,shape", [(None, (4, 7)), (None, (2, 3, 6)),
                                                    ((3, 6), (2, 3, 6)), (6, (5, 6))])
def test_layer_norm_matches_torch(normalized_shape, shape):
    tmod = torch.nn.LayerNorm(shape[-1] if normalized_shape is None else normalized_shape,
                              eps=1e-4)
    _randomise(tmod, 2)
    layer = LayerNorm(normalized_shape, eps=1e-4)
    compare(layer, tmod, _x(*shape, loc=1.0, sd=2.0), LN, atol=1e-4)
    assert layer.scale.shape == tuple(tmod.normalized_shape)


def test_layer_norm_without_affine():
    tmod = torch.nn.LayerNorm(5, elementwise_affine=False)
    layer = LayerNorm(elementwise_affine=False)
    compare(layer, tmod, _x(3, 5), {}, atol=1e-4)
    assert layer.get_params() == {}


@pytest.mark.parametrize("make,shape,match", [
    (lambda: BatchNorm2d(), (4, 3), r"BatchNorm2d: expected input \(N, C, H, W\), received "
                                    r"shape \(4, 3\); for \(N, C\) or \(N, C, L\) inputs use "
                                    r"BatchNorm1d"),
    (lambda: BatchNorm1d(), (2, 3, 4, 4), r"use BatchNorm2d"),
    (lambda: BatchNorm2d(3), (2, 8, 8, 3), r"expected input with 3 channels in axis 1 "
                                           r"\(N, C, H, W\), received shape \(2, 8, 8, 3\); "
                                           r"did you mean channels-last\? Transpose with "
                                           r"x.permute\(0, 3, 1, 2\)"),
    (lambda: LayerNorm((3, 4)), (2, 4, 3), r"trailing shape is \(3, 4\), received shape "
                                           r"\(2, 4, 3\)"),
])
def test_bad_inputs(make, shape, match):
    with pytest.raises(hl.errors.ShapeError, match=match):
        build(make(), _x(*shape))


def test_single_value_per_channel_in_training():
    layer = BatchNorm1d()
    with pytest.raises(hl.errors.ValueError, match=r"more than one value per channel.*eval"):
        build(layer, _x(1, 4))
    layer.eval()
    assert build(layer, _x(1, 4)).shape == (1, 4)  # eval uses the running statistics


def test_bad_arguments():
    with pytest.raises(hl.errors.ValueError, match=r"BatchNorm2d: momentum must be a number in \[0, 1\]"):
        BatchNorm2d(momentum=1.5)
    with pytest.raises(hl.errors.ValueError, match="normalized_shape must not be empty"):
        LayerNorm(())
