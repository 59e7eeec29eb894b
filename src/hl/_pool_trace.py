"""Recording libcore's thread-pool loops (hl_pool_trace_start / _stop, hl_core.h) for
profiling: bench/pool_profile.py and the pool's tests. Each loop started outside a chunk while
recording is on gives one record: its start and end, the chunk function, its items and chunks,
and each slot's time inside its chunks (busy time beside the wall time says whether a thread
waited or worked slower)."""
import contextlib

import numpy as np

from . import _core

_ffi, _lib = _core.ffi, _core.lib
_NUMPY = {"int64_t": "i8", "uint64_t": "u8", "int32_t": "i4"}


def _region_dtype():
    """hl_pool_region as a numpy dtype, read from the C declaration (names, offsets, sizes)."""
    names, formats, offsets = [], [], []
    for name, field in _ffi.typeof("hl_pool_region").fields:
        t = field.type
        if t.kind == "array":
            formats.append((_NUMPY[t.item.cname], t.length))
        else:
            formats.append(_NUMPY[t.cname])
        names.append(name)
        offsets.append(field.offset)
    return np.dtype({"names": names, "formats": formats, "offsets": offsets,
                     "itemsize": _ffi.sizeof("hl_pool_region")})


REGION = _region_dtype()


@contextlib.contextmanager
def recording(capacity=1 << 16):
    """Records the pool's loops inside the block; yields a list that afterwards holds one
    numpy structured array (dtype REGION) of the records, in the order the loops started."""
    regions = np.zeros(capacity, dtype=REGION)
    out = []
    _core.check(_lib.hl_pool_trace_start(_ffi.cast("hl_pool_region *", regions.ctypes.data),
                                         capacity))
    try:
        yield out
    finally:
        n = _lib.hl_pool_trace_stop()
        out.append(regions[:n].copy())
