"""Keras's model API on hl models, with Keras 3 itself (PyTorch backend) as the reference:
the same architectures give the same parameter counts, trainable / non-trainable totals,
summary tables and get_weights order; Keras's weights loaded through set_weights give
Keras's outputs; every activation name computes what Keras's does."""
import os

import numpy as np
import pytest

import hl
from hl import layers as L


@pytest.fixture(scope="module")
def keras():
    os.environ.setdefault("KERAS_BACKEND", "torch")
    return pytest.importorskip("keras")


def _mlp_pair(keras):
    k = keras.Sequential([keras.Input((20,)), keras.layers.Dense(16, activation="relu"),
                          keras.layers.BatchNormalization(epsilon=1e-3),
                          keras.layers.Dense(4)])
    h = hl.Sequential([hl.Input((20,)), L.Dense(16, activation="relu"),
                       L.BatchNorm1d(eps=1e-3), L.Dense(4)])
    return k, h


def _cnn_pair(keras):
    kl = keras.layers
    k = keras.Sequential([keras.Input((12, 12, 3)), kl.Conv2D(8, 3, activation="relu"),
                          kl.MaxPooling2D(2), kl.Conv2D(6, 3), kl.Flatten(), kl.Dense(10)])
    h = hl.Sequential([hl.Input((3, 12, 12)), L.Conv2d(8, 3, activation="relu"),
                       L.MaxPool2d(2), L.Conv2d(6, 3), L.Flatten(), L.Dense(10)])
    return k, h


def _text(model, **kw):
    out = []
    model.summary(print_fn=lambda s, **_: out.append(s), **kw)
    return "".join(out)


def _counts_column(text):
    """The Param # cells of a summary, in order."""
    rows = [line for line in text.splitlines() if line.startswith("│")]
    return [r.split("│")[3].strip() for r in rows if r.split("│")[3].strip()]


@pytest.mark.parametrize("pair", [_mlp_pair, _cnn_pair])
def test_counts_and_weight_order_match_keras(keras, pair):
    k, h = pair(keras)
    assert h.count_params() == k.count_params()
    assert sum(t.size for t in h.trainable_weights) == \
        sum(int(np.prod(w.shape)) for w in k.trainable_weights)
    assert sum(t.size for t in h.non_trainable_weights) == \
        sum(int(np.prod(w.shape)) for w in k.non_trainable_weights)
    kw, hw = k.get_weights(), h.get_weights()
    assert len(kw) == len(hw)
    for a, b in zip(kw, hw):  # creation order; conv kernels are (kh, kw, in, out) in Keras
        want = a.shape if a.ndim != 4 else (a.shape[3], a.shape[2], a.shape[0], a.shape[1])
        assert b.shape == want
    assert [layer.count_params() for layer in h.layers] == \
        [layer.count_params() for layer in k.layers]


@pytest.mark.parametrize("line_length", [None, 60, 70])  # rich wraps beyond 80
def test_summary_is_drawn_as_keras_draws_it(keras, line_length):
    k, h = _mlp_pair(keras)
    kt, ht = _text(k, line_length=line_length), _text(h, line_length=line_length)
    klines, hlines = kt.splitlines(), ht.splitlines()
    # the frame (column widths), the header and the totals are Keras's, line for line
    assert hlines[1:4] == klines[1:4]
    assert hlines[-4] == klines[-4] and hlines[-3:] == klines[-3:]
    assert _counts_column(ht) == _counts_column(kt)
    assert "(None, 16)" in ht and "(None, 4)" in ht


def test_summary_totals_after_freezing_match_keras(keras):
    k, h = _mlp_pair(keras)
    k.layers[0].trainable = False
    h.layers[0].trainable = False
    assert _text(h).splitlines()[-3:] == _text(k).splitlines()[-3:]


def test_functional_summary_matches_keras_counts(keras):
    kl = keras.layers
    a, b = keras.Input((8,), name="a"), keras.Input((4,), name="b")
    shared = kl.Dense(4)
    kh = kl.Concatenate()([shared(kl.Dense(4)(a)), shared(b)])
    k = keras.Model([a, b], [kl.Dense(2)(kh), kl.Dense(3)(kh)])
    x, y = hl.Input((8,), name="a"), hl.Input((4,), name="b")
    sh = L.Dense(4)
    hh = L.Concatenate()([sh(L.Dense(4)(x)), sh(y)])
    h = hl.Model(inputs=[x, y], outputs=[L.Dense(2)(hh), L.Dense(3)(hh)])
    kt, ht = _text(k), _text(h)
    assert ht.splitlines()[1:4] == kt.splitlines()[1:4]  # four columns: "Connected to"
    assert ht.splitlines()[-3:] == kt.splitlines()[-3:]
    assert sorted(_counts_column(ht)) == sorted(_counts_column(kt))
    assert "dense_1[0][0]," in ht and "dense_1[1][0]" in ht  # the shared layer's two calls
    assert h.count_params() == k.count_params()


