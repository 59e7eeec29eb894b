"""trainer.SGD: v2's events, the update against numpy, test(), feeding, bad input."""
import numpy as np
import pytest

import hl
import hl.v2 as paddle
from hl.v2.graph import data_layers
from .nets import (classifier, classifier_samples, reader_of, regression, regression_samples,
                   snapshot)


def test_events_fire_in_v2s_order():
    _, _, _, cost = regression()
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    seen = []

    def handler(e):
        seen.append((type(e).__name__, e.pass_id, getattr(e, "batch_id", None)))
    trainer.train(paddle.batch(reader_of(regression_samples(7)), 3), num_passes=2,
                  event_handler=handler)
    expected = []
    for p in range(2):
        expected.append(("BeginPass", p, None))
        for b in range(3):
            expected += [("BeginIteration", p, b), ("EndForwardBackward", p, b),
                         ("EndIteration", p, b)]
        expected.append(("EndPass", p, None))
    assert seen == expected


def numpy_sgd(w, b, batches, lr):
    """Plain SGD on the summed squared error, as v2's Momentum(momentum=0) does; returns the
    final weights and each batch's cost per sample (before its update)."""
    costs = []
    for batch in batches:
        x = np.stack([s[0] for s in batch]).astype(np.float64)
        y = np.stack([s[1] for s in batch]).astype(np.float64)
        r = x @ w + b - y
        costs.append(float((r ** 2).sum() / len(batch)))
        w = w - lr * 2 * x.T @ r
        b = b - lr * 2 * r.sum(axis=0, keepdims=True)
    return w, b, costs


def test_momentum_zero_is_sgd_on_the_summed_cost_as_numpy():
    _, _, _, cost = regression()
    params = paddle.parameters.create(cost)
    w0, b0 = params.get("___fc_layer_0__.w0"), params.get("___fc_layer_0__.wbias")
    assert w0.shape == (3, 1) and b0.shape == (1, 1)
    samples = regression_samples(10, seed=3)
    lr = 0.01
    trainer = paddle.trainer.SGD(cost, params,
                                 paddle.optimizer.Momentum(momentum=0, learning_rate=lr))
    costs = []
    trainer.train(paddle.batch(reader_of(samples), 4), num_passes=2,
                  event_handler=lambda e: costs.append(e.cost)
                  if isinstance(e, paddle.event.EndIteration) else None)
    batches = [samples[0:4], samples[4:8], samples[8:10]] * 2
    w, b, expected = numpy_sgd(w0.astype(np.float64), b0.astype(np.float64), batches, lr)
    np.testing.assert_allclose(costs, expected, rtol=1e-5)
    np.testing.assert_allclose(params.get("___fc_layer_0__.w0"), w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(params.get("___fc_layer_0__.wbias"), b, rtol=1e-5, atol=1e-6)


def forward_numpy(params, xs):
    h = np.tanh(xs @ params.get("___fc_layer_0__.w0") + params.get("___fc_layer_0__.wbias"))
    z = h @ params.get("___fc_layer_1__.w0") + params.get("___fc_layer_1__.wbias")
    z = z - z.max(axis=1, keepdims=True)
    return np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)


def test_test_gives_the_cost_per_sample_and_the_error_rate_as_numpy():
    _, _, _, cost = classifier()
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    samples = classifier_samples(50, seed=1)
    result = trainer.test(paddle.batch(reader_of(samples), 16))
    xs = np.stack([s[0] for s in samples])
    ys = np.array([s[1] for s in samples])
    p = forward_numpy(params, xs)
    np.testing.assert_allclose(result.cost, -np.log(p[np.arange(50), ys]).mean(), rtol=1e-5)
    assert result.metrics == {
        "classification_error_evaluator": pytest.approx(np.mean(p.argmax(1) != ys))}


