"""hl from several Python threads at once: cffi releases the GIL during core calls, so kernels,
the allocator, OpenBLAS (through the OpenMP threads callback) and the thread-local error
messages all run concurrently. Results must match numpy, and each thread's errors must carry
its own message."""
import threading

import numpy as np

import hl


def _work(seed, results, errors_seen):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((64, 48)).astype(np.float32)
    b = rng.standard_normal((48, 32)).astype(np.float32)
    x = rng.standard_normal((2, 3, 10, 10)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    ok = True
    for _ in range(20):
        m = (hl.tensor(a) @ hl.tensor(b)).relu().sum(axis=0).numpy()
        ok &= np.allclose(m, np.maximum(a @ b, 0).sum(axis=0), rtol=1e-4, atol=1e-4)
        y = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1)
        ok &= y.shape == (2, 4, 10, 10)
        try:  # an error on this thread must report this thread's shapes
            hl.ones(seed + 1, 2) + hl.ones(3, 5)
        except hl.errors.ShapeError as e:
            errors_seen.append((seed, str(e)))
    results[seed] = ok


def test_concurrent_calls_from_python_threads():
    results, errors_seen = {}, []
    threads = [threading.Thread(target=_work, args=(s, results, errors_seen)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {s: True for s in range(4)}
    assert len(errors_seen) == 4 * 20
    for seed, message in errors_seen:
        assert f"({seed + 1}, 2)" in message, message
