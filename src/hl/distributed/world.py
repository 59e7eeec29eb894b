"""The process group: who we are (rank, world size, local rank) and MPI, started lazily.

A script written for one process runs unchanged: unless the process was started by an MPI
launcher (mpiexec sets PMI_* / OMPI_* / PMIX_* variables in each rank's environment),
``world_size()`` is 1, ``rank()`` is 0 and mpi4py is never imported. Under a launcher, the
first call that needs the group imports mpi4py, checks that every rank runs the same hl and
Python, and installs the fault handling of faults.py.

Three communicators are duplicated from COMM_WORLD: ``data`` carries the collectives of the
main thread (broadcasts, metrics), ``grads`` the gradient buckets (reduced by a thread of
their own, buckets.py) and ``control`` only the failure notices, so a notice can never be
mistaken for, or queued behind, a collective's messages.
"""
import os
import sys
import threading

from .. import errors

_LAUNCHER_VARS = ("PMI_RANK", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "MPI_LOCALRANKID")
DEFAULT_TIMEOUT_S = 600.0

_lock = threading.Lock()
_world = None


def launched_by_mpi():
    """True when an MPI launcher started this process (so the group has to be joined)."""
    return any(v in os.environ for v in _LAUNCHER_VARS)


class World:
    """The joined group. ``timeout`` (seconds) bounds every wait on the other ranks."""

    def __init__(self, MPI, timeout):
        self.MPI = MPI
        world = MPI.COMM_WORLD
        self.size = world.Get_size()
        self.rank = world.Get_rank()
        node = world.Split_type(MPI.COMM_TYPE_SHARED, key=self.rank)
        self.local_rank, self.local_size = node.Get_rank(), node.Get_size()
        node.Free()
        self.data = world.Dup()
        self.control = world.Dup()
        self.grads = world.Dup()  # the gradient buckets, reduced by buckets.CommThread
        self.threaded = MPI.Query_thread() == MPI.THREAD_MULTIPLE
        self.timeout = float(timeout)
        self.nccl = None  # cuda tensors: True NCCL, False host staging, None NCCL if it loads
        # who is where, for the liveness check of faults.py and for error messages
        self.peers = world.allgather((MPI.Get_processor_name(), os.getpid()))
        self.host = self.peers[self.rank][0]


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError:
        raise errors.MissingDependencyError(
            "this process was started by an MPI launcher, but mpi4py is not installed; "
            "install hl's distributed extra: pip install 'hl[dist]' (mpi4py and an MPI "
            "library from PyPI)") from None
    return MPI


def timeout_from_env():
    raw = os.environ.get("HL_DIST_TIMEOUT")
    if raw is None:
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not value > 0:
        raise errors.ValueError(f"HL_DIST_TIMEOUT must be a number of seconds > 0, got "
                                f"{raw!r}")
    return value


def init(timeout=None, nccl=None):
    """Joins the process group (once; later calls return the same group) and returns it, or
    None when this process runs alone. ``timeout`` (seconds; default HL_DIST_TIMEOUT or
    600) bounds every wait on the other ranks: a rank that neither answers nor is known to
    have failed within it is reported as an hl.errors.DistributedError. ``nccl`` says how
    tensors on cuda devices are reduced: None (default, or HL_DIST_NCCL unset) NCCL when it
    can be loaded, else MPI with host staging and a warning; True NCCL or an error; False
    always MPI with host staging (HL_DIST_NCCL=1 / 0 say the same). Every rank must pass
    the same value."""
    global _world
    if nccl is not None and not isinstance(nccl, bool):
        raise errors.ValueError(f"hl.distributed.init: nccl must be True, False or None, got "
                                f"{nccl!r}")
    with _lock:
        if _world is not None:
            if timeout is not None:
                _world.timeout = _check_timeout(timeout)
            if nccl is not None:
                _world.nccl = nccl
            return _world
        if not launched_by_mpi():
            return None
        MPI = _mpi()
        world = World(MPI, _check_timeout(timeout) if timeout is not None
                      else timeout_from_env())
        world.nccl = nccl
        from . import faults
        faults.install(world)
        _check_same_software(world)
        _share_cores(world)
        _world = world
        return world


def _share_cores(world):
    """hl's thread count when the ranks share a machine. hl's default is every CPU the
    process may use (HL_NUM_THREADS overrides), so N ranks on one machine would each start
    a thread per core: N times too many, and OpenMP's spinning threads then lose whole time
    slices to each other (a 1 MB bucket's copy took 60 ms instead of 0.2 ms that way on 2
    ranks x 2 threads on 2 cores). Unless HL_NUM_THREADS says otherwise, a rank takes
    OMP_NUM_THREADS (what mpiexec users and ``python -m hl.distributed`` set), else its
    share of the CPUs: cores // ranks on this machine."""
    if os.environ.get("HL_NUM_THREADS"):
        return
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if omp.isdigit() and int(omp) > 0:
        n = int(omp)
    elif world.local_size > 1:
        try:
            cores = len(os.sched_getaffinity(0))
        except AttributeError:  # not Linux
            cores = os.cpu_count() or 1
        n = max(1, cores // world.local_size)
    else:
        return
    from .._core import set_num_threads
    set_num_threads(n)


def _check_timeout(timeout):
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not timeout > 0:
        raise errors.ValueError(f"hl.distributed.init: timeout must be a number of seconds "
                                f"> 0, got {timeout!r}")
    return float(timeout)


def _check_same_software(world):
    """Ranks running different hl (or Python) versions would disagree on layouts and
    formats: refuse at start, naming the first rank that differs."""
    from .._core import version
    mine = (version(), "%d.%d" % sys.version_info[:2])
    from .collectives import allgather_object
    every = allgather_object(mine, "the version check at start", world)
    for r, theirs in enumerate(every):
        if theirs != every[0]:
            raise errors.DistributedError(
                f"hl.distributed: rank {r} runs hl {theirs[0]} on Python {theirs[1]}, rank 0 "
                f"hl {every[0][0]} on Python {every[0][1]}; every rank must run the same hl "
                f"and Python (install the same environment on every machine)")


def current():
    """The joined group, joining it when launched by MPI; None when alone."""
    return _world if _world is not None else init()


def world_size():
    """How many processes train together (1 when not launched by MPI)."""
    w = current()
    return 1 if w is None else w.size


def rank():
    """This process's place in the group, 0 .. world_size() - 1."""
    w = current()
    return 0 if w is None else w.rank


def local_rank():
    """This process's place among the ranks on its own machine (picks its GPU)."""
    w = current()
    return 0 if w is None else w.local_rank


def is_main():
    """True on rank 0, the one that prints and writes files."""
    return rank() == 0


def is_distributed():
    """True when more than one process trains together."""
    return world_size() > 1


def backend(device=None):
    """How tensors on ``device`` are reduced among the ranks: ``"nccl"`` (cuda devices, when
    NCCL can be loaded and host staging was not chosen) or ``"mpi"`` (CPU tensors, and cuda
    tensors staged through host memory); None when this process runs alone. ``device``
    defaults to cuda when hl has a CUDA device, else the CPU."""
    w = current()
    if w is None:
        return None
    from .. import devices
    if device is None:
        from .._core import cuda_unavailable_reason
        device = "cpu" if cuda_unavailable_reason() else "cuda"
    from .nccl import backend as _backend
    return _backend(w, devices.device(device))


def barrier():
    """Waits until every rank has reached it (bounded by the timeout)."""
    w = current()
    if w is None or w.size == 1:
        return
    from .collectives import wait
    wait(w.data.Ibarrier(), "barrier", w)
