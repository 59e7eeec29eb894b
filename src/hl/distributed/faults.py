"""What happens when a rank fails: the others stop with an hl error, never hang.

- A rank whose program ends with an exception (sys.excepthook) prints it as usual, then
  sends a short notice on the group's control communicator to every other rank, waits a
  moment (at most GRACE_S) for the others' own notices, so that each has printed why it
  stops before the launcher tears the job down, and exits with status 1 without
  MPI_Finalize (which would wait for ranks that will never come).
- A rank waiting in a collective (collectives.wait) checks, every few milliseconds, for a
  notice (-> DistributedError naming the rank and its error), for a rank on this machine
  whose process is gone (-> DistributedError naming it), and for its timeout.
- A rank killed outright (SIGKILL, out of memory) sends nothing: the others find its
  process gone (same machine) or reach their timeout (other machines).
"""
import os
import sys
import time

from .. import errors

NOTICE_TAG = 7317
GRACE_S = 5.0
_LIVENESS_EVERY_S = 0.25

_state = {"world": None, "failed": {}, "sent": False, "pending": [], "alive_checked": 0.0}


def install(world):
    _state["world"] = world
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        previous(kind, value, tb)
        if issubclass(kind, SystemExit):
            return
        _fail_and_exit(world, f"{kind.__name__}: {value}")
    sys.excepthook = excepthook


def _receive_notices(world):
    MPI = world.MPI
    status = MPI.Status()
    while world.control.Iprobe(source=MPI.ANY_SOURCE, tag=NOTICE_TAG, status=status):
        buf = bytearray(status.Get_count(MPI.BYTE))
        world.control.Recv([buf, MPI.BYTE], source=status.Get_source(), tag=NOTICE_TAG)
        _state["failed"].setdefault(status.Get_source(), buf.decode("utf-8", "replace"))


def _dead_local_ranks(world):
    """Ranks on this machine whose process has ended (or is a zombie)."""
    dead = []
    for r, (host, pid) in enumerate(world.peers):
        if r == world.rank or host != world.host:
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except (FileNotFoundError, ProcessLookupError):
            dead.append((r, pid))
            continue
        except OSError:
            continue  # no /proc here: rely on the timeout
        if state in ("Z", "X"):
            dead.append((r, pid))
    return dead


def check(world, what):
    """Raises DistributedError when another rank reported a failure or died."""
    _receive_notices(world)
    if _state["failed"]:
        r, message = next(iter(_state["failed"].items()))
        raise errors.DistributedError(
            f"hl.distributed: {what} stopped on rank {world.rank} because rank {r} failed "
            f"({message}); every rank stops")
    now = time.monotonic()
    if now - _state["alive_checked"] >= _LIVENESS_EVERY_S:
        _state["alive_checked"] = now
        dead = _dead_local_ranks(world)
        if dead:
            r, pid = dead[0]
            _state["failed"].setdefault(r, "died")
            raise errors.DistributedError(
                f"hl.distributed: {what} stopped on rank {world.rank} because rank {r} "
                f"(process {pid} on {world.host}) has died without a word (killed, or out "
                f"of memory); every rank stops")


def notify(world, message):
    """Tells every other rank that this one fails (once)."""
    if _state["sent"]:
        return
    _state["sent"] = True
    data = message.encode("utf-8", "replace")[:2000]
    for r in range(world.size):
        if r != world.rank:
            _state["pending"].append(world.control.Isend([data, world.MPI.BYTE], dest=r,
                                                         tag=NOTICE_TAG))


def _fail_and_exit(world, message):
    try:
        notify(world, message)
        deadline = time.monotonic() + min(GRACE_S, world.timeout)
        dead = set()
        while time.monotonic() < deadline:
            _receive_notices(world)
            dead.update(r for r, _ in _dead_local_ranks(world))
            others = set(range(world.size)) - {world.rank}
            if others <= set(_state["failed"]) | dead:
                break
            time.sleep(0.005)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)
