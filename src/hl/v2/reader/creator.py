"""v2's reader creators: readers over data that is already at hand (an array, a text file)."""
import numpy as np

from ... import errors

__all__ = ["np_array", "text_file"]


def np_array(x):
    """A reader yielding the rows of ``x`` (its slices along the first axis): the rows of a
    matrix, the values of a vector. Anything numpy can turn into an array is accepted. The
    rows are views of x, as in v2: copy them before changing them in place."""
    if not isinstance(x, np.ndarray):
        x = np.asarray(x)
    if x.ndim == 0:
        # v2 yielded the scalar and then failed iterating it; say so before any pass.
        raise errors.ValueError(f"np_array: a 0-d array ({x!r}) has no rows to yield; pass "
                                f"x.reshape(1) for a reader of one sample")

    def reader():
        return iter(x)
    return reader


def text_file(path):
    """A reader yielding the lines of the UTF-8 text file at ``path``, without their line
    ending. The file is opened on each call of the reader and closed when the pass ends,
    also when the consumer stops early."""
    def reader():
        with open(path, encoding="utf-8") as f:
            for line in f:
                yield line.rstrip("\n")
    return reader
