"""Copies between the host and cuda staged through the pinned buffer pool (libcore/cuda/
pinned.cu): exact round trips of every size class (one chunk, several chunks, an odd tail),
the host's memory free for reuse as soon as an upload returns, copies from several threads at
once, and the pool reusing its buffers. Under HL_CUDA_EMULATE=1 a copy through pinned memory
is done only when the stream is next ordered (as on a GPU, where it is a DMA queued behind the
stream's kernels), so a missing wait shows as wrong bytes."""
import ctypes
import threading

import numpy as np
import pytest

import hl

pytestmark = pytest.mark.gpu
CHUNK = 4 << 20  # pinned.cu's chunk


def _pinned_stats():
    from hl import _cuda_libs
    out = (ctypes.c_longlong * 3)()
    ctypes.CDLL(_cuda_libs.library_path()).hl_cuda_pinned_stats(out)
    return {"allocated": out[0], "reused": out[1], "pooled_bytes": out[2]}


@pytest.mark.parametrize("nbytes", [4, 64 << 10, CHUNK, 2 * CHUNK + 12])
def test_round_trip_is_exact(nbytes):
    rng = np.random.default_rng(nbytes)
    a = rng.integers(0, 2**31, nbytes // 4, dtype=np.int32)
    t = hl.tensor(a, device="cuda")
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal((t + 1).numpy(), a + 1)  # a kernel after the upload


def test_the_host_array_may_change_as_soon_as_the_upload_returns():
    for n in (1000, 3 * CHUNK // 8 + 5):  # one buffer; several chunks
        a = np.arange(n, dtype=np.float64)
        t = hl.tensor(a, device="cuda")
        a[:] = -1.0  # the upload's bytes are in a pinned buffer already
        np.testing.assert_array_equal(t.numpy(), np.arange(n, dtype=np.float64))


def test_uploads_in_a_row_each_keep_their_bytes():
    """Back to back, the second upload takes the buffer the first one's queued copy reads:
    the pool hands it out only after that copy."""
    for n in (100, CHUNK // 4 + 7):
        arrays = [np.full(n, k, np.float32) for k in range(4)]
        tensors = [hl.tensor(a, device="cuda") for a in arrays]
        for t, a in zip(tensors, arrays):
            np.testing.assert_array_equal(t.numpy(), a)


def test_copies_from_several_threads_are_each_exact():
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for k in range(4):
                a = rng.standard_normal(CHUNK // 8 * (1 + k % 3) + seed).astype(np.float32)
                t = hl.tensor(a, device="cuda")
                np.testing.assert_array_equal((t * 2.0).numpy(), a * 2)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors[0]


def test_the_pool_reuses_its_buffers():
    a = np.ones(CHUNK // 4 + 100, np.float32)  # two chunks each way
    hl.tensor(a, device="cuda").numpy()  # the pool holds buffers of this size class now
    before = _pinned_stats()
    for _ in range(5):
        np.testing.assert_array_equal(hl.tensor(a, device="cuda").numpy(), a)
    after = _pinned_stats()
    assert after["allocated"] == before["allocated"]
    assert after["reused"] >= before["reused"] + 5 * 3  # 2 buffers up, at least 1 down
    assert 0 < after["pooled_bytes"] <= 64 << 20
