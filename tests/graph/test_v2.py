"""hl.v2's trainer in graph mode (trainer.SGD(..., use_graph=True)) equals eager for every v2
rule, with a schedule, clipping, L2 and L1 decay: bitwise, over 100 batches (the short last
batch of each pass gets its own plan)."""
import numpy as np
import pytest

import hl
import hl.v2 as paddle

from tests.v2.nets import classifier, classifier_samples, reader_of

RULES = {
    "momentum": lambda: paddle.optimizer.Momentum(
        momentum=0.9, learning_rate=0.01, learning_rate_schedule="poly",
        learning_rate_decay_a=0.1, learning_rate_decay_b=0.75,
        regularization=paddle.optimizer.L2Regularization(rate=1e-3),
        gradient_clipping_threshold=0.5),
    "adam": lambda: paddle.optimizer.Adam(learning_rate=1e-3),
    "adamax": lambda: paddle.optimizer.Adamax(learning_rate=1e-3),
    "adagrad": lambda: paddle.optimizer.AdaGrad(learning_rate=0.01),
    "decayed_adagrad": lambda: paddle.optimizer.DecayedAdaGrad(
        learning_rate=0.01, learning_rate_schedule="exp", learning_rate_decay_a=0.5,
        learning_rate_decay_b=64),
    "rmsprop": lambda: paddle.optimizer.RMSProp(
        learning_rate=0.01, regularization=paddle.optimizer.L2Regularization(rate=1e-3)),
    "adadelta": lambda: paddle.optimizer.AdaDelta(learning_rate=1.0),
}


def _l1_classifier():
    """classifier() with v2's L1 and L2 regularisers on the hidden layer's weights."""
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(4))
    h = paddle.layer.fc(input=x, size=8,
                        param_attr=paddle.attr.Param(l1_rate=1e-2, l2_rate=1e-2))
    prob = paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax())
    return paddle.layer.classification_cost(input=prob, label=label)


def _train(rule, graph, l1=False):
    hl.manual_seed(0)
    cost = _l1_classifier() if l1 else classifier()[3]
    params = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost, params, rule(), use_graph=graph)
    costs = []
    trainer.train(paddle.batch(reader_of(classifier_samples(44, seed=2)), 8), num_passes=17,
                  event_handler=lambda e: costs.append(e.cost)
                  if isinstance(e, paddle.event.EndIteration) else None)
    return costs, [params.get(n).copy() for n in params.names()], trainer  # names vary


@pytest.mark.parametrize("name", sorted(RULES))
def test_v2_rule_graph_equals_eager(name):
    ce, pe, _ = _train(RULES[name], False)
    cg, pg, trainer = _train(RULES[name], True)
    assert len(cg) == 17 * 6 and cg == ce
    for i, (a, b) in enumerate(zip(pg, pe)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {i}")
    s = trainer.network._graph_runner().stats()["v2 train"]
    assert s["plans"] == 2 and s["replayed"] == 17 * 6 - 4


@pytest.mark.parametrize("name", ["adagrad", "rmsprop"])
def test_v2_l1_regulariser_graph_equals_eager(name):
    ce, pe, _ = _train(RULES[name], False, l1=True)
    cg, pg, trainer = _train(RULES[name], True, l1=True)
    assert cg == ce
    for i, (a, b) in enumerate(zip(pg, pe)):
        np.testing.assert_array_equal(a, b, err_msg=f"parameter {i}")
    assert trainer.network._graph_runner().stats()["v2 train"]["replayed"] > 90
