"""Running the rank scripts of tests/distributed/scripts under mpiexec (the `mpich` wheel's,
through python -m hl.distributed), and alone for the single-process reference."""
import json
import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPTS = os.path.join(HERE, "scripts")
SRC = os.path.abspath(os.path.join(HERE, "..", "..", "src"))


def mpi_available():
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    from hl.distributed.launch import find_mpiexec
    try:
        find_mpiexec()
    except Exception:
        return False
    return True


needs_mpi = pytest.mark.skipif(
    not mpi_available(), reason="mpi4py or mpiexec missing: pip install 'hl[dist]'")


def _env():
    env = dict(os.environ)
    import hl
    pkg_root = os.path.dirname(os.path.dirname(hl.__file__))
    env["PYTHONPATH"] = os.pathsep.join([pkg_root, SCRIPTS] + (
        [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["OMP_NUM_THREADS"] = "1"  # N ranks on two cores
    env.pop("PMI_RANK", None)
    return env


def run(script, out, *args, n=None, timeout_s=30, limit_s=120, check=True, env=None):
    """Runs a script alone (n=None) or on n ranks, with ``env`` added to the environment;
    returns (CompletedProcess, seconds)."""
    path = os.path.join(SCRIPTS, script)
    cmd = [sys.executable, path, str(out), *map(str, args)]
    if n is not None:
        cmd = [sys.executable, "-m", "hl.distributed", "-n", str(n), "--timeout",
               str(timeout_s)] + cmd[1:]
    start = time.monotonic()
    proc = subprocess.run(cmd, env={**_env(), **(env or {})}, capture_output=True, text=True,
                          timeout=limit_s)
    took = time.monotonic() - start
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed ({proc.returncode}):\n"
                             f"{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}")
    return proc, took


def load(path):
    with np.load(path) as f:
        return {k: f[k] for k in f.files}


def load_json(path):
    with open(path) as f:
        return json.load(f)


def assert_close(ref, got, rtol, what):
    assert set(ref) == set(got), (what, sorted(ref), sorted(got))
    for k in ref:
        scale = max(float(np.abs(ref[k]).max()), 1e-30)
        err = float(np.abs(ref[k] - got[k]).max()) / scale
        assert err <= rtol, f"{what}: {k} differs by {err:.3g} (relative to its largest " \
                            f"value), more than {rtol:g}"


def mpiexec_path():
    from hl.distributed.launch import find_mpiexec
    return find_mpiexec() if mpi_available() else shutil.which("mpiexec")
