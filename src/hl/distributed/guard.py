"""The parent of each rank that ``python -m hl.distributed`` starts (Linux, MPICH).

MPICH's launcher kills every rank at once, silently, as soon as one dies from a signal
(SIGKILL, the out-of-memory killer), whatever ``-disable-auto-cleanup`` says, so the others
never get to say why they stop. With this small process between the launcher and the rank,
the launcher sees an ordinary non-zero exit instead: the other ranks find the dead process
(faults.py) and stop with an hl.errors.DistributedError naming it, and this guard reports
the signal. The rank inherits the PMI connection (PMI_FD) and dies with its guard
(PR_SET_PDEATHSIG), so a guard killed by the launcher leaves no orphan behind.

Run as a file (not with -m), so that it imports nothing of hl: ``python guard.py script.py
args...`` or ``python guard.py -m module args...``.
"""
import ctypes
import os
import signal
import subprocess
import sys

_PR_SET_PDEATHSIG = 1


def _in_the_rank():
    signal.signal(signal.SIGUSR1, signal.SIG_DFL)  # the rank's own, as without a guard
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)  # die with the guard


def main(argv):
    keep = [int(os.environ["PMI_FD"])] if os.environ.get("PMI_FD", "").isdigit() else []
    # MPICH's launcher sends SIGUSR1 to the processes it started whenever one of them ends
    # (with -disable-auto-cleanup): the guard is not MPI and lets it pass; hl's ranks find
    # failed peers by themselves (faults.py)
    signal.signal(signal.SIGUSR1, signal.SIG_IGN)
    proc = subprocess.Popen([sys.executable] + argv, pass_fds=keep, preexec_fn=_in_the_rank)
    for fd in keep:  # the rank alone speaks PMI
        os.close(fd)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # passed on to the rank
        signal.signal(sig, lambda s, _frame: proc.send_signal(s))
    rc = proc.wait()
    if rc < 0:
        name = signal.Signals(-rc).name
        print(f"hl.errors.DistributedError: hl.distributed: rank "
              f"{os.environ.get('PMI_RANK', '?')} (process {proc.pid} on "
              f"{os.uname().nodename}) was killed by {name}; the other ranks find it gone "
              f"and stop", file=sys.stderr, flush=True)
        return 128 - rc
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
