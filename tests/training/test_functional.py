"""Keras's functional API: hl.Input, layer calls on symbolic tensors, hl.Model(inputs,
outputs) with several inputs and outputs and shared layers. References: Keras 3 running the
same graph with the same weights, numpy, onnxruntime for the export; and the example."""
import importlib.util
import os
import sys

import numpy as np
import pytest

import hl
from hl import layers as L

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "functional_api.py")


def _graph(lib_input, layers, model, concat):
    """The same graph in hl or Keras: two inputs, a shared Dense, two heads."""
    a, b = lib_input((6,), "a"), lib_input((6,), "b")
    shared = layers.Dense(5, activation="tanh")
    first = layers.Dense(6, activation="relu")
    h = concat()([shared(first(a)), shared(b)])
    return model([a, b], [layers.Dense(3)(h), layers.Dense(1, activation="sigmoid")(h)]), \
        [first, shared]


def _hl_model():
    return _graph(lambda s, n: hl.Input(s, name=n), L,
                  lambda i, o: hl.Model(inputs=i, outputs=o), L.Concatenate)


def _data(n=7, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.normal(size=(n, 6)).astype(np.float32) for _ in range(2)]


def test_forward_matches_keras_with_the_same_weights():
    os.environ.setdefault("KERAS_BACKEND", "torch")
    keras = pytest.importorskip("keras")
    km, _ = _graph(lambda s, n: keras.Input(s, name=n), keras.layers, keras.Model,
                   keras.layers.Concatenate)
    hm, _ = _hl_model()
    rng = np.random.default_rng(1)
    km.set_weights([rng.normal(size=w.shape).astype(np.float32) for w in km.get_weights()])
    assert hm.count_params() == km.count_params()
    # Keras lists layers in graph order, as hl names them: the weights line up one to one
    hm.set_weights(km.get_weights())
    xs = _data()
    want = [np.asarray(o.detach()) for o in km(xs)]
    got = [o.numpy() for o in hm(*[hl.tensor(x) for x in xs])]
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


def test_shared_layer_owns_its_weights_once_and_names_are_stable():
    m, (first, shared) = _hl_model()
    assert list(m.state_dict()) == ["dense.W", "dense.b", "dense_1.W", "dense_1.b",
                                    "dense_2.W", "dense_2.b", "dense_3.W", "dense_3.b"]
    assert m.get_layer("dense_1") is shared and m.layers[0] is first
    assert [n for n, _ in m.named_children()] == ["dense", "dense_1", "concatenate", "dense_2",
                                                  "dense_3"]
    other, _ = _hl_model()
    assert list(other.state_dict()) == list(m.state_dict())


def test_inputs_bind_by_position_list_and_name():
    m, _ = _hl_model()
    xa, xb = [hl.tensor(x) for x in _data()]
    ref = m(xa, xb)[0].numpy()
    np.testing.assert_array_equal(m([xa, xb])[0].numpy(), ref)
    np.testing.assert_array_equal(m(a=xa, b=xb)[0].numpy(), ref)
    np.testing.assert_array_equal(m({"a": xa, "b": xb})[0].numpy(), ref)
    with pytest.raises(hl.errors.ValueError, match=r"expected 2 input\(s\)"):
        m(xa)
    with pytest.raises(hl.errors.ShapeError, match=r"input b expects shape \(None, 6\) \(None: "
                                                   r"any size\), received \(7, 5\)"):
        m(xa, hl.zeros(7, 5))
    with pytest.raises(hl.errors.ValueError, match=r"inputs by name must be exactly"):
        m(a=xa, c=xb)


def test_fit_several_inputs_and_outputs_learns():
    hl.manual_seed(0)  # the starting weights too, whatever ran before
    m, _ = _hl_model()
    xs = _data(200, seed=2)
    y = (xs[0][:, 0] + xs[1][:, 1] > 0).astype(np.int64)

    def loss(outputs, target):
        logits, prob = outputs
        p = prob.reshape(-1)
        t = target.astype(hl.float32)
        bce = -(t * (p + 1e-6).log() + (1 - t) * (1 - p + 1e-6).log()).mean()
        return hl.losses.softmax_cross_entropy(logits, target) + bce
    hl.manual_seed(0)
    m.compile(optimizer=hl.opt.Adam(lr=0.01), loss=loss)
    history = m.fit(xs, y, epochs=15, batch_size=32, verbose=0)
    assert history.history["loss"][-1] < 0.5 * history.history["loss"][0]
    logits, prob = m.predict(xs, verbose=0)
    assert (logits.argmax(1) == y).mean() > 0.9 and ((prob[:, 0] > 0.5) == y).mean() > 0.9


