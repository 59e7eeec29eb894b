"""Bad input to fit: a clear hl error before any weight changes."""
import numpy as np
import pytest

import hl

from .models import blobs, mlp, same_states, states


def _unchanged(m, before):
    assert same_states(before, states(m)), "a weight changed before the error"


@pytest.mark.parametrize("kw, err, match", [
    (dict(y=np.zeros(39, np.int64)), hl.errors.ShapeError, r"x has 40, y has 39"),
    (dict(sample_weight=np.ones(41)), hl.errors.ShapeError, r"sample_weight has 41"),
    (dict(batch_size=0), hl.errors.ValueError, r"batch_size must be an integer >= 1, got 0"),
    (dict(batch_size=2.5), hl.errors.ValueError, r"batch_size"),
    (dict(epochs=-1), hl.errors.ValueError, r"epochs must be an integer >= 0"),
    (dict(verbose=3), hl.errors.ValueError, r"verbose must be 0, 1, 2 or 'auto'"),
    (dict(validation_split=1.5), hl.errors.ValueError, r"validation_split must be in \(0, 1\)"),
    (dict(class_weight={0: 1.0, 1: 2.0}), hl.errors.ValueError, r"no weight for the classes \[2\]"),
    (dict(y=None), hl.errors.ValueError, r"y is missing"),
    (dict(validation_data=(np.zeros((5, 5), np.float32),)), hl.errors.ValueError,
     r"validation_data must be"),
])
def test_argument_errors(kw, err, match):
    x, y = blobs(40)
    m = mlp()
    before = states(m)
    args = dict(y=y, verbose=0)
    args.update(kw)
    with pytest.raises(err, match=match):
        m.fit(x, **args)
    _unchanged(m, before)


def test_empty_data():
    m = mlp()
    with pytest.raises(hl.errors.ValueError, match="empty"):
        m.fit(np.zeros((0, 5), np.float32), np.zeros(0, np.int64), verbose=0)
    with pytest.raises(hl.errors.ValueError, match="no batches"):
        m.fit(iter([]), verbose=0)


def test_a_label_out_of_range_in_the_last_batch():
    """The bad label is in the last batch: still nothing trains."""
    x, y = blobs(40)
    y = y.copy()
    y[37] = 3
    m = mlp()
    before = states(m)
    with pytest.raises(hl.errors.IndexError,
                       match=r"must be in \[0, 3\) for the model's 3 outputs.*y\[37\] = 3"):
        m.fit(x, y, batch_size=8, verbose=0)
    _unchanged(m, before)
    yv = y[:10].copy()
    yv[2] = -1
    with pytest.raises(hl.errors.IndexError, match=r"the validation y\[2\] = -1"):
        m.fit(x[:30], y[:30], validation_data=(x[:10], yv), verbose=0)
    _unchanged(m, before)


def test_a_wrong_feature_shape_for_a_compiled_model():
    x, y = blobs(40)
    m = mlp()
    before = states(m)
    with pytest.raises(hl.errors.ShapeError,
                       match=r"first batch of x, of shape \(32, 7\), does not fit the model "
                             r"\(it was compiled for inputs of shape \(1, 5\)\)"):
        m.fit(np.zeros((40, 7), np.float32), y, verbose=0)
    _unchanged(m, before)


def test_targets_that_do_not_fit_the_output():
    x, y = blobs(40)
    m = mlp(loss="mse")
    before = states(m)
    with pytest.raises(hl.errors.ShapeError, match=r"targets do not fit the model's output "
                                                   r"\(32, 3\) under the loss MSELoss"):
        m.fit(x, y.astype(np.float32), verbose=0)
    _unchanged(m, before)


def test_not_compiled():
    m = hl.Sequential(hl.layers.Linear(3))
    with pytest.raises(hl.errors.ValueError, match=r"has no optim and no loss_fn; compile"):
        m.fit(*blobs(8), verbose=0)


def test_nan_loss_raises_before_the_update():
    x, y = blobs(40)
    x = x.copy()
    x[20] = np.nan  # the third batch of 8
    m = mlp()
    seen = []
    cb = hl.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(states(m)))
    with pytest.raises(hl.errors.NonFiniteLossError,
                       match=r"loss became nan at epoch 1, batch 2; its update was not applied"):
        m.fit(x, y, batch_size=8, shuffle=False, verbose=0, callbacks=[cb])
    assert same_states(seen[1], states(m))  # the weights after batch 1


def test_terminate_on_nan_stops_with_the_weights_before_it(capsys):
    x, y = blobs(40)
    x = x.copy()
    x[20] = np.inf
    m = mlp()
    seen = []
    cb = hl.callbacks.LambdaCallback(on_train_batch_end=lambda b, logs: seen.append(states(m)))
    h = m.fit(x, y, batch_size=8, epochs=3, shuffle=False, verbose=0,
              callbacks=[cb, hl.callbacks.TerminateOnNaN()])
    assert "Batch 2: Invalid loss, terminating training" in capsys.readouterr().out
    assert len(seen) == 3 and len(h.history["loss"]) == 1 and np.isnan(h.history["loss"][0])
    assert same_states(seen[1], states(m))


def test_probability_outputs_are_warned_about():
    class Soft(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = hl.layers.Linear(3)

        def forward(self, x):
            return self.fc(x).softmax(axis=1)

    m = Soft().compile(optimizer="sgd", loss="sparse_categorical_crossentropy")
    with pytest.warns(UserWarning, match="look like probabilities"):
        m.fit(*blobs(16), verbose=0)


def test_bad_batches_from_a_generator():
    x, y = blobs(16)
    with pytest.raises(hl.errors.ValueError, match=r"batch 0 of the data is a tuple of 1 items"):
        mlp().fit(iter([(x,)]), verbose=0)
    with pytest.raises(hl.errors.ValueError, match="y and sample_weight must come inside"):
        mlp().fit(iter([(x, y)]), y, verbose=0)
