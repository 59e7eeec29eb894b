"""hl.v2.dataset: v2's ``paddle.dataset``, without downloads.

Each module offers ``train()`` and ``test()``, returning readers::

    mnist        MNIST from a local folder (path argument or $HL_MNIST_DIR)
    uci_housing  Boston housing from a local housing.data (path argument or $HL_UCI_HOUSING)
    digits       hl's shipped 8x8 digits (size=28 for MNIST-sized images)
    diabetes     hl's shipped diabetes regression set

v2's other data sets (cifar, imdb, imikolov, movielens, conll05, wmt14, ...) were downloaded
from the internet; hl never downloads, and using one says so.
"""
from . import diabetes, digits, mnist, uci_housing

__all__ = ["mnist", "uci_housing", "digits", "diabetes"]

_V2_ONLY = {"cifar", "imdb", "imikolov", "movielens", "conll05", "sentiment", "wmt14",
            "wmt16", "mq2007", "flowers", "voc2012", "common"}


def __getattr__(name):
    if name in _V2_ONLY:
        raise AttributeError(
            f"hl.v2.dataset has no {name}: v2 downloaded it from the internet and hl never "
            f"downloads. Available: {', '.join(__all__)}; or write a reader over your own "
            f"copy of the files (a function yielding sample tuples)")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
