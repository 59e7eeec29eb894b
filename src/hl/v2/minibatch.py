"""v2's ``paddle.batch``: group a reader's samples into mini-batches."""
from .reader.decorator import _positive_int

__all__ = ["batch"]


def batch(reader, batch_size, drop_last=False):
    """A reader yielding lists of ``batch_size`` consecutive samples of ``reader``. The last
    list is shorter when the samples do not divide evenly; ``drop_last=True`` leaves it out."""
    batch_size = _positive_int(batch_size, "batch_size", "batch")

    def batch_reader():
        samples = []
        for sample in reader():
            samples.append(sample)
            if len(samples) == batch_size:
                yield samples
                samples = []
        if samples and not drop_last:
            yield samples
    return batch_reader