def test_save_and_load_three_ways(tmp_path):
    m, _ = _hl_model()
    xs = [hl.tensor(x) for x in _data()]
    ref = [o.numpy() for o in m(*xs)]
    m.save_states(str(tmp_path / "s.zip"))
    fresh, _ = _hl_model()
    fresh.load_states(str(tmp_path / "s.zip"))
    hl.save(m, str(tmp_path / "m.hl"))
    loaded = hl.load(str(tmp_path / "m.hl"))
    again, _ = _hl_model()
    again.load_state_dict(m.state_dict())
    for other in (fresh, loaded, again):
        for g, w in zip(other(*xs), ref):
            np.testing.assert_array_equal(g.numpy(), w)
    assert type(loaded).__name__ == "Functional" and isinstance(loaded, hl.Model)


def test_to_onnx_runs_in_onnxruntime(tmp_path):
    ort = pytest.importorskip("onnxruntime")
    m, _ = _hl_model()
    batch = {0: "batch"}
    proto = hl.onnx.to_onnx(m, dynamic_axes={"a": batch, "b": batch})
    sess = ort.InferenceSession(proto.SerializeToString())
    assert [i.name for i in sess.get_inputs()] == ["a", "b"]
    xs = _data(5)
    got = sess.run(None, {"a": xs[0], "b": xs[1]})
    for g, w in zip(got, m.eval()(*[hl.tensor(x) for x in xs])):
        np.testing.assert_allclose(g, w.numpy(), rtol=1e-5, atol=1e-6)


def test_operators_methods_and_nested_models():
    x = hl.Input((4,))
    y = (L.Dense(4)(x) + x).relu() * 2.0  # operators and methods record FunctionCall layers
    inner = hl.Model(x, y)
    z = hl.Input((4,))
    outer = hl.Model(inputs=z, outputs=L.Dense(2)(inner(z)))  # a model used as a layer
    data = np.random.default_rng(3).normal(size=(3, 4)).astype(np.float32)
    d = inner.get_layer("dense")
    want = np.maximum(data @ d.W.numpy() + d.b.numpy() + data, 0) * 2.0
    np.testing.assert_allclose(inner(hl.tensor(data)).numpy(), want, rtol=1e-5, atol=1e-6)
    assert outer(hl.tensor(data)).shape == (3, 2)
    assert list(outer.state_dict())[:2] == ["functional.dense.W", "functional.dense.b"]


def test_graph_errors_name_the_problem():
    a, b = hl.Input((3,)), hl.Input((3,))
    y = L.Add()([a, b])
    with pytest.raises(hl.errors.ValueError, match="not among the model's inputs; add it"):
        hl.Model(inputs=a, outputs=y)
    with pytest.raises(hl.errors.ValueError, match="must be hl.Input tensors"):
        hl.Model(inputs=a, outputs=hl.zeros(2, 3))
    with pytest.raises(hl.errors.ValueError, match="every input must come from hl.Input"):
        hl.Model(inputs=L.Dense(2)(a), outputs=y)
    with pytest.raises(hl.errors.ShapeError, match="expected input with 5 features"):
        L.Linear(5, 2)(a)  # shapes are checked while the graph is built
    with pytest.raises(hl.errors.ValueError, match="has no truth value"):
        bool(a)
    assert hl.Input(batch_shape=(None, 2, 3)).shape == (None, 2, 3)
    with pytest.raises(hl.errors.ValueError, match="shape .* or batch_shape"):
        hl.Input()


def test_subclassed_model_keeps_singas_and_keras_way():
    class Net(hl.Model):
        def __init__(self):
            super().__init__()
            self.fc = L.Dense(2)

        def forward(self, x):
            return self.fc(x)
    net = Net()
    assert type(net) is Net and isinstance(net, hl.Module)
    assert net(hl.zeros(3, 4)).shape == (3, 2)
    with pytest.raises(hl.errors.ValueError, match="Model\\(inputs=..., outputs=...\\)"):
        hl.Model(3)


def test_functional_api_example(tmp_path, capsys, monkeypatch):
    spec = importlib.util.spec_from_file_location("functional_api", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "functional_api", mod)  # as __main__ is, when run
    spec.loader.exec_module(mod)
    digit_acc, odd_acc = mod.main(str(tmp_path))
    out = capsys.readouterr().out
    assert digit_acc > 0.93 and odd_acc > 0.93, (digit_acc, odd_acc)
    assert 'Model: "two_views"' in out and "Connected to" in out
    assert "reloaded three ways: same predictions" in out
    assert os.path.exists(tmp_path / "two_views.onnx")


def test_a_function_call_runs_only_functions_of_hl():
    from hl.layers.merge import FunctionCall
    for name in ("_core", "np", "Placeholder", "__import__", 3):
        with pytest.raises(hl.errors.ValueError, match="is not a function of hl"):
            FunctionCall(name)
    op = FunctionCall("relu")
    op.__dict__["fn_name"] = "np"  # as a doctored file would restore it, past __init__
    with pytest.raises(hl.errors.ValueError, match="'np' is not a function of hl"):
        op(hl.zeros(2))
