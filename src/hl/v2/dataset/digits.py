"""Handwritten digits shipped with hl (hl.data.digits), as a v2 data set.

Not one of v2's data sets: a small MNIST-like one that needs no file, for running v2 MNIST
scripts anywhere. Samples are ``(pixels, label)``: pixels a float32 vector of size*size
values scaled from 0..16 to [-1, 1] (as v2 scaled MNIST's 0..255), label an int 0..9.
``size=28`` resizes the 8x8 images to MNIST's 28x28, so a script's 784-input network runs
unchanged. The train/test split is hl.data.digits' (1438 / 359 images).
"""
from ...data import digits as _digits

__all__ = ["train", "test"]


def train(size=8):
    """A reader of the 1438 training images, each resized to size x size."""
    return _reader_creator("train", size)


def test(size=8):
    """A reader of the 359 test images, each resized to size x size."""
    return _reader_creator("test", size)


def _reader_creator(split, size):
    pixels, labels = _digits(split=split, flat=True, size=size)
    pixels = pixels * 2 - 1  # [0, 1] -> [-1, 1], staying float32
    pixels.flags.writeable = False  # samples are views: one pass cannot change the next
    labels = labels.tolist()

    def reader():
        return zip(pixels, labels)
    return reader
