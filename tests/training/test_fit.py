"""fit against references: a hand-written loop over the same batches (bit for bit), PyTorch
(weights after two epochs, weighted losses), numpy (evaluate's loss and accuracy) and the
shipped digits (it learns)."""
import numpy as np
import pytest

import hl
from hl import layers as L

from .models import blobs, mlp, same_states, states


def test_learns_the_digits():
    (x, y), (xt, yt) = hl.data.digits()
    m = mlp(hidden=64, classes=10, in_shape=x.shape[1:])
    hist = m.fit(x, y, epochs=10, batch_size=32, validation_split=0.2, verbose=0)
    h = hist.history
    assert set(h) == {"loss", "accuracy", "val_loss", "val_accuracy"}
    assert all(len(v) == 10 for v in h.values()) and hist.epoch == list(range(10))
    assert h["loss"][-1] < h["loss"][0] / 3
    loss, acc = m.evaluate(xt, yt, verbose=0)
    assert acc > 0.9, acc


def test_same_as_a_hand_written_loop():
    """shuffle=False: fit's updates are train_one_batch over the batches in order."""
    x, y = blobs(50)
    a, b = mlp(seed=3), mlp(seed=3)
    a.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0)
    for _ in range(2):
        for i in range(0, 50, 16):  # the last batch has 2 samples
            b.train_one_batch(hl.tensor(x[i:i + 16]), hl.tensor(y[i:i + 16]))
    assert same_states(states(a), states(b))


def _torch_twin(m):
    torch = pytest.importorskip("torch")
    t = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    with torch.no_grad():
        for i, k in ((0, "1"), (2, "3")):
            t[i].weight.copy_(torch.from_numpy(m.get_states()[f"{k}.W"].numpy().T.copy()))
            t[i].bias.copy_(torch.from_numpy(m.get_states()[f"{k}.b"].numpy().copy()))
    return t


