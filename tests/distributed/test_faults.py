"""A rank that raises, hangs, or is killed: the job ends with an hl error (never hangs),
well within the timeout; ranks that disagree on the model or hl's version are refused at
start. Timeout for these runs: 8 s."""
import numpy as np

import hl
from hl import errors
from hl.distributed import faults

from .mpirun import load_json, needs_mpi, run

TIMEOUT_S = 8
STARTUP_S = 15  # launching and importing on a loaded two-core machine, generously


@needs_mpi
def test_rank_raising_at_step_3_stops_every_rank_with_an_hl_error(tmp_path):
    proc, took = run("fault.py", tmp_path / "x", "--mode", "raise", n=4,
                     timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert took < TIMEOUT_S + STARTUP_S, took
    err = proc.stderr
    assert "waited" not in err  # found by rank 1's notice, not by the timeout
    assert "ValueError: a bug in the user's step 3" in err
    for r in (0, 2, 3):
        assert (f"hl.errors.DistributedError: hl.distributed: DistOpt's gradient allreduce "
                f"stopped on rank {r} because rank 1 failed (ValueError") in err, err[-3000:]
    # each rank's traceback reaches the merged stream whole, not interleaved line by line
    blocks = err.split("Traceback (most recent call last):\n")[1:]
    assert len(blocks) == 4, err[-3000:]
    for block in blocks:
        unindented = [line for line in block.splitlines() if line and not line.startswith(" ")]
        assert len(unindented) == 1, block  # frames are indented; only the error line is not
        assert unindented[0].startswith(("ValueError: a bug", "hl.errors.DistributedError")), block


@needs_mpi
def test_stuck_rank_is_reported_after_the_timeout_and_the_job_ends(tmp_path):
    proc, took = run("fault.py", tmp_path / "x", "--mode", "hang", n=2, timeout_s=3,
                     check=False)
    assert proc.returncode != 0
    assert took < 3 + 3 + STARTUP_S, took  # timeout, grace, start-up
    assert "waited 3 s for the other ranks" in proc.stderr, proc.stderr[-3000:]


@needs_mpi
def test_killed_rank_stops_every_other_rank_with_an_hl_error_within_the_timeout(tmp_path):
    """SIGKILL leaves no word. hl finds the dead process (same machine) in its waits and
    its watchdog; the launcher's guard process keeps MPICH from killing the other ranks
    silently first (guard.py), so each of them says why it stops, and the guard names the
    signal."""
    proc, took = run("fault.py", tmp_path / "x", "--mode", "kill", n=4,
                     timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert took < TIMEOUT_S + STARTUP_S, took
    err = proc.stderr
    assert "waited" not in err  # not by the timeout
    assert "rank 1 (process " in err and ") was killed by SIGKILL" in err, err[-3000:]
    for r in (0, 2, 3):
        assert (f"hl.errors.DistributedError: hl.distributed: DistOpt's gradient allreduce "
                f"stopped on rank {r} because rank 1 (process ") in err, err[-3000:]
    assert err.count("has died without a word") == 3


class _FakeWorld:
    """What faults.check reads of a group: this rank and where the others run."""

    def __init__(self, peers, rank=0):
        self.peers, self.rank, self.size = peers, rank, len(peers)
        self.host = peers[rank][0]


def test_a_dead_peer_process_is_an_hl_error_naming_it():
    import os
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()  # gone (reaped): what a killed rank looks like to its neighbours
    world = _FakeWorld([("here", os.getpid()), ("here", child.pid)])
    try:
        faults.check(world, "the test's allreduce")
    except errors.DistributedError as e:
        assert f"rank 1 (process {child.pid} on here) has died" in str(e)
        assert "the test's allreduce" in str(e)
    else:
        raise AssertionError("no error for a dead peer")
    finally:
        faults._state["failed"].clear()


@needs_mpi
def test_different_models_are_refused_naming_the_first_difference(tmp_path):
    proc, _ = run("mismatch.py", tmp_path / "x", "--what", "model", n=2,
                  timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert ("rank 1 built a different model from rank 0: tensor 0 is 'fc1.W' float32 "
            "(64, 33) on rank 1 but 'fc1.W' float32 (64, 32) on rank 0") in proc.stderr, \
        proc.stderr[-3000:]


@needs_mpi
def test_different_hl_versions_are_refused(tmp_path):
    proc, _ = run("mismatch.py", tmp_path / "x", "--what", "version", n=2,
                  timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert f"rank 1 runs hl 0.0.0-other" in proc.stderr and \
        f"rank 0 hl {hl.__version__}" in proc.stderr, proc.stderr[-3000:]


@needs_mpi
def test_different_bucket_view_settings_are_refused(tmp_path):
    proc, _ = run("mismatch.py", tmp_path / "x", "--what", "views", n=2,
                  timeout_s=TIMEOUT_S, check=False)
    assert proc.returncode != 0
    assert ("DistOpt's gradient_as_bucket_view is False on rank 1 but True on rank 0"
            in proc.stderr), proc.stderr[-3000:]


@needs_mpi
def test_rank_and_sizes_and_launcher_threads(tmp_path):
    run("basics.py", tmp_path / "b", n=4)
    infos = [load_json(f"{tmp_path / 'b'}.rank{r}.json") for r in range(4)]
    assert [i["rank"] for i in infos] == [0, 1, 2, 3]
    assert all(i["world_size"] == 4 for i in infos)
    assert sorted(i["local_rank"] for i in infos) == [0, 1, 2, 3]  # one machine
    assert [i["is_main"] for i in infos] == [True, False, False, False]
    assert all(i["devices"] == ["cpu:0", "cpu:1", "cpu:2", "cpu:3"] for i in infos)


def test_alone_everything_is_one_process():
    assert hl.distributed.world_size() == 1 and hl.distributed.rank() == 0
    assert hl.distributed.local_rank() == 0 and hl.distributed.is_main()
    hl.distributed.barrier()  # returns at once
    assert np.isscalar(hl.distributed.world_size())
