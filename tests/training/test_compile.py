"""Module.compile in SINGA's form, Keras's form and both at once; the model(x, y) rule."""
import numpy as np
import pytest

import hl
from hl import layers as L

from .models import blobs, mlp, same_states, states


class Net(hl.Module):
    def __init__(self):
        super().__init__()
        self.fc = L.Linear(3)

    def forward(self, x):
        return self.fc(x)


@pytest.mark.parametrize("name, cls", [("sgd", hl.opt.SGD), ("adam", hl.opt.Adam),
                                       ("rmsprop", hl.opt.RMSProp), ("adagrad", hl.opt.AdaGrad),
                                       ("SGD", hl.opt.SGD)])
def test_optimizer_names(name, cls):
    m = Net().compile(optimizer=name, loss="mse")
    assert type(m.optim) is cls and m.optimizer is m.optim


@pytest.mark.parametrize("name, cls", [
    ("sparse_categorical_crossentropy", hl.losses.SoftmaxCrossEntropy),
    ("categorical_crossentropy", hl.losses.SoftmaxCrossEntropy),
    ("cross_entropy", hl.losses.SoftmaxCrossEntropy), ("mse", hl.losses.MSELoss),
    ("mean_squared_error", hl.losses.MSELoss), ("mae", hl.losses.MAELoss),
    ("binary_crossentropy", hl.losses.BCEWithLogits)])
def test_loss_names(name, cls):
    assert type(Net().compile(optimizer="sgd", loss=name).loss_fn) is cls


def test_metric_names_follow_the_loss():
    m = Net().compile(optimizer="sgd", loss="binary_crossentropy",
                      metrics=["accuracy", "mae"])
    acc, mae = m.compiled_metrics
    assert isinstance(acc, hl.metrics.BinaryAccuracy) and acc.threshold == 0.0  # logits
    assert acc.name == "accuracy" and isinstance(mae, hl.metrics.MeanAbsoluteError)
    m = Net().compile(optimizer="sgd", loss="cross_entropy", metrics=["acc", "top_k_categorical_accuracy"])
    assert [type(x) for x in m.compiled_metrics] == [hl.metrics.Accuracy, hl.metrics.TopKAccuracy]
    assert [x.name for x in m.compiled_metrics] == ["acc", "top_k_categorical_accuracy"]


def test_objects_and_functions():
    def my_loss(pred, y):
        return hl.losses.mse(pred, y, reduction="none").mean(axis=1)

    def zero_one(pred, y):
        return (np.asarray(pred).argmax(1) == np.asarray(y).argmax(1)).astype(float)

    opt = hl.opt.Adam(lr=0.01)
    m = Net().compile(optimizer=opt, loss=my_loss, metrics=[zero_one])
    assert m.optim is opt and m.loss_fn is my_loss
    assert m.compiled_metrics[0].name == "zero_one"


def test_keras_positional_form():
    m = Net().compile("adam", "mse")
    assert isinstance(m.optim, hl.opt.Adam) and isinstance(m.loss_fn, hl.losses.MSELoss)


@pytest.mark.parametrize("kw, match", [
    (dict(optimizer="sgdd"), "optimizer must be"), (dict(loss="crossentropy"), "unknown loss"),
    (dict(loss="mse", metrics=["acuracy"]), "unknown metric"),
    (dict(loss="mse", metrics=["mae", "mae"]), "distinct")])
def test_bad_names_say_what_exists(kw, match):
    with pytest.raises(hl.errors.ValueError, match=match):
        Net().compile(**kw)


def test_singa_and_keras_forms_in_one_call():
    m = Net()
    m.compile([hl.Placeholder((4, 5))], is_train=True, use_graph=False, sequential=True,
              optimizer="sgd", loss="cross_entropy", metrics=["accuracy"])
    assert m.fc.W.shape == (5, 3) and m._input_shapes == [(4, 5)]
    assert isinstance(m.optim, hl.opt.SGD)
    x, y = blobs(16)
    hist = m.fit(x, y, epochs=2, verbose=0)
    assert len(hist.history["loss"]) == 2


def test_singa_call_rule():
    """After train(), model(tx, ty) is a training step; model(tx) and eval() run forward."""
    x, y = blobs(8)
    m = mlp()
    m.predict(x, verbose=0)  # build
    before = states(m)
    m.train()
    out, loss = m(hl.tensor(x), hl.tensor(y))
    assert loss.ndim == 0 and out.shape == (8, 3)
    assert not same_states(before, states(m))  # one SGD step happened
    after_step = states(m)
    out = m(hl.tensor(x))  # one argument: forward, no step
    assert out.shape == (8, 3) and same_states(after_step, states(m))
    m.eval()
    with pytest.raises(TypeError):
        m(hl.tensor(x), hl.tensor(y))  # forward(x) takes one input
    assert same_states(after_step, states(m))


def test_keras_call_is_always_forward():
    x, y = blobs(8)
    m = mlp()
    out = m(hl.tensor(x))
    before = states(m)
    with pytest.raises(TypeError):
        m(hl.tensor(x), hl.tensor(y))  # default mode: forward, which takes one input
    assert same_states(before, states(m))
    np.testing.assert_allclose(out.numpy(), m.predict(x, verbose=0), rtol=1e-6)


def test_a_module_inside_another_is_a_layer():
    class Inner(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.Linear(2)

        def forward(self, a, b):
            return self.fc(a) + self.fc(b)

    class Outer(hl.Module):
        def __init__(self):
            super().__init__()
            self.inner = Inner()

        def forward(self, x):
            return self.inner(x, x)

    m = Outer()
    m.optim, m.loss_fn = hl.opt.SGD(lr=0.1), hl.losses.MSELoss()
    m.train()
    x = hl.tensor(np.ones((3, 4), np.float32))
    assert m(x).shape == (3, 2)  # Inner(x, x) ran forward, not train_one_batch
