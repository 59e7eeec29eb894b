"""Small v2 graphs and data for the tests."""
import numpy as np

import hl.v2 as paddle


def regression(dim=3):
    """(x, y, prediction, cost): a linear fc and square_error_cost."""
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(dim))
    y = paddle.layer.data(name="y", type=paddle.data_type.dense_vector(1))
    pred = paddle.layer.fc(input=x, size=1, act=paddle.activation.Linear())
    return x, y, pred, paddle.layer.square_error_cost(input=pred, label=y)


def regression_samples(n, dim=3, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(n, dim)).astype(np.float32)
    ys = (xs @ rng.normal(size=(dim, 1)) + 0.1 * rng.normal(size=(n, 1))).astype(np.float32)
    return [(xs[i], ys[i]) for i in range(n)]


def classifier(dim=6, classes=4, hidden=8):
    """(x, label, probabilities, cost): fc-tanh, fc-softmax, classification_cost."""
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(dim))
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(classes))
    h = paddle.layer.fc(input=x, size=hidden)
    prob = paddle.layer.fc(input=h, size=classes, act=paddle.activation.Softmax())
    return x, label, prob, paddle.layer.classification_cost(input=prob, label=label)


def classifier_samples(n, dim=6, classes=4, seed=0):
    rng = np.random.default_rng(seed)
    xs = rng.normal(size=(n, dim)).astype(np.float32)
    ys = rng.integers(0, classes, size=n)
    return [(xs[i], int(ys[i])) for i in range(n)]


def reader_of(samples):
    return lambda: iter(samples)


def snapshot(parameters):
    return {n: parameters.get(n).copy() for n in parameters.names()}
