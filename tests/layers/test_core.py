"""Identity, Flatten, Reshape, Dropout and Embedding."""
import numpy as np
import pytest

import hl
from hl.layers import Dropout, Embedding, Flatten, Identity, Reshape

from .reference import build, compare

torch = pytest.importorskip("torch")


def _x(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---- Flatten, Reshape, Identity ---------------------------------------------------------

@pytest.mark.parametrize("kw,shape", [({}, (2, 3, 4, 5)), (dict(start_dim=2), (2, 3, 4, 5)),
                                      (dict(start_dim=0, end_dim=1), (2, 3, 4)), ({}, (6, 1))])
def test_flatten_matches_torch(kw, shape):
    compare(Flatten(**kw), torch.nn.Flatten(**kw), _x(*shape), {})


class _TorchReshape(torch.nn.Module):
    def __init__(self, *shape):
        super().__init__()
        self.shape = shape

    def forward(self, x):
        return x.reshape(x.shape[0], *self.shape)


@pytest.mark.parametrize("shape", [(4, 3), (-1,), (2, -1, 3), (12, 1)])
def test_reshape_keeps_the_batch_axis(shape):
    compare(Reshape(*shape), _TorchReshape(*shape), _x(5, 3, 4), {})


def test_reshape_errors_and_placeholder():
    assert Reshape((4, 7, 7))(hl.Placeholder((3, 196))).shape == (3, 4, 7, 7)
    with pytest.raises(hl.errors.ShapeError, match=r"Reshape: cannot reshape input \(5, 12\) "
                                                   r"\(12 values per sample\) into \(N,\) \+ "
                                                   r"\(5, -1\)"):
        build(Reshape(5, -1), _x(5, 12))
    with pytest.raises(hl.errors.ValueError, match="may hold one -1"):
        Reshape(-1, -1)


def test_flatten_bad_axis_and_placeholder():
    assert Flatten()(hl.Placeholder((3, 4, 5, 6))).shape == (3, 120)
    with pytest.raises(hl.errors.IndexError, match=r"Flatten: axis 3 is out of range for an "
                                                   r"input of shape \(2, 3\)"):
        build(Flatten(start_dim=3), _x(2, 3))


def test_identity():
    x = hl.tensor(_x(2, 3), requires_grad=True)
    y = Identity()(x)
    np.testing.assert_array_equal(y.numpy(), x.numpy())


# ---- Dropout ----------------------------------------------------------------------------

@pytest.mark.parametrize("p", [0.2, 0.5, 0.8])
def test_dropout_statistics_and_gradient(p):
    layer = Dropout(p).train()
    x = hl.tensor(np.full((200, 500), 2.0, np.float32), requires_grad=True)
    y = layer(x)
    out = y.numpy()
    kept = out != 0
    # 100,000 draws: the dropped fraction is within 0.01 of p (about 4 standard deviations)
    assert abs(1.0 - kept.mean() - p) < 0.01
    np.testing.assert_allclose(out[kept], 2.0 / (1.0 - p), rtol=1e-6)
    dy = _x(200, 500)
    y.backward(hl.tensor(dy))
    np.testing.assert_allclose(x.grad.numpy(), np.where(kept, dy / (1.0 - p), 0.0), rtol=1e-6)


def test_dropout_masks_change_per_call_and_follow_a_generator():
    x = hl.ones(50, 40)
    layer = Dropout(0.5).train()
    assert not np.array_equal(layer(x).numpy(), layer(x).numpy())
    a = Dropout(0.5, generator=hl.random.Generator(7)).train()
    b = Dropout(0.5, generator=hl.random.Generator(7)).train()
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_dropout_only_while_training():
    x = _x(20, 30)
    layer = Dropout(0.5)
    old = hl.autograd.training
    try:
        hl.autograd.training = False  # the default for layers never switched
        np.testing.assert_array_equal(build(layer, x).numpy(), x)
        hl.autograd.training = True
        assert (build(layer, x).numpy() == 0).any()
        layer.eval()  # the layer's own mode wins
        np.testing.assert_array_equal(build(layer, x).numpy(), x)
    finally:
        hl.autograd.training = old


def test_dropout_edges():
    x = _x(4, 5)
    np.testing.assert_array_equal(build(Dropout(0.0).train(), x).numpy(), x)
    np.testing.assert_array_equal(build(Dropout(1.0).train(), x).numpy(), np.zeros_like(x))
    assert Dropout(0.5).train()(hl.Placeholder((3, 7))).shape == (3, 7)
    with pytest.raises(hl.errors.ValueError, match=r"Dropout: p \(a probability\) must be a number in \[0, 1\]"):
        Dropout(1.5)


# ---- Embedding --------------------------------------------------------------------------

@pytest.mark.parametrize("ids", [np.array([[1, 2, 4, 2], [4, 3, 2, 9]]), np.array([0, 0, 0]),
                                 np.array(5), np.array([[[7]]], dtype=np.int32)])
def test_embedding_matches_torch_and_accumulates_repeats(ids):
    tmod = torch.nn.Embedding(10, 3)
    layer = Embedding(10, 3)
    y = compare(layer, tmod, ids, {"W": "weight"}, grad_input=False)
    assert y.shape == ids.shape + (3,)


def test_embedding_table_is_lazy_and_normal():
    hl.manual_seed(0)
    layer = Embedding(1000, 20)
    assert layer.get_params() == {}
    assert layer(hl.Placeholder((4, 7), hl.int64)).shape == (4, 7, 20)
    w = layer.W.numpy()
    assert w.shape == (1000, 20) and w.dtype == np.float32
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1.0) < 0.02  # N(0, 1), 20,000 draws


def test_embedding_errors():
    layer = Embedding(10, 3)
    with pytest.raises(hl.errors.DTypeError, match=r"Embedding: expected integer ids \(int32 "
                                                   r"or int64\), received float32"):
        build(layer, np.zeros((2, 3), np.float32))
    with pytest.raises(hl.errors.IndexError, match=r"Embedding: ids must lie in \[0, 10\)"):
        build(layer, np.array([3, 10]))
