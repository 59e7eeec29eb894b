"""What happens when a rank fails: the others stop with an hl error, never hang.

- A rank whose program ends with an exception (sys.excepthook) prints it as usual (in one
  write, so that the ranks' tracebacks do not interleave in the launcher's stream), then
  sends a short notice on the group's control communicator to every other rank, waits a
  moment (at most GRACE_S, or the timeout if shorter) for the others' own notices, so that
  each has printed why it stops, and exits with status 1 (never MPI_Finalize, which would
  wait for ranks that will never come). When some rank neither failed nor died (it is stuck
  outside MPI), it calls MPI_Abort instead, so the launcher ends that rank too.
- A rank waiting in a collective (collectives.wait) checks, every few milliseconds, for a
  notice (-> DistributedError naming the rank and its error), for a rank on this machine
  whose process is gone (-> DistributedError naming it), and for its timeout.
- A rank killed outright (SIGKILL, out of memory) sends nothing: the others find its
  process gone (same machine) or reach their timeout (other machines).
"""
import os
import sys
import threading
import time
import traceback

from .. import errors

NOTICE_TAG = 7317
GRACE_S = 5.0
_LIVENESS_EVERY_S = 0.1

_WATCHDOG_GRACE_S = 0.2  # short: MPICH itself aborts the ranks of a group that lost one within ~1-3 s
_state = {"world": None, "failed": {}, "sent": False, "pending": [], "exiting": False,
          "waiting": None, "on_failure": []}


def on_failure(fn):
    """fn() runs when this rank stops for good (it failed, or the watchdog ends it): NCCL
    communicators abort there, so that peers waiting in a collective stop at once."""
    _state["on_failure"].append(fn)


def _run_failure_hooks():
    hooks, _state["on_failure"] = _state["on_failure"], []
    for fn in hooks:
        try:
            fn()
        except Exception:  # stopping anyway: one hook's trouble must not keep the others
            pass


def waiting(what):
    """collectives.wait marks the wait it is in (what, since when), for the watchdog."""
    _state["waiting"] = None if what is None else (what, time.monotonic())


def _watchdog(world):
    """MPI may never return from a call once a peer is gone (MPICH's shared-memory path
    spins inside MPI_Test), so the checks of collectives.wait cannot run. This thread,
    touching no MPI, finds a dead local rank or a wait far past the timeout and, when the
    main thread has not reacted within a moment, reports it and ends the process."""
    while True:
        time.sleep(_LIVENESS_EVERY_S)
        if _state["exiting"]:
            return
        dead = _dead_local_ranks(world)
        current = _state["waiting"]
        now = time.monotonic()
        overdue = current is not None and now - current[1] > world.timeout + _WATCHDOG_GRACE_S
        if not dead and not overdue:
            continue
        time.sleep(_WATCHDOG_GRACE_S)  # the main thread's own check goes first
        if _state["exiting"]:
            return
        what = current[0] if current is not None else "training"
        if dead:
            r, pid = dead[0]
            reason = (f"rank {r} (process {pid} on {world.host}) has died without a word "
                      f"(killed, or out of memory)")
        else:
            reason = f"the other ranks did not take part within {world.timeout:g} s"
        print(f"hl.errors.DistributedError: hl.distributed: {what} stopped on rank "
              f"{world.rank} because {reason}; every rank stops (reported by hl's watchdog: "
              f"the collective (MPI or NCCL) did not return)", file=sys.stderr, flush=True)
        _state["exiting"] = True
        _run_failure_hooks()
        time.sleep(0.05)
        os._exit(1)


def install(world):
    _state["world"] = world
    threading.Thread(target=_watchdog, args=(world,), name="hl.distributed watchdog",
                     daemon=True).start()
    previous = sys.excepthook

    def excepthook(kind, value, tb):
        if previous is sys.__excepthook__:
            _print_in_one_write(kind, value, tb)
        else:
            previous(kind, value, tb)  # the user's own hook comes first
        if issubclass(kind, SystemExit):
            return
        _fail_and_exit(world, f"{kind.__name__}: {value}")
    sys.excepthook = excepthook


def _print_in_one_write(kind, value, tb):
    """Print the traceback as Python would, but in one write to the stderr descriptor:
    the launcher merges every rank's stderr into one stream, and a traceback printed line
    by line interleaves with the others' into something nobody can read."""
    text = "".join(traceback.format_exception(kind, value, tb)).encode("utf-8", "replace")
    try:
        sys.stderr.flush()
        fd = sys.stderr.fileno()
        while text:
            text = text[os.write(fd, text):]
    except (AttributeError, OSError, ValueError):  # no real descriptor (captured stderr)
        sys.__excepthook__(kind, value, tb)


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
    """Raises DistributedError when another rank died or reported a failure. The dead-rank
    check comes first and touches no MPI: once a peer is gone, an MPI call may not return."""
    dead = _dead_local_ranks(world)
    if dead:
        r, pid = dead[0]
        _state["failed"].setdefault(r, "died")
        raise errors.DistributedError(
            f"hl.distributed: {what} stopped on rank {world.rank} because rank {r} "
            f"(process {pid} on {world.host}) has died without a word (killed, or out "
            f"of memory); every rank stops")
    _receive_notices(world)
    if _state["failed"]:
        r, message = next(iter(_state["failed"].items()))
        raise errors.DistributedError(
            f"hl.distributed: {what} stopped on rank {world.rank} because rank {r} failed "
            f"({message}); every rank stops")


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
    _state["exiting"] = True
    accounted = False
    try:
        notify(world, message)
        _run_failure_hooks()
        deadline = time.monotonic() + min(GRACE_S, world.timeout)
        dead = set()
        while time.monotonic() < deadline:
            dead.update(r for r, _ in _dead_local_ranks(world))
            if dead:
                accounted = True  # MPI may hang from here on: the launcher ends the rest
                break
            _receive_notices(world)
            others = set(range(world.size)) - {world.rank}
            if others <= set(_state["failed"]) | dead:
                accounted = True
                break
            time.sleep(0.005)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        if not accounted:
            # a rank neither failed nor died: it is stuck outside MPI. MPI_Abort makes the
            # launcher end every rank; a moment first, so the output on its way is shown
            time.sleep(0.5)
            try:
                world.MPI.COMM_WORLD.Abort(1)
            finally:
                os._exit(1)
        time.sleep(0.3)  # let the launcher forward what was printed before the exit
        os._exit(1)
