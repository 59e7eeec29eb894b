"""NCCL for ranks whose model is on a cuda device: SINGA's design, MPI to start, NCCL to
reduce. MPI (the group of world.py) carries only the start: rank 0 makes the NCCL id and
broadcasts it, every rank joins the communicator on its GPU; from then on the gradient
buckets and the start-up broadcast of the parameters go through NCCL, on the device's
compute stream, with no copy through the host.

The fault rules of hl.distributed still hold. A collective is only enqueued; ``wait``
marks the stream and polls it, checking between polls NCCL's asynchronous error, the
failure notices and dead ranks of faults.py, and the timeout; on any failure it aborts the
communicator (ncclCommAbort: the device's stream is not left blocked in a collective whose
peer is gone) and raises hl.errors.DistributedError naming the operation. A rank that
fails aborts its communicators too (faults.on_failure), so that its peers stop at once.

Which way cuda tensors go: NCCL when it can be loaded (the nvidia-nccl-cu13 wheel, or the
emulated NCCL under HL_CUDA_EMULATE=1); ``hl.distributed.init(nccl=False)`` or
HL_DIST_NCCL=0 forces host staging through MPI, HL_DIST_NCCL=1 (or ``nccl=True``) makes a
missing NCCL an error instead of a fallback with a warning.
"""
import os
import threading
import time
import warnings

from .. import _cuda_libs, _nccl, errors
from . import faults
from .collectives import allgather_object, bcast_object, timed_out

_lock = threading.Lock()
_groups = {}        # (id(world), device index) -> Group, or None once the ranks chose MPI


def setting(world):
    """True (NCCL required), False (host staging) or None (NCCL when it loads)."""
    if world is not None and getattr(world, "nccl", None) is not None:
        return world.nccl
    raw = os.environ.get("HL_DIST_NCCL", "")
    if raw in ("", "auto"):
        return None
    if raw not in ("0", "1"):
        raise errors.ValueError(f"HL_DIST_NCCL must be 0 (host staging), 1 (NCCL) or auto, "
                                f"got {raw!r}")
    return raw == "1"


def cuda_index(tensors):
    """The cuda device index all the tensors are on, or None (CPU, or mixed devices)."""
    devices = {t.device for t in tensors}
    if len(devices) != 1:
        return None
    d = next(iter(devices))
    return d.index if d.kind == "cuda" else None


def group_for(world, tensors):
    """The NCCL group for these tensors (all on one cuda device), or None when they go
    through MPI: CPU tensors, host staging chosen, or NCCL not available (with a warning)."""
    if world is None or world.size == 1 or not tensors:
        return None
    index = cuda_index(tensors)
    if index is None:
        return None
    wanted = setting(world)
    if wanted is False:
        return None
    key = (id(world), index)
    with _lock:
        if key in _groups:
            return _groups[key]
    # every rank decides together: a rank that could not load NCCL makes all stage
    why = _nccl.available()
    every = allgather_object(why, "the choice of NCCL or MPI", world)
    failing = [(r, w) for r, w in enumerate(every) if w]
    if failing:
        r, w = failing[0]
        text = f"hl.distributed: NCCL cannot be used on rank {r}: {w}"
        if wanted:
            raise errors.DistributedError(text + " (HL_DIST_NCCL=1 / init(nccl=True) "
                                                 "require it)")
        warnings.warn(text + "; the gradients of cuda models go through MPI, staged "
                             "through host memory (slower)", RuntimeWarning, stacklevel=3)
        with _lock:
            _groups[key] = None  # decided: every later call stages without asking again
        return None
    group = Group(world, index)
    with _lock:
        _groups[key] = group
    return group


def backend(world, device):
    """'nccl' or 'mpi': how tensors on ``device`` (an hl Device) are reduced."""
    if world is None or device.kind != "cuda" or setting(world) is False:
        return "mpi"
    key = (id(world), device.index)
    with _lock:
        if key in _groups:  # the ranks have chosen
            return "nccl" if _groups[key] is not None else "mpi"
    return "nccl" if _nccl.available() is None else "mpi"  # what this rank would offer


