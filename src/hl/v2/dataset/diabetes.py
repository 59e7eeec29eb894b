"""Diabetes progression shipped with hl (hl.data.diabetes), as a v2 data set.

Not one of v2's data sets: a small regression set that needs no file, in the shape of
uci_housing's samples: ``(features float32[10], target float32[1])``. The features are
standardised with the training rows' mean and standard deviation (on both splits, so nothing
of the test rows leaks in); the target is the raw progression score unless
``standardize_target=True``. The split is hl.data.diabetes' (354 / 88 rows).
"""
from ...data import diabetes as _diabetes

__all__ = ["train", "test"]


def train(standardize_target=False):
    """A reader of the 354 training rows."""
    return _reader_creator("train", standardize_target)


def test(standardize_target=False):
    """A reader of the 88 test rows."""
    return _reader_creator("test", standardize_target)


def _reader_creator(split, standardize_target):
    features, target = _diabetes(split=split, standardize=True,
                                 standardize_target=standardize_target)
    target = target.reshape(-1, 1)
    for array in (features, target):
        array.flags.writeable = False  # samples are views: one pass cannot change the next

    def reader():
        return zip(features, target)
    return reader
