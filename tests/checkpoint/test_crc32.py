"""hl's CRC-32 (libcore/src/crc32.c) against zlib's, the reference every zip reader uses."""
import zlib

import numpy as np

from hl import _core


def test_every_short_length_and_alignment(rng):
    data = rng.bytes(4096)
    for offset in range(16):
        for n in range(0, 300):
            chunk = memoryview(data)[offset:offset + n]
            assert _core.crc32(chunk) == zlib.crc32(chunk), (offset, n)


def test_long_buffers_and_continuation(rng):
    for n in (1 << 16, (1 << 20) + 13, 5_000_003):
        data = rng.bytes(n)
        assert _core.crc32(data) == zlib.crc32(data)
        cut = n // 3 + 7  # a running checksum over pieces equals the whole's
        assert _core.crc32(data[cut:], _core.crc32(data[:cut])) == zlib.crc32(data)


def test_numpy_arrays_are_read_in_place(rng):
    arr = rng.standard_normal((300, 70)).astype(np.float32)
    assert _core.crc32(arr) == zlib.crc32(arr.tobytes())


def test_combine(rng):
    for la, lb in [(0, 0), (5, 0), (0, 5), (1, 1), (100, 1000), (70_001, 123_457)]:
        a, b = rng.bytes(la), rng.bytes(lb)
        assert _core.crc32_combine(zlib.crc32(a), zlib.crc32(b), lb) == zlib.crc32(a + b)
