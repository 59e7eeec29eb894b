"""hl.metrics against numpy: accuracy and top-k accuracy with integer and one-hot labels,
spatial outputs, ties, the stateful classes over several batches."""
import numpy as np
import pytest

import hl
from hl import metrics


def _data(n, c, seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, c)).astype(np.float32), rng.integers(0, c, size=n)


def _top_k_numpy(scores, labels, k):
    hits = 0
    for row, label in zip(scores, labels):
        hits += label in np.argsort(-row, kind="stable")[:k]
    return hits / len(labels)


@pytest.mark.parametrize("n, c", [(1, 2), (10, 3), (64, 10)])
def test_accuracy(n, c):
    scores, labels = _data(n, c, n)
    want = float((scores.argmax(1) == labels).mean())
    got = metrics.accuracy(hl.tensor(scores), hl.tensor(labels))
    assert type(got) is float and got == pytest.approx(want, abs=1e-12)
    assert metrics.accuracy(scores, np.eye(c)[labels]) == pytest.approx(want, abs=1e-12)
    probs = hl.softmax(hl.tensor(scores), 1)  # probabilities rank classes the same
    assert metrics.accuracy(probs, labels) == pytest.approx(want, abs=1e-12)


def test_accuracy_spatial():
    rng = np.random.default_rng(0)
    scores = rng.standard_normal((2, 4, 3, 5))
    labels = rng.integers(0, 4, size=(2, 3, 5))
    assert metrics.accuracy(scores, labels) == pytest.approx(
        float((scores.argmax(1) == labels).mean()))


@pytest.mark.parametrize("k", [1, 2, 5])
def test_top_k_accuracy(k):
    scores, labels = _data(50, 7, k)
    got = metrics.top_k_accuracy(hl.tensor(scores), labels, k=k)
    assert type(got) is float and got == pytest.approx(_top_k_numpy(scores, labels, k))
    assert metrics.top_k_accuracy(scores, np.eye(7)[labels], k=k) == pytest.approx(got)


def test_top_k_ties_count_for_the_label_and_k_at_least_classes():
    scores = np.array([[1.0, 1.0, 0.0], [0.0, 2.0, 2.0]])
    assert metrics.top_k_accuracy(scores, [1, 0], k=1) == 0.5  # tie at the top counts
    assert metrics.top_k_accuracy(scores, [2, 0], k=10) == 1.0


def test_stateful_classes_accumulate():
    acc, top3 = metrics.Accuracy(), metrics.TopKAccuracy(k=3)
    assert acc.result() == 0.0
    all_scores, all_labels = [], []
    for seed in range(4):
        scores, labels = _data(8 + seed, 6, seed)
        acc.update(hl.tensor(scores), labels)
        r = top3(scores, labels)  # calling updates and returns the result so far
        all_scores.append(scores)
        all_labels.append(labels)
    scores, labels = np.concatenate(all_scores), np.concatenate(all_labels)
    assert acc.result() == pytest.approx(float((scores.argmax(1) == labels).mean()))
    assert r == top3.result() == pytest.approx(_top_k_numpy(scores, labels, 3))
    assert acc.count == len(labels)
    acc.reset()
    assert acc.result() == 0.0 and acc.count == 0


def test_bad_arguments():
    with pytest.raises(hl.errors.ShapeError, match="accuracy.*labels"):
        metrics.accuracy(np.zeros((4, 3)), np.zeros(5, np.int64))
    with pytest.raises(hl.errors.ShapeError, match="accuracy.*scores"):
        metrics.accuracy(np.zeros(4), np.zeros(4, np.int64))
    with pytest.raises(hl.errors.ValueError, match="top_k_accuracy.*k"):
        metrics.top_k_accuracy(np.zeros((4, 3)), np.zeros(4, np.int64), k=0)
    with pytest.raises(hl.errors.IndexError, match="top_k_accuracy.*labels"):
        metrics.top_k_accuracy(np.zeros((2, 3)), np.array([0, 3]), k=1)
    with pytest.raises(hl.errors.ValueError, match="TopKAccuracy"):
        metrics.TopKAccuracy(k=-1)