def test_matches_pytorch_sgd_momentum():
    torch = pytest.importorskip("torch")
    x, y = blobs(40)
    m = mlp(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9))
    m.predict(x[:1], verbose=0)
    t = _torch_twin(m)
    opt = torch.optim.SGD(t.parameters(), lr=0.05, momentum=0.9)
    m.fit(x, y, batch_size=8, epochs=2, shuffle=False, verbose=0)
    for _ in range(2):
        for i in range(0, 40, 8):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(t(torch.from_numpy(x[i:i + 8])),
                                                     torch.from_numpy(y[i:i + 8]))
            loss.backward()
            opt.step()
    np.testing.assert_allclose(m.get_states()["1.W"].numpy(), t[0].weight.detach().numpy().T,
                               rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(m.get_states()["3.b"].numpy(), t[2].bias.detach().numpy(),
                               rtol=1e-4, atol=1e-5)


def test_sample_and_class_weights_match_pytorch():
    torch = pytest.importorskip("torch")
    """Keras's weighting: sum(w * loss) / batch size; class_weight gives w = cw[y]."""
    x, y = blobs(12)
    w = np.linspace(0.1, 2.0, 12).astype(np.float32)
    cw = {0: 0.5, 1: 2.0, 2: 1.5}
    for kw, weights in ((dict(sample_weight=w), w),
                        (dict(class_weight=cw), np.array([cw[c] for c in y], np.float32)),
                        (dict(sample_weight=w, class_weight=cw),
                         w * np.array([cw[c] for c in y], np.float32))):
        m = mlp()
        m.predict(x[:1], verbose=0)
        t = _torch_twin(m)
        got = m.train_on_batch(x, y, **kw)[0]
        per = torch.nn.functional.cross_entropy(t(torch.from_numpy(x)), torch.from_numpy(y),
                                                reduction="none")
        loss = (per * torch.from_numpy(weights)).sum() / 12
        loss.backward()
        np.testing.assert_allclose(got, loss.item(), rtol=1e-5)
        with torch.no_grad():
            expect = t[0].weight - 0.1 * t[0].weight.grad
        np.testing.assert_allclose(m.get_states()["1.W"].numpy(), expect.numpy().T, rtol=1e-5,
                                   atol=1e-6)


def test_evaluate_against_numpy():
    x, y = blobs(37)
    w = np.random.default_rng(1).uniform(0.5, 2, 37).astype(np.float32)
    m = mlp()
    logits = m.predict(x, batch_size=10, verbose=0)
    logp = logits - np.log(np.exp(logits - logits.max(1, keepdims=True)).sum(1,
                                                                          keepdims=True)) \
        - logits.max(1, keepdims=True)
    nll = -logp[np.arange(37), y]
    loss, acc = m.evaluate(x, y, batch_size=10, verbose=0)
    # batches of 10, 10, 10, 7, each mean weighted by its size: the mean over samples
    np.testing.assert_allclose(loss, nll.mean(), rtol=1e-5)
    assert acc == pytest.approx((logits.argmax(1) == y).mean())
    d = m.evaluate(x, y, batch_size=10, sample_weight=w, verbose=0, return_dict=True)
    per_batch = [(nll[i:i + 10] * w[i:i + 10]).sum() / len(nll[i:i + 10]) for i in
                 range(0, 37, 10)]
    sizes = [len(nll[i:i + 10]) for i in range(0, 37, 10)]
    np.testing.assert_allclose(d["loss"], np.dot(per_batch, sizes) / 37, rtol=1e-5)
    hits = (logits.argmax(1) == y).astype(float)
    assert d["accuracy"] == pytest.approx((hits * w).sum() / w.sum())


def test_predict_is_eval_mode_forward_in_batches():
    class Net(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.Linear(8)
            self.bn = L.BatchNorm1d()
            self.drop = L.Dropout(0.5)
            self.out = L.Linear(2)

        def forward(self, x):
            return self.out(self.drop(self.bn(self.fc(x)).relu()))

    x, _ = blobs(23)
    m = Net()
    m(hl.tensor(x))  # build
    m.train()
    before = states(m)
    p1 = m.predict(x, batch_size=5, verbose=0)
    p2 = m.predict(x, batch_size=23, verbose=0)
    assert p1.shape == (23, 2) and isinstance(p1, np.ndarray)
    np.testing.assert_allclose(p1, p2, rtol=1e-5, atol=1e-6)  # no dropout, running stats
    assert same_states(before, states(m))  # batch norm statistics untouched
    assert m.training  # mode put back
    m.eval()
    with hl.no_grad():
        np.testing.assert_allclose(p1, m(hl.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(m.predict_on_batch(x[:4]), p1[:4], rtol=1e-5, atol=1e-6)


def test_several_inputs_and_outputs():
    class TwoIn(hl.Module):
        def __init__(self):
            super().__init__()
            self.a = L.Linear(3)
            self.b = L.Linear(3)

        def forward(self, image, meta):
            return self.a(image) + self.b(meta)

    x, y = blobs(30)
    xa, xb = x[:, :3], x[:, 3:]
    m = TwoIn().compile(optimizer="sgd", loss="cross_entropy", metrics=["accuracy"])
    h1 = m.fit([xa, xb], y, epochs=2, batch_size=8, verbose=0)
    h2 = m.fit({"image": xa, "meta": xb}, y, epochs=1, batch_size=8, verbose=0)
    assert len(h1.history["loss"]) == 2 and len(h2.history["accuracy"]) == 1
    np.testing.assert_allclose(m.predict([xa, xb], verbose=0),
                               m.predict({"meta": xb, "image": xa}, verbose=0))

    class TwoOut(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.Linear(3)

        def forward(self, x):
            y = self.fc(x)
            return y, y * 2

    out = TwoOut().predict(x, batch_size=7, verbose=0)
    assert isinstance(out, list) and out[0].shape == (30, 3)
    np.testing.assert_allclose(out[1], 2 * out[0], rtol=1e-6)


def test_batches_from_iterables_and_generators():
    x, y = blobs(40)
    loader = hl.data.DataLoader(x, y, batch_size=10, shuffle=True, seed=0)
    m = mlp()
    h = m.fit(loader, epochs=3, verbose=0, validation_data=[(x[:10], y[:10])])
    assert len(h.history["val_loss"]) == 3

    def gen():
        while True:
            for i in range(0, 40, 10):
                yield x[i:i + 10], y[i:i + 10]
    calls = []
    cb = hl.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: calls.append(b))
    h = mlp().fit(gen(), epochs=3, steps_per_epoch=4, verbose=0, callbacks=[cb])
    assert calls == [0, 1, 2, 3] * 3 and len(h.history["loss"]) == 3

    once = ((x[i:i + 10], y[i:i + 10]) for i in range(0, 40, 10))
    with pytest.warns(UserWarning, match="ran out"):
        h = mlp().fit(once, epochs=3, verbose=0)
    assert len(h.history["loss"]) == 1
    # evaluate and predict take batches too
    m = mlp()
    whole = m.evaluate(x, y, verbose=0)
    parts = m.evaluate([(x[i:i + 10], y[i:i + 10]) for i in range(0, 40, 10)], verbose=0)
    np.testing.assert_allclose(parts, whole, rtol=1e-6)
    np.testing.assert_allclose(m.predict(iter([x[:20], x[20:]]), verbose=0),
                               m.predict(x, verbose=0), rtol=1e-6)


def test_validation_split_is_the_last_fraction():
    x, y = blobs(50)
    m = mlp()
    seen = {}

    class Peek(hl.callbacks.Callback):
        def on_epoch_end(self, epoch, logs=None):
            seen.update(logs)
            seen["check"] = self.model.evaluate(x[40:], y[40:], verbose=0, return_dict=True)
    m.fit(x, y, epochs=1, validation_split=0.2, verbose=0, callbacks=[Peek()])
    assert seen["val_loss"] == pytest.approx(seen["check"]["loss"], rel=1e-6)
    assert seen["val_accuracy"] == pytest.approx(seen["check"]["accuracy"])


def test_initial_epoch_and_shuffle_repeat():
    x, y = blobs(40)
    runs = []
    for _ in range(2):
        m = mlp()
        hl.manual_seed(5)
        h = m.fit(x, y, epochs=4, initial_epoch=1, batch_size=8, verbose=0)
        runs.append(states(m))
        assert h.epoch == [1, 2, 3]
    assert same_states(*runs)  # the same seed gives the same orders
    m = mlp()
    hl.manual_seed(6)
    m.fit(x, y, epochs=4, initial_epoch=1, batch_size=8, verbose=0)
    assert not same_states(runs[0], states(m))


def test_an_override_of_train_one_batch_is_the_step():
    calls = []

    class Singa(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.Linear(3)
            self.loss_fn = hl.losses.SoftmaxCrossEntropy()
            self.optim = hl.opt.SGD(lr=0.1)

        def forward(self, x):
            return self.fc(x)

        def train_one_batch(self, x, y):
            calls.append(x.shape[0])
            out = self.forward(x)
            loss = self.loss_fn(out, y)
            self.optim(loss)
            return out, loss

    x, y = blobs(20)
    m = Singa()
    h = m.fit(x, y, batch_size=8, epochs=1, verbose=0)
    assert calls == [8, 8, 4] and len(h.history["loss"]) == 1
    with pytest.raises(hl.errors.ValueError, match="takes no sample_weight"):
        m.fit(x, y, sample_weight=np.ones(20), verbose=0)
    assert calls == [8, 8, 4]


def test_modes_are_put_back():
    x, y = blobs(16)
    m = mlp()
    m.fit(x, y, verbose=0)
    assert m._training is None and all(l._training is None for _, l in m.named_layers())
    m.eval()
    m.fit(x, y, verbose=0, validation_data=(x, y))
    assert m._training is False


def test_regression_on_the_diabetes_data_against_numpy_gradient_descent():
    """Full-batch fit with SGD on the diabetes data is gradient descent on the mean squared
    error: numpy runs the same 60 steps from the same start."""
    (x, y), _ = hl.data.diabetes()
    x = ((x - x.mean(0)) / x.std(0)).astype(np.float32)
    t = ((y - y.mean()) / y.std()).astype(np.float32)[:, None]
    hl.manual_seed(0)
    m = hl.Sequential(L.Linear(1))
    m.compile([hl.Placeholder((1, 10))], optimizer=hl.opt.SGD(lr=0.1), loss="mse",
              metrics=["mae"])
    w = m.get_states()["0.W"].numpy().astype(np.float64).copy()
    b = m.get_states()["0.b"].numpy().astype(np.float64).copy()
    h = m.fit(x, t, epochs=60, batch_size=len(x), verbose=0)
    losses = []
    for _ in range(60):
        r = x @ w + b - t
        losses.append(np.mean(r ** 2))
        w -= 0.1 * 2 * x.T @ r / len(x)
        b -= 0.1 * 2 * r.mean(0)
    np.testing.assert_allclose(h.history["loss"], losses, rtol=1e-4)
    np.testing.assert_allclose(m.get_states()["0.W"].numpy(), w, rtol=1e-3, atol=1e-5)
    mse, mae = m.evaluate(x, t, verbose=0)
    r = x @ w + b - t
    np.testing.assert_allclose([mse, mae], [np.mean(r ** 2), np.mean(np.abs(r))], rtol=1e-4)


def test_tensors_in_and_a_saved_model_trains_on(tmp_path):
    """fit takes hl Tensors; a fitted model saved whole comes back compiled and fits on."""
    x, y = blobs(40)
    m = mlp()
    m.fit(hl.tensor(x), hl.tensor(y), epochs=2, verbose=0, validation_split=0.2)
    hl.save(m, tmp_path / "m.hl")
    back = hl.load(tmp_path / "m.hl")
    np.testing.assert_array_equal(back.predict(x, verbose=0), m.predict(x, verbose=0))
    assert back.history.history["val_loss"] == m.history.history["val_loss"]
    a = m.fit(x, y, epochs=1, shuffle=False, verbose=0).history
    b = back.fit(x, y, epochs=1, shuffle=False, verbose=0).history
    assert a == b and same_states(states(m), states(back))  # optimiser state came back too
