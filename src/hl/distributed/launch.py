"""``python -m hl.distributed -n N script.py [args...]``: runs script.py on N ranks with the
mpiexec that came with the MPI wheel (or the one on PATH), adding what a data-parallel hl
run wants:

- each rank's thread count (OMP_NUM_THREADS, OpenBLAS's) set to the machine's cores
  divided by the ranks on it, unless already set, so N ranks do not oversubscribe;
- MPICH's ``-disable-auto-cleanup``: when a rank fails the launcher leaves the others
  running long enough to report it as an hl error (faults.py) instead of killing them
  silently; they stop by themselves within the timeout. A rank killed by a signal would
  still make MPICH kill the rest at once: on Linux each rank runs under a small guard
  process (guard.py) that turns that death into an ordinary exit.
- Open MPI's consent to run as root (OMPI_ALLOW_RUN_AS_ROOT and its _CONFIRM), when the
  launcher runs as root and they are not set: Open MPI's mpiexec refuses root otherwise, and
  root is what a container (a GPU machine's image, a CI job) usually is; MPICH does not ask.

Options before the script: ``-n N`` (ranks), ``--timeout S`` (HL_DIST_TIMEOUT), ``--hosts
a,b`` or ``--hostfile F`` (several machines), ``--iface NAME`` (the network interface MPI
uses); anything after ``--mpi`` up to the script goes to mpiexec as is.
"""
import argparse
import os
import shutil
import subprocess
import sys

from .. import errors


def find_mpiexec():
    """The mpiexec beside this Python (a wheel's), else the one on PATH."""
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.access(here, os.X_OK):
        return here
    found = shutil.which("mpiexec")
    if found is None:
        raise errors.MissingDependencyError(
            "python -m hl.distributed: no mpiexec found beside this Python or on PATH; "
            "install hl's distributed extra: pip install 'hl[dist]'")
    return found


def _is_mpich(mpiexec):
    try:
        out = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                             timeout=20).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "HYDRA" in out or "MPICH" in out.upper()


def command(argv, env=None):
    """(mpiexec command line, environment) for the launcher's arguments."""
    p = argparse.ArgumentParser(prog="python -m hl.distributed",
                                description="Run an hl script on N ranks with mpiexec.")
    p.add_argument("-n", "--np", dest="n", type=int, required=True, help="number of ranks")
    p.add_argument("--timeout", type=float, help="seconds a rank waits for the others")
    p.add_argument("--hosts", help="comma-separated machines (MPICH's -hosts)")
    p.add_argument("--hostfile", help="a file of machines, one a line (name:slots)")
    p.add_argument("--iface", help="the network interface to use, e.g. eth0")
    p.add_argument("--mpi", nargs="*", default=[], help="more arguments for mpiexec")
    p.add_argument("script", help="the Python script (or -m module)")
    p.add_argument("args", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    if a.n < 1:
        p.error("-n must be >= 1")
    env = dict(os.environ if env is None else env)
    mpiexec = find_mpiexec()
    mpich = _is_mpich(mpiexec)
    cmd = [mpiexec, "-n", str(a.n)]
    if mpich:
        cmd.append("-disable-auto-cleanup")
    if a.hosts:
        cmd += ["-hosts", a.hosts] if mpich else ["--host", a.hosts]
    if a.hostfile:
        cmd += ["-f", a.hostfile] if mpich else ["--hostfile", a.hostfile]
    if a.iface:
        cmd += ["-iface", a.iface] if mpich else ["--mca", "btl_tcp_if_include", a.iface]
    cmd += a.mpi
    if not mpich and hasattr(os, "geteuid") and os.geteuid() == 0:
        for var in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM"):
            env.setdefault(var, "1")
    if a.timeout is not None:
        env["HL_DIST_TIMEOUT"] = str(a.timeout)
    if not a.hosts and not a.hostfile:  # ranks share this machine's cores
        threads = str(max(1, (os.cpu_count() or 1) // a.n))
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env.setdefault(var, threads)
    script = [a.script] + a.args if a.script != "-m" else ["-m"] + a.args
    if mpich and sys.platform.startswith("linux"):  # see guard.py
        script = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "guard.py")] + \
            script
    return cmd + [sys.executable] + script, env


def main(argv=None):
    cmd, env = command(sys.argv[1:] if argv is None else argv)
    return subprocess.call(cmd, env=env)
