"""The NCCL glue (libcore/cuda/nccl.cu) and, under HL_CUDA_EMULATE=1, the emulated NCCL
(libcore/cuda/emu/nccl.cpp), driven from one process: two threads are the two ranks of one
communicator (ctypes releases the GIL inside each call, as NCCL's blocking calls need).
References: numpy's sums of the same arrays, in rank order. On a real GPU with one device
the two ranks cannot share it (NCCL refuses a duplicate GPU), so these run emulated only;
the mpiexec tests (tests/distributed/test_cuda.py) cover the training paths."""
import threading

import numpy as np
import pytest

import hl
from hl import _nccl

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not hl.cuda.is_emulated(),
                                 reason="two ranks on one GPU: the emulated NCCL only")]


def _two_ranks(body):
    """Runs body(rank, comm) on two threads, ranks of one new communicator; returns their
    results (an exception is returned, not raised, so both threads always end)."""
    uid = _nccl.unique_id()
    out = [None, None]

    def run(rank):
        try:
            comm = _nccl.init(2, uid, rank, 0)
            out[rank] = body(rank, comm)
        except Exception as e:  # handed to the test
            out[rank] = e

    threads = [threading.Thread(target=run, args=(r,)) for r in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not any(t.is_alive() for t in threads), "a rank is stuck"
    return out


@pytest.mark.parametrize("dtype,n", [("float32", 1000), ("float64", 7), ("int32", 33),
                                     ("int64", 5), ("float16", 100), ("float32", 700_001)])
def test_all_reduce_sums_every_rank_in_place(dtype, n):
    """700,001 float32 is 2.8 MB: more than one chunk of the emulation's 1 MB slots."""
    rng = np.random.default_rng(0)
    values = [(rng.standard_normal(n) * 8).astype(dtype) for _ in range(2)]

    def body(rank, comm):
        t = hl.tensor(values[rank], device="cuda")
        _nccl.all_reduce_(comm, t)
        _nccl.mark(comm)
        while not _nccl.query(comm):
            pass
        result = t.numpy()
        _nccl.destroy(comm)
        return result

    got = _two_ranks(body)
    if dtype == "float16":  # summed in float, rounded once
        want = (values[0].astype(np.float32) + values[1].astype(np.float32)).astype(np.float16)
    else:
        want = values[0] + values[1]
    for r in (0, 1):
        assert not isinstance(got[r], Exception), got[r]
        np.testing.assert_array_equal(got[r], want)


def test_broadcast_copies_the_roots_values():
    def body(rank, comm):
        t = hl.tensor(np.full((3, 4), float(rank + 1)), device="cuda")
        _nccl.broadcast_(comm, t, root=1)
        _nccl.mark(comm)
        while not _nccl.query(comm):
            pass
        _nccl.destroy(comm)
        return t.numpy()

    for got in _two_ranks(body):
        np.testing.assert_array_equal(got, np.full((3, 4), 2.0))


def test_a_peer_that_aborts_stops_the_waiting_rank_with_a_remote_error():
    """Rank 1 aborts instead of taking part (what a failing rank's hook does); rank 0,
    waiting in the collective, gets ncclRemoteError naming rank 1, not a hang."""
    def body(rank, comm):
        if rank == 1:
            _nccl.abort(comm)
            return "aborted"
        t = hl.tensor(np.ones(10, np.float32), device="cuda")
        try:
            _nccl.all_reduce_(comm, t)
        finally:
            _nccl.abort(comm)

    got = _two_ranks(body)
    assert got[1] == "aborted"
    assert isinstance(got[0], _nccl.Error) and got[0].code == 6, got[0]  # ncclRemoteError
    assert "rank 1 aborted the communicator" in str(got[0])


def test_abort_from_another_thread_ends_a_waiting_collective():
    """hl's watchdog aborts from its own thread while the main thread waits."""
    uid = _nccl.unique_id()
    result = {}
    ready = threading.Event()

    def rank0():
        comm = _nccl.init(2, uid, 0, 0)
        result["comm"] = comm
        ready.set()
        try:
            _nccl.all_reduce_(comm, hl.tensor(np.ones(4, np.float32), device="cuda"))
        except _nccl.Error as e:
            result["error"] = e

    def rank1():  # joins, then never takes part
        result["comm1"] = _nccl.init(2, uid, 1, 0)

    threads = [threading.Thread(target=rank0), threading.Thread(target=rank1)]
    for t in threads:
        t.start()
    ready.wait(30)
    threads[1].join(30)
    import time
    time.sleep(0.2)  # rank 0 is inside the collective now
    _nccl.abort(result["comm"])
    threads[0].join(30)
    assert not threads[0].is_alive()
    assert "the communicator was aborted" in str(result["error"]) or \
        result["error"].code in (2, 5), result["error"]
    _nccl.destroy(result["comm1"])
    # an aborted communicator refuses further work, naming why
    with pytest.raises(_nccl.Error, match="aborted"):
        _nccl.all_reduce_(result["comm"], hl.tensor(np.ones(4, np.float32), device="cuda"))


def test_bad_buffers_are_refused_naming_the_tensor():
    def body(rank, comm):
        errors = []
        for t in (hl.tensor(np.ones((4, 4), np.float32), device="cuda").T,  # not contiguous
                  hl.tensor(np.ones(4, np.float32)),                        # on the CPU
                  hl.tensor(np.ones(4, bool), device="cuda")):              # no NCCL type
            try:
                _nccl.all_reduce_(comm, t)
            except _nccl.Error as e:
                errors.append(str(e))
        _nccl.destroy(comm)
        return errors

    for errors in _two_ranks(body):
        assert len(errors) == 3, errors
        assert "is not contiguous" in errors[0]
        assert "not on the communicator's device" in errors[1]
        assert "cannot be reduced by NCCL" in errors[2]
        assert all("invalid argument" in e for e in errors), errors


def test_nccl_is_served_by_the_emulation_and_the_wheel_is_found_by_path():
    assert _nccl.available() is None
    assert _nccl.version()[0] == 2
    path = _nccl.library_path()  # the nvidia-nccl-cu13 wheel, when installed
    assert path is None or path.endswith("nvidia/nccl/lib/libnccl.so.2")
    assert hl.distributed.backend() is None  # alone: no group
