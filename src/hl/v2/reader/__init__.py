"""hl.v2.reader: v2's readers (``paddle.reader``).

A reader is a callable with no arguments that returns an iterator of samples; decorators
(shuffle, buffered, compose...) wrap readers into new readers, and ``creator`` makes readers
from arrays and text files::

    reader = paddle.reader.shuffle(paddle.reader.creator.np_array(x), buf_size=500)
    for sample in reader():
        ...
"""
from . import creator
from .decorator import (ComposeNotAligned, buffered, cache, chain, compose, firstn,
                        map_readers, shuffle, xmap_readers)

__all__ = ["creator", "map_readers", "buffered", "compose", "chain", "shuffle",
           "ComposeNotAligned", "firstn", "xmap_readers", "cache"]