def test_end_pass_metrics_cover_the_pass_and_end_iteration_the_batch():
    _, _, _, cost = classifier()
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.0))
    samples = classifier_samples(30, seed=2)
    batch_errors, pass_errors = [], []

    def handler(e):
        if isinstance(e, paddle.event.EndIteration):
            batch_errors.append(e.metrics["classification_error_evaluator"])
        if isinstance(e, paddle.event.EndPass):
            pass_errors.append(e.metrics["classification_error_evaluator"])
    trainer.train(paddle.batch(reader_of(samples), 10), num_passes=1, event_handler=handler)
    # learning rate 0: the weights stay, so the pass's error is the mean of the batches'
    expected = trainer.test(paddle.batch(reader_of(samples), 30)).metrics
    assert pass_errors[0] == pytest.approx(expected["classification_error_evaluator"])
    assert np.mean(batch_errors) == pytest.approx(pass_errors[0])


def test_default_feeding_is_a_depth_first_walk_and_lists_or_dicts_reorder():
    y = paddle.layer.data(name="target", type=paddle.data_type.dense_vector(1))
    x = paddle.layer.data(name="features", type=paddle.data_type.dense_vector(3))
    pred = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    cost = paddle.layer.square_error_cost(input=pred, label=y)
    assert [d.name for d in data_layers(cost)] == ["features", "target"]
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=0.0))
    samples = regression_samples(8)
    swapped = [(t, f) for f, t in samples]
    default = trainer.test(paddle.batch(reader_of(samples), 4)).cost
    by_list = trainer.test(paddle.batch(reader_of(swapped), 4), feeding=["target", "features"])
    by_dict = trainer.test(paddle.batch(reader_of(swapped), 4),
                           feeding={"features": 1, "target": 0})
    assert default == pytest.approx(by_list.cost) == pytest.approx(by_dict.cost)


def test_test_inside_the_event_handler_leaves_training_mode_alone():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(4))
    h = paddle.layer.fc(input=x, size=8, layer_attr=paddle.attr.Extra(drop_rate=0.5))
    prob = paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=prob, label=label)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    modes = []

    def handler(e):
        if isinstance(e, paddle.event.EndIteration):
            trainer.test(paddle.batch(reader_of(classifier_samples(8)), 4))
        if isinstance(e, paddle.event.BeginIteration):
            modes.append(trainer.network.training)
    trainer.train(paddle.batch(reader_of(classifier_samples(12)), 4), num_passes=1,
                  event_handler=handler)
    assert modes == [True, True, True]


# ---- infer ---------------------------------------------------------------------------

def test_infer_runs_no_cost_and_reads_no_label():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    samples = classifier_samples(5)
    inference = paddle.Inference(prob, params)
    out = inference.infer([(s[0],) for s in samples])  # no label in the samples
    assert out.shape == (5, 4) and out.dtype == np.float32
    np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-5)
    ran = inference.network.last_ran
    assert "label" not in ran and not any(op.is_cost for op in inference.network.operators)
    assert ran == [op.name for op in inference.network.operators]
    assert [d.name for d in inference.network.data_layers] == ["x"]
    # full (x, label) samples work too: the extra field is not read
    np.testing.assert_allclose(paddle.infer(output_layer=prob, parameters=params,
                                            input=samples), out, rtol=1e-6)


def test_infer_fields_and_several_layers():
    x, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    ids = paddle.layer.max_id(input=prob)
    samples = [(s[0],) for s in classifier_samples(6)]
    values = paddle.infer(output_layer=prob, parameters=params, input=samples)
    got = paddle.infer(output_layer=ids, parameters=params, input=samples, field="id")
    assert got.dtype == np.int64 and got.shape == (6,)
    np.testing.assert_array_equal(got, values.argmax(axis=1))
    both = paddle.infer(output_layer=[prob, ids], parameters=params, input=samples,
                        field=["value"])
    assert len(both) == 2 and both[0].shape == (6, 4)
    with pytest.raises(hl.errors.ValueError, match="max_id"):
        paddle.infer(output_layer=prob, parameters=params, input=samples, field="id")


# ---- bad input: a clear error, and no parameter changed -------------------------------

