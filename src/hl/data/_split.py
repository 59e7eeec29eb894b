"""The fixed train/test split of the shipped data sets.

Rows are ranked by a multiplicative hash of their row number, ``(i * 2654435761) % 2**32``
(Knuth's constant): a scrambled order that depends on nothing else (no random generator,
whose streams may change between numpy versions). The rows of lowest rank go to the test
set. Both sides keep the file's order.
"""
import numpy as np

_KNUTH = 2654435761


def hash_rank(n):
    """Row numbers 0..n-1 sorted by their hash: a fixed pseudo-random permutation."""
    keys = (np.arange(n, dtype=np.uint64) * np.uint64(_KNUTH)) % np.uint64(2 ** 32)
    return np.argsort(keys, kind="stable")


def split_indices(n, test_fraction, labels=None):
    """(train rows, test rows), each sorted. With labels, every class gives
    round(test_fraction * its size) rows to the test set (a stratified split)."""
    order = hash_rank(n)
    if labels is None:
        test = order[:int(round(test_fraction * n))]
    else:
        test = []
        ranked = labels[order]
        for c in np.unique(labels):
            rows = order[ranked == c]
            test.append(rows[:int(round(test_fraction * len(rows)))])
        test = np.concatenate(test)
    is_test = np.zeros(n, bool)
    is_test[test] = True
    return np.flatnonzero(~is_test), np.flatnonzero(is_test)


def select(split, train, test, all_=None):
    """What a data-set function returns for its `split` argument."""
    if split is None:
        return train, test
    if split == "train":
        return train
    if split == "test":
        return test
    if split == "all" and all_ is not None:
        return all_
    from .. import errors
    raise errors.ValueError(f"split must be None (both), 'train', 'test' or 'all', got "
                            f"{split!r}")
