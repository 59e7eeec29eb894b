"""Recording libcore's thread-pool loops (hl_pool_trace_start / _stop, hl_core.h) for
profiling: bench/pool_profile.py and the pool's tests. Each loop started outside a chunk while
recording is on gives one record: its start and end, the chunk function, its items and chunks,
and each slot's time inside its chunks (busy time beside the wall time says whether a thread
waited or worked slower)."""
import contextlib

import numpy as np

from . import _core

REGION = _core.pool_region_dtype()


@contextlib.contextmanager
def recording(capacity=1 << 16):
    """Records the pool's loops inside the block; yields a list that afterwards holds one
    numpy structured array (dtype REGION) of the records, in the order the loops started."""
    regions = np.zeros(capacity, dtype=REGION)
    out = []
    _core.pool_trace_start(regions)
    try:
        yield out
    finally:
        out.append(regions[:_core.pool_trace_stop()].copy())