def _trainer():
    _, _, _, cost = classifier()
    params = paddle.parameters.create(cost)
    return params, paddle.trainer.SGD(cost, params,
                                      paddle.optimizer.Momentum(learning_rate=0.1))


@pytest.mark.parametrize("bad, error, needles", [
    ((np.zeros(6, np.float32),), hl.errors.ValueError, ["sample 3", "fields"]),
    ((np.zeros(5, np.float32), 1), hl.errors.ShapeError, ["sample 3", "'x'", "expected 6"]),
    ((np.zeros(6, np.float32), 4), hl.errors.IndexError, ["sample 3", "'label'", "[0, 4)"]),
    ((np.zeros(6, np.float32), 1.5), hl.errors.ValueError, ["sample 3", "'label'"]),
])
def test_a_bad_sample_in_the_last_batch_stops_training_before_any_update(bad, error,
                                                                          needles):
    params, trainer = _trainer()
    before = snapshot(params)
    samples = classifier_samples(16) + classifier_samples(3) + [bad]
    with pytest.raises(error) as info:
        trainer.train(paddle.batch(reader_of(samples), 4), num_passes=2)
    for needle in needles:
        assert needle in str(info.value)
    assert "batch 4" in str(info.value)
    after = snapshot(params)
    assert all(np.array_equal(before[n], after[n]) for n in before)


def test_feeding_a_name_that_is_no_data_layer():
    params, trainer = _trainer()
    with pytest.raises(hl.errors.ValueError, match="imag"):
        trainer.train(paddle.batch(reader_of(classifier_samples(4)), 2),
                      feeding={"x": 0, "label": 1, "imag": 2})
    with pytest.raises(hl.errors.ValueError, match="no position for the data layers"):
        trainer.train(paddle.batch(reader_of(classifier_samples(4)), 2), feeding={"x": 0})


def test_a_cost_that_is_no_cost_layer():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    with pytest.raises(hl.errors.ValueError, match="not a cost layer"):
        paddle.trainer.SGD(prob, params, paddle.optimizer.Momentum())


def test_classification_cost_needs_a_softmax_input():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(3))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(2))
    logits = paddle.layer.fc(input=x, size=2, act=paddle.activation.Linear())
    with pytest.raises(hl.errors.ValueError, match="Softmax"):
        paddle.layer.classification_cost(input=logits, label=label)


def test_a_reader_that_is_not_batched():
    params, trainer = _trainer()
    with pytest.raises(hl.errors.ValueError, match="paddle.batch"):
        trainer.train(reader_of(classifier_samples(4)))


def test_init_reports_unknown_options_once():
    import hl.v2 as v2
    v2._warned = False
    with pytest.warns(UserWarning, match="log_period"):
        paddle.init(use_gpu=False, trainer_count=1, log_period=10, seed=1)
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        paddle.init(log_period=10)


def test_a_non_finite_cost_stops_training_with_the_pass_and_batch():
    _, _, _, cost = regression()
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3))
    samples = regression_samples(8)
    samples[5] = (np.array([np.inf, 0, 0], np.float32), samples[5][1])
    before = snapshot(params)
    with pytest.raises(hl.errors.NonFiniteLossError, match="pass 0, batch 1"):
        trainer.train(paddle.batch(reader_of(samples), 4), num_passes=1)
    after = snapshot(params)
    assert not all(np.array_equal(before[n], after[n]) for n in before)  # batch 0 applied
    assert all(np.isfinite(after[n]).all() for n in after)


def test_extra_layers_run_beside_the_cost_and_train_unchanged():
    _, _, prob, cost = classifier()
    ids = paddle.layer.max_id(input=prob)
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(learning_rate=1e-3),
                                 extra_layers=[ids])
    assert ids.name in [op.name for op in trainer.network.operators]
    result = trainer.test(paddle.batch(reader_of(classifier_samples(8)), 4))
    trainer.train(paddle.batch(reader_of(classifier_samples(8)), 4), num_passes=1)
    assert np.isfinite(result.cost)