class Group:
    """One NCCL communicator of every rank, each on its own cuda device."""

    def __init__(self, world, index):
        self.world = world
        self.device = index
        self.comm = None
        what = "the start of NCCL"
        where = allgather_object((world.host, index), what, world)
        if not _cuda_libs.emulated():  # emulated devices are per process: nothing is shared
            seen = {}
            for r, place in enumerate(where):
                if place in seen:
                    raise errors.DistributedError(
                        f"hl.distributed: ranks {seen[place]} and {r} both train on cuda:"
                        f"{place[1]} of {place[0]}; with NCCL each rank needs a GPU of its "
                        f"own: put the model on cuda:{{hl.distributed.local_rank()}}")
                seen[place] = r
        # MPI's only part: rank 0's id to everyone
        uid = _nccl.unique_id() if world.rank == 0 else None
        uid = bcast_object(uid, what, world)
        faults.waiting(what)  # ncclCommInitRank blocks until all joined: the watchdog guards
        try:
            self.comm = _nccl.init(world.size, uid, world.rank, index)
        except _nccl.Error as e:
            raise errors.DistributedError(f"hl.distributed: {what} failed on rank "
                                          f"{world.rank}: {e}") from None
        finally:
            faults.waiting(None)
        faults.on_failure(self.abort)

    # ---- collectives: enqueued on the device's compute stream -----------------------------

    def all_reduce_(self, t, what):
        """Enqueues the in-place sum of t over the ranks (complete after wait())."""
        self._enqueue(_nccl.all_reduce_, t, what)

    def broadcast_(self, t, what, root=0):
        self._enqueue(lambda comm, t: _nccl.broadcast_(comm, t, root), t, what)

    def _enqueue(self, op, t, what):
        self._usable(what)
        # the emulated NCCL runs the collective here, in this thread: the watchdog guards it
        faults.waiting(what)
        failed = None
        try:
            op(self.comm, t)
        except _nccl.Error as e:
            failed = e  # reported outside the handler: one clean traceback, not two
        finally:
            faults.waiting(None)
        if failed is not None:
            self._fail(what, failed)

    def wait(self, what):
        """Until the device has done the collectives enqueued so far, checking for failures
        (NCCL's, other ranks', the timeout) between looks."""
        self._usable(what)
        failed = None
        try:
            _nccl.mark(self.comm)
            if not _nccl.query(self.comm):
                faults.waiting(what)
                self._poll(what)
        except _nccl.Error as e:
            failed = e
        finally:
            faults.waiting(None)
        if failed is not None:
            self._fail(what, failed)

    def _poll(self, what):
        start = time.monotonic()
        next_check = start + 0.02
        while not _nccl.query(self.comm):
            now = time.monotonic()
            if now - start > 0.005:
                time.sleep(0.0002)
            if now >= next_check:
                next_check = now + 0.02
                try:
                    faults.check(self.world, what)
                except errors.DistributedError:
                    self.abort()
                    raise
                if now - start > self.world.timeout:
                    self.abort()
                    raise timed_out(what, self.world)

    def _usable(self, what):
        if self.comm is None:
            raise errors.DistributedError(f"hl.distributed: {what}: the NCCL communicator "
                                          f"was aborted after an earlier failure")

    def _fail(self, what, error):
        """A failed NCCL call: the communicator is aborted; the error names the rank that
        failed when faults.py knows it (its notice may take a moment to arrive)."""
        self.abort()
        deadline = time.monotonic() + 1.0
        while True:
            faults.check(self.world, what)  # raises naming the failed or dead rank
            if time.monotonic() > deadline:
                break
            time.sleep(0.01)
        raise errors.DistributedError(
            f"hl.distributed: {what} failed in NCCL on rank {self.world.rank}: {error}; "
            f"every rank stops") from None

    def abort(self):
        comm, self.comm = self.comm, None
        if comm is not None:
            _nccl.abort(comm)
