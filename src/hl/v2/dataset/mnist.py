"""v2's ``paddle.dataset.mnist``, read from a folder holding MNIST's four IDX files.

v2 downloaded the files; hl never touches the network, so the folder comes from the ``path``
argument or, for scripts written for v2 (``mnist.train()``), the environment variable
HL_MNIST_DIR. Samples are ``(image, label)``: image a float32 vector of 784 pixels scaled
from 0..255 to [-1, 1] (``pixel / 255 * 2 - 1``, as v2 did), label an int 0..9.
"""
import os

from ... import errors
# The private helpers keep one list of MNIST's file names and one set of checks for the
# files' contents, shared with hl.data.mnist.
from ...data import idx

__all__ = ["train", "test", "ENV_VAR"]

ENV_VAR = "HL_MNIST_DIR"
_FILES = ", ".join(name for pair in idx._MNIST.values() for name in pair)


def train(path=None):
    """A reader of MNIST's 60000 training samples, from the folder ``path`` (else
    $HL_MNIST_DIR)."""
    return _reader_creator(path, "train")


def test(path=None):
    """A reader of MNIST's 10000 test samples, from the folder ``path`` (else
    $HL_MNIST_DIR)."""
    return _reader_creator(path, "test")


def _folder(path):
    """The folder to read, checked now so that a wrong one fails where train() is called."""
    if path is None:
        path = os.environ.get(ENV_VAR) or None
        source = f"the environment variable {ENV_VAR}"
    else:
        source = "the path argument"
    fix = (f"pass mnist.train(path=FOLDER) or set the environment variable {ENV_VAR} to a "
           f"folder holding {_FILES} (each may be gzipped); hl does not download data")
    if path is None:
        raise errors.ValueError(f"mnist: no folder given: {fix}")
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise errors.ValueError(f"mnist: {path!r} (from {source}) is not a folder: {fix}")
    return path, source, fix


def _reader_creator(path, part):
    folder, source, fix = _folder(path)
    for name in idx._MNIST[part]:
        try:
            idx._find(folder, name)
        except FileNotFoundError as e:
            raise errors.ValueError(f"{e} (folder from {source}): {fix}") from None
    loaded = []

    def reader():
        # Read on the first pass and kept: each pass then costs no I/O, as a v2 script that
        # loops over epochs expects.
        if not loaded:
            images, labels = idx._load_pair(folder, part, flat=True)
            images = images * 2 - 1  # [0, 1] -> [-1, 1], staying float32
            # Samples are views of this array: read-only, so that changing one in place
            # cannot change what the next pass yields.
            images.flags.writeable = False
            loaded.append((images, labels.tolist()))
        images, labels = loaded[0]
        return zip(images, labels)
    return reader
