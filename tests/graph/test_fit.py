"""fit / evaluate / predict / train_on_batch in graph mode equal eager: Keras-compiled models,
callbacks that set the learning rate, the short last batch (its own plan), validation."""
import numpy as np
import pytest

import hl


def _model(graph, optimizer):
    hl.manual_seed(0)
    m = hl.Sequential([hl.layers.Linear(16), hl.layers.ReLU(), hl.layers.Linear(3)])
    m.compile(optimizer=optimizer(), loss="cross_entropy", metrics=["accuracy"],
              jit_compile=graph)
    return m


@pytest.mark.parametrize("callback", [
    lambda: hl.callbacks.LearningRateScheduler(lambda epoch, lr: lr * 0.5),
    lambda: hl.callbacks.ReduceLROnPlateau(monitor="loss", factor=0.5, patience=0,
                                           min_delta=10.0),
])
def test_fit_with_lr_callbacks_equals_eager(callback, rng):
    x = rng.standard_normal((100, 10)).astype(np.float32)  # 100 = 3 * 32 + 4: a short batch
    y = rng.integers(0, 3, 100)
    runs = []
    for graph in (False, True):
        m = _model(graph, lambda: hl.opt.Adam(lr=0.02))
        h = m.fit(x, y, batch_size=32, epochs=4, verbose=0, shuffle=True,
                  validation_data=(x[:40], y[:40]), callbacks=[callback()])
        runs.append((m, h.history, m.evaluate(x, y, verbose=0), m.predict(x, verbose=0),
                     m.train_on_batch(x[:32], y[:32])))
    (me, he, ee, pe, te), (mg, hg, eg, pg, tg) = runs
    assert hg == he
    assert eg == ee and tg == te
    np.testing.assert_array_equal(pg, pe)
    assert hg["learning_rate"][-1] < 0.02  # the callback did change the rate
    s = mg._graph_runner().stats()
    # two signatures (32 and the last 4): each eager once, recorded once, then replayed;
    # 16 fit steps and train_on_batch
    assert s["fit"]["plans"] == 2 and s["fit"]["replayed"] == 17 - 4
    assert s["evaluate"]["replayed"] > 0 and s["predict"]["replayed"] > 0


def test_fit_leaves_out_the_update_of_a_nonfinite_loss_as_eager(rng):
    """The forward and the update are separate plans: a NaN loss raises before its update,
    in graph mode as eagerly, and the weights are those of the last finite step."""
    x = rng.standard_normal((96, 10)).astype(np.float32)
    y = rng.integers(0, 3, 96)
    x[90] = np.nan  # the last batch (after 5 finite ones: eager, recorded, 3 replays)
    results = []
    for graph in (False, True):
        m = _model(graph, lambda: hl.opt.SGD(lr=0.05, momentum=0.9))
        with pytest.raises(hl.errors.NonFiniteLossError):
            m.fit(x, y, batch_size=16, epochs=1, verbose=0, shuffle=False)
        results.append(({k: v.numpy().copy() for k, v in m.get_params().items()},
                        m.optim.step_count))
    (pe, ne), (pg, ng) = results
    assert ne == ng == 5
    for k in pe:
        np.testing.assert_array_equal(pg[k], pe[k], err_msg=k)
