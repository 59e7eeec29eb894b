"""Collectives on numpy arrays and small objects, each bounded by the group's timeout.

Every operation is MPI's non-blocking form (Iallreduce, Ibcast, Iallgather(v), Ibarrier)
completed by ``wait``, which polls the request and, between polls, looks for a failure
notice from another rank, for a dead rank on this machine and for the deadline
(faults.check). A blocking MPI call would hang forever on a rank that died; this never does.
"""
import os
import pickle
import time

import numpy as np

from .. import errors
from . import faults

_CHECK_EVERY_S = 0.02   # how often a long wait looks for failures
_SPIN_S = 0.005  # polling at full speed this long (as MPI's own waits do), then yielding too


def wait(request, what, world):
    """Completes an MPI request, or raises hl.errors.DistributedError when another rank
    failed, died or did not take part within ``world.timeout`` seconds."""
    if request.Test():
        return
    faults.waiting(what)
    try:
        _poll(request, what, world)
    finally:
        faults.waiting(None)


def _poll(request, what, world):
    start = time.monotonic()
    next_check = start + _CHECK_EVERY_S
    while not request.Test():
        now = time.monotonic()
        if now - start > _SPIN_S:
            # MPI progresses only inside its calls, so keep polling, but let the other
            # ranks of an oversubscribed machine run in between
            os.sched_yield()
        if now >= next_check:
            faults.check(world, what)
            if now - start > world.timeout:
                raise timed_out(what, world)
            next_check = now + _CHECK_EVERY_S


def timed_out(what, world):
    return errors.DistributedError(
        f"hl.distributed: {what} waited {world.timeout:g} s for the other ranks and they did "
        f"not all take part (rank {world.rank} of {world.size}); a rank is stuck, much "
        f"slower, or runs different code. The limit is hl.distributed.init(timeout=...) or "
        f"HL_DIST_TIMEOUT")


def allreduce_(array, what, world):
    """Sums a contiguous numpy array over every rank, in place."""
    wait(world.data.Iallreduce(world.MPI.IN_PLACE, array, op=world.MPI.SUM), what, world)
    return array


def bcast_(array, what, world, root=0):
    """Copies root's values of a contiguous numpy array into every rank's array."""
    wait(world.data.Ibcast(array, root=root), what, world)
    return array


def allgather_object(obj, what, world):
    """[obj of rank 0, obj of rank 1, ...] on every rank (small picklable objects of this
    program, e.g. names and shapes)."""
    payload = np.frombuffer(pickle.dumps(obj), np.uint8)
    sizes = np.zeros(world.size, np.int64)
    wait(world.data.Iallgather(np.array([payload.size], np.int64), sizes), what, world)
    buf = np.empty(int(sizes.sum()), np.uint8)
    displs = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    wait(world.data.Iallgatherv(payload, [buf, sizes, displs, world.MPI.BYTE]), what, world)
    return [pickle.loads(buf[d:d + s].tobytes()) for d, s in zip(displs, sizes)]


def require_same(obj, what, world, explain):
    """The checks at start (versions, settings): raises DistributedError with
    explain(rank, its obj, rank 0's obj) for the first rank whose obj differs from rank 0's."""
    every = allgather_object(obj, what, world)
    for r, theirs in enumerate(every):
        if theirs != every[0]:
            raise errors.DistributedError(explain(r, theirs, every[0]))


def bcast_object(obj, what, world, root=0):
    """root's obj on every rank (others pass anything, e.g. None)."""
    payload = np.frombuffer(pickle.dumps(obj), np.uint8) if world.rank == root else None
    size = np.array([0 if payload is None else payload.size], np.int64)
    bcast_(size, what, world, root)
    buf = payload.copy() if payload is not None else np.empty(int(size[0]), np.uint8)
    bcast_(buf, what, world, root)
    return obj if world.rank == root else pickle.loads(buf.tobytes())


def allgather_arrays(array, what, world):
    """The arrays of every rank (same dtype and trailing shape, any first axis), in rank
    order."""
    array = np.ascontiguousarray(array)
    shapes = allgather_object(array.shape, what, world)
    counts = np.array([int(np.prod(s)) for s in shapes], np.int64)
    out = np.empty(int(counts.sum()), array.dtype)
    displs = np.concatenate([[0], np.cumsum(counts)[:-1]])
    mpi_type = world.MPI._typedict[array.dtype.char]
    wait(world.data.Iallgatherv(array.reshape(-1), [out, counts, displs, mpi_type]), what,
         world)
    return [out[d:d + c].reshape(s) for d, c, s in zip(displs, counts, shapes)]