def test_expand_nested_lists_inner_layers(keras):
    inner = hl.Sequential([hl.Input((8,)), L.Dense(4), L.Dense(5)])
    outer = hl.Sequential([hl.Input((8,)), inner, L.Dense(2)])
    text = _text(outer, expand_nested=True)
    assert "│    └ 0.0 (Dense)" in text and "│    └ 0.1 (Dense)" in text
    assert "└ 0.0" not in _text(outer)
    assert "│ 0 (Sequential)                  │ (None, 5)" in text


def test_set_weights_from_keras_gives_keras_outputs(keras):
    k, h = _mlp_pair(keras)
    rng = np.random.default_rng(0)
    k.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in k.get_weights()])
    h.set_weights(k.get_weights())
    x = rng.normal(size=(6, 20)).astype(np.float32)
    want = np.asarray(k(x, training=False).detach().cpu())
    got = h.eval()(hl.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_set_weights_checks_count_and_shapes():
    m = hl.Sequential([hl.Input((3,)), L.Dense(2)])
    with pytest.raises(hl.errors.ValueError, match=r"expected a list of 2 arrays \(0.W \(3, 2\), "
                                                   r"0.b \(2,\)\), received 1"):
        m.set_weights([np.zeros((3, 2))])
    with pytest.raises(hl.errors.ShapeError, match=r"weight 0 \(0.W\): expected shape \(3, 2\), "
                                                   r"received \(2, 3\); nothing was copied"):
        m.set_weights([np.ones((2, 3)), np.ones(2)])
    assert not m.get_weights()[1].any()  # untouched
    with pytest.raises(hl.errors.ValueError, match="have not been built"):
        hl.Sequential(L.Dense(2)).count_params()


@pytest.mark.parametrize("name", ["relu", "relu6", "leaky_relu", "elu", "selu", "gelu",
                                  "sigmoid", "hard_sigmoid", "tanh", "softplus", "softsign",
                                  "silu", "swish", "mish", "hard_silu", "exponential",
                                  "softmax", "log_softmax", "linear"])
def test_activation_names_compute_what_keras_computes(keras, name):
    x = np.random.default_rng(1).normal(size=(5, 7)).astype(np.float32) * 3
    want = np.asarray(keras.activations.get(name)(x))
    got = hl.activations.get(name)(hl.tensor(x)).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    k = keras.layers.Dense(4, activation=name)
    k.build((None, 7))
    d = L.Dense(4, activation=name)
    d(hl.tensor(x))
    d.set_weights(k.get_weights())
    np.testing.assert_allclose(d(hl.tensor(x)).numpy(), np.asarray(k(x).detach()),
                               rtol=1e-5, atol=1e-5)


def test_lstm_and_gru_activations_match_keras(keras):
    x = np.random.default_rng(2).normal(size=(2, 5, 4)).astype(np.float32)
    k = keras.layers.LSTM(3, activation="relu", recurrent_activation="hard_sigmoid",
                          return_sequences=True)
    k.build((None, 5, 4))
    kernel, rec, bias = k.get_weights()
    h = L.LSTM(3, batch_first=True, activation="relu", recurrent_activation="hard_sigmoid")
    h(hl.tensor(x))
    h.set_states({"W_ih_l0": kernel.T, "W_hh_l0": rec.T, "b_ih_l0": bias,
                  "b_hh_l0": np.zeros_like(bias)})
    np.testing.assert_allclose(h(hl.tensor(x))[0].numpy(), np.asarray(k(x).detach()),
                               rtol=1e-5, atol=1e-5)

    g = keras.layers.GRU(3, activation="softsign", return_sequences=True)  # reset_after=True
    g.build((None, 5, 4))
    kernel, rec, bias = g.get_weights()
    zrn = [1, 0, 2]  # Keras's gates are z, r, h; PyTorch's (and hl's) r, z, n

    def reorder(w):
        return np.concatenate([w[..., 3 * i:3 * i + 3] for i in zrn], axis=-1)
    hg = L.GRU(3, batch_first=True, activation="softsign")
    hg(hl.tensor(x))
    hg.set_states({"W_ih_l0": reorder(kernel).T, "W_hh_l0": reorder(rec).T,
                   "b_ih_l0": reorder(bias[0]), "b_hh_l0": reorder(bias[1])})
    np.testing.assert_allclose(hg(hl.tensor(x))[0].numpy(), np.asarray(g(x).detach()),
                               rtol=1e-5, atol=1e-5)


def test_conv_activation_and_bad_names():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(3).normal(size=(2, 3, 9, 9)).astype(np.float32)
    c = L.Conv2d(4, 3, activation="gelu")
    y = c(hl.tensor(x)).numpy()
    want = torch.nn.functional.gelu(torch.nn.functional.conv2d(
        torch.tensor(x), torch.tensor(c.W.numpy()), torch.tensor(c.b.numpy())))
    np.testing.assert_allclose(y, want.numpy(), rtol=1e-5, atol=1e-5)
    assert L.Dense(2, activation=hl.tanh)(hl.zeros(1, 3)).shape == (1, 2)  # a callable
    with pytest.raises(hl.errors.ValueError, match=r"Dense: unknown activation 'rleu'; known: "):
        L.Dense(3, activation="rleu")
    with pytest.raises(hl.errors.ValueError, match="Conv2d: an activation is a name"):
        L.Conv2d(3, 3, activation=3)
    assert "activation='relu'" in repr(L.Dense(3, activation="ReLU"))


def test_trainable_false_freezes_in_fit_and_batch_norm_infers():
    rng = np.random.default_rng(4)
    x, y = rng.normal(size=(64, 6)).astype(np.float32), rng.integers(0, 3, 64)
    m = hl.Sequential([hl.Input((6,)), L.Dense(8), L.BatchNorm1d(), L.Dense(3)])
    m.layers[0].trainable = False
    m.layers[1].trainable = False
    before = m.get_weights()
    m.compile(optimizer="adam", loss="sparse_categorical_crossentropy")
    m.fit(x, y, epochs=2, batch_size=16, verbose=0)
    after = m.get_weights()
    for a, b in zip(before[:6], after[:6]):  # weights and running statistics
        np.testing.assert_array_equal(a, b)
    for a, b in zip(before[6:], after[6:]):  # the last Dense trained
        assert not np.array_equal(a, b)
    assert sum(t.size for t in m.non_trainable_weights) == 6 * 8 + 8 + 4 * 8
    m.layers[0].trainable = True
    assert m.layers[0].W.requires_grad and m.layers[0].trainable


def test_layer_frozen_before_build_creates_frozen_parameters():
    d = L.Dense(3)
    d.trainable = False
    d(hl.zeros(2, 4))
    assert not d.W.requires_grad and d.trainable_weights == []
    d.requires_grad_(True)  # PyTorch's spelling
    assert d.W.requires_grad and len(d.trainable_weights) == 2


def test_get_layer_and_layers():
    m = hl.Sequential(L.Dense(4, name="hidden"), L.ReLU(), L.Dense(2))
    m(hl.zeros(1, 3))
    assert m.get_layer("hidden") is m.layers[0] and m.get_layer(index=-1) is m.layers[2]
    assert m.get_layer("2") is m.layers[2]  # by path
    with pytest.raises(hl.errors.ValueError, match=r"no layer named 'nope'; the layers are "
                                                   r"\['hidden', '1', '2'\]"):
        m.get_layer("nope")
    with pytest.raises(hl.errors.IndexError, match="index 5 is out of range"):
        m.get_layer(index=5)


def test_layers_attribute_of_a_subclass_stays_the_users():
    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.layers = [L.Dense(4), L.Dense(2)]

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x
    net = Net()
    net(hl.zeros(1, 3))
    assert list(net.state_dict()) == ["layers.0.W", "layers.0.b", "layers.1.W", "layers.1.b"]
    assert len(net.layers) == 2


def test_summary_of_an_unbuilt_model_and_of_a_recurrent_graph():
    text = _text(hl.Sequential(L.Dense(4), L.Dense(2)), line_length=60)
    assert "│ 0 (Dense)                │ ?                 │         0 │" in text
    assert " Total params: 0 (0.00 B)" in text and "(unbuilt)" in text
    ids = hl.Input((5,), dtype=hl.int64, name="ids")
    out, (h, c) = L.LSTM(6, batch_first=True)(L.Embedding(20, 8)(ids))
    model = hl.Model(ids, L.Dense(3)(h[0]))
    text = _text(model, line_length=160)
    assert "│ [(None, 5, 6), (1, None, 6), (1, None," in text  # (output, (h_n, c_n))
    assert "getitem (FunctionCall)" in text and "lstm[0][1]" in text
    assert model(hl.tensor(np.arange(10).reshape(2, 5))).shape == (2, 3)
