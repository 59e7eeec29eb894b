"""hl.data: the data sets shipped with hl, MNIST's file reader, and a batching loader.

    (x_train, y_train), (x_test, y_test) = hl.data.digits(upsample=28)
    for x, y in hl.data.DataLoader(x_train, y_train, batch_size=64, shuffle=True, seed=0):
        ...

The shipped files and their licences are listed in hl/data/README.md.
"""
from .datasets import diabetes, digits
from .idx import mnist, read_idx
from .loader import DataLoader

__all__ = ["digits", "diabetes", "mnist", "read_idx", "DataLoader"]
