"""Tensors on cuda: copies, views, the allocator, synchronisation, several devices and
threads, the Philox stream, and the error paths (a failing launch, out of memory, a bad index,
no CUDA at all). Under HL_CUDA_EMULATE=1 the emulated backend serves; on a GPU the same tests
run for real, except the two that need the emulation's hooks (marked below)."""
import ctypes
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

import hl

pytestmark = pytest.mark.gpu
needs_emulation = pytest.mark.skipif(not hl.cuda.is_emulated(),
                                     reason="needs the emulation's fault hooks")


def _emu():
    """The emulated library hl loaded (dlopen of the same path returns the same handle)."""
    from hl import _cuda_libs
    return ctypes.CDLL(_cuda_libs.library_path())


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool",
                                   "float16"])
def test_round_trip_every_dtype(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 5).astype(dtype)
    t = hl.tensor(a, device="cuda")
    assert t.device == hl.cuda(0) and str(t.device) == "cuda:0"
    np.testing.assert_array_equal(t.numpy(), a)
    np.testing.assert_array_equal(t.cpu().numpy(), a)
    np.testing.assert_array_equal(hl.tensor(a).to("cuda:0").to("cpu").numpy(), a)


def test_numpy_of_a_cuda_tensor_is_a_copy():
    t = hl.zeros((3,), device="cuda")
    v = t.numpy()
    v[:] = 7
    np.testing.assert_array_equal(t.numpy(), np.zeros(3, np.float32))


def test_views_and_in_place_writes():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)
    t = hl.tensor(a, device="cuda")
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t[1:, ::2].numpy(), a[1:, ::2])
    t[1] = 9
    t[:, 0] = hl.tensor(np.array([1, 2, 3, 4], np.float32), device="cuda")
    a[1] = 9
    a[:, 0] = [1, 2, 3, 4]
    np.testing.assert_array_equal(t.numpy(), a)
    t.fill_(2.5)
    np.testing.assert_array_equal(t.numpy(), np.full((4, 5), 2.5, np.float32))


def test_mixing_devices_is_an_error():
    with pytest.raises(hl.errors.DeviceError, match="different devices"):
        hl.ones((2,), device="cuda") + hl.ones((2,))


def test_allocator_reuses_freed_blocks():
    hl.cuda.synchronize()
    hl.cuda.empty_cache()
    before = hl.cuda.memory_stats()
    t = hl.empty((1000,), device="cuda")
    grown = hl.cuda.memory_stats()
    assert grown["in_use"] >= before["in_use"] + 4000
    del t
    freed = hl.cuda.memory_stats()
    assert freed["in_use"] == before["in_use"] and freed["cached"] >= 4000
    t = hl.empty((1000,), device="cuda")  # same size class: from the cache
    again = hl.cuda.memory_stats()
    assert again["cached"] == freed["cached"] - (grown["in_use"] - before["in_use"])
    assert again["peak"] >= again["in_use"] and hl.cuda.memory_allocated() == again["in_use"]
    del t
    hl.cuda.empty_cache()
    assert hl.cuda.memory_stats()["cached"] == 0


def test_one_stream_keeps_order_and_synchronize_waits():
    x = hl.tensor(np.arange(1000, dtype=np.float64), device="cuda")
    y = x
    for _ in range(50):  # 50 queued kernels, each reading the previous one's output
        y = y * 1.01 + 1
    hl.cuda.synchronize()
    hl.cuda.synchronize("cuda:0")
    want = np.arange(1000, dtype=np.float64)
    for _ in range(50):
        want = want * 1.01 + 1
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-12)


def test_threads_get_the_answers_one_thread_gets():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    want = (hl.tensor(a) @ hl.tensor(a)).relu().sum(axis=0).numpy()
    results, errors = [], []

    def work():
        try:
            for _ in range(5):
                t = hl.tensor(a, device="cuda")
                results.append((t @ t).relu().sum(axis=0).numpy())
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors and len(results) == 20
    for r in results:
        np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [hl.float32, hl.float64])
def test_random_numbers_are_the_cpu_philox_stream(dtype):
    draws = {}
    for device in ("cpu", "cuda"):
        hl.manual_seed(1234)
        draws[device] = [hl.uniform(1001, low=-2, high=3, dtype=dtype, device=device).numpy(),
                         hl.normal(999, mean=1, std=2, dtype=dtype, device=device).numpy(),
                         hl.bernoulli(1003, p=0.3, dtype=dtype, device=device).numpy()]
    cpu, cuda = draws["cpu"], draws["cuda"]
    np.testing.assert_array_equal(cuda[0], cpu[0])            # uniform: bit for bit
    np.testing.assert_allclose(cuda[1], cpu[1], rtol=1e-6, atol=1e-6)  # normal: device libm
    np.testing.assert_array_equal(cuda[2], cpu[2])            # bernoulli: bit for bit
    assert 0.25 < cuda[2].mean() < 0.35


def test_a_bad_index_is_an_index_error_and_writes_nothing():
    x = hl.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device="cuda")
    with pytest.raises(hl.errors.IndexError, match=r"index 4 is out of range for axis 1 of "
                                                   r"size 4 \(valid indices are -4 to 3\)"):
        hl.gather(x, hl.tensor(np.array([0, 4, 9]), device="cuda"), axis=1)
    with pytest.raises(hl.errors.IndexError, match=r"index -4 is out of range for axis 0"):
        hl.gather(x, hl.tensor(np.array([-4], np.int32), device="cuda"), axis=0)
    logits = hl.zeros((3, 5), device="cuda")
    with pytest.raises(hl.errors.IndexError, match=r"target label 7 \(at flat position 1 .*"
                                                   r"out of range for 5 classes"):
        hl.softmax_cross_entropy(logits, hl.tensor(np.array([1, 7, 9]), device="cuda"))
    # the device is still usable: the error flag was cleared
    np.testing.assert_array_equal(
        hl.gather(x, hl.tensor(np.array([3]), device="cuda"), axis=1).numpy().ravel(),
        [3, 7, 11])


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_every_indexing_op_refuses_a_bad_index_as_the_cpu_does(dtype):
    """gather, gather_elements, scatter_elements (replace and add), gather_grad (embedding's
    backward) and topk's scatter: a bad index on cuda is the CPU's IndexError, in half types
    too (whose gradients sum in a float32 work buffer), and the device stays usable."""
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    bad2 = np.array([[0, 4], [1, 0]])
    calls = {
        "gather": lambda x, i: hl.ops.gather_forward(x, i[0], 1),
        "gather_elements": lambda x, i: hl.ops.gather_elements_forward(x, i, 1),
        "scatter_elements": lambda x, i: hl.ops.scatter_elements_forward(
            x, i, hl.ones((2, 2), dtype=x.dtype.name, device=x.device), 1),
        "scatter_elements add": lambda x, i: hl.ops.scatter_elements_forward(
            x, i, hl.ones((2, 2), dtype=x.dtype.name, device=x.device), 1, "add"),
        "gather_grad": lambda x, i: hl.ops.gather_grad(x[:, :2], i[0], 1, (3, 4)),
    }
    for name, call in calls.items():
        messages = []
        for device in ("cpu", "cuda"):
            x = hl.tensor(data, device=device)
            if device == "cuda":
                x = x.astype(dtype)
            with pytest.raises(hl.errors.IndexError) as e:
                call(x, hl.tensor(bad2, device=device))
            messages.append(str(e.value))
        assert "index 4 is out of range for axis 1 of size 4" in messages[1], (name, messages)
        assert messages[0] == messages[1], name
    x = hl.tensor(data, device="cuda").astype(dtype)  # the error flag was cleared
    good = hl.ops.gather_grad(x[:, :2], hl.tensor(np.array([3, 3]), device="cuda"), 1, (3, 4))
    np.testing.assert_array_equal(good.astype("float32").numpy()[:, 3], data[:, :2].sum(1))


@needs_emulation
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_a_failing_launch_in_a_kernel_with_a_work_buffer_releases_it(dtype):
    """The half gradients hold the device's work buffer while their kernels run: a failing
    launch among them is a DeviceError naming the op, and the buffer's lock is released (the
    next call runs instead of deadlocking)."""
    dy = hl.tensor(np.ones((5, 3), np.float32), device="cuda").astype(dtype)
    ix = hl.tensor(np.array([0, 2, 2, 1, 2]), device="cuda")
    before = _emu().hl_cuda_emu_launch_count()
    hl.ops.gather_grad(dy, ix, 0, (4, 3))
    assert _emu().hl_cuda_emu_launch_count() - before == 3
    for skip in range(3):  # the index check, the sum, the rounding: each may fail
        _emu().hl_cuda_emu_fail_launch_after(skip, 0)
        with pytest.raises(hl.errors.DeviceError, match="gather_grad: the CUDA kernel launch "
                                                        "failed"):
            hl.ops.gather_grad(dy, ix, 0, (4, 3))
    got = hl.ops.gather_grad(dy, ix, 0, (4, 3)).astype("float32").numpy()
    np.testing.assert_array_equal(got[:, 0], [1, 1, 3, 0])


@needs_emulation
def test_out_of_memory_for_a_work_buffer_is_a_memory_error(monkeypatch):
    """A half scatter-add sums in a float32 buffer twice the data's size: when the device
    cannot hold it, a MemoryError names the op and the buffer; nothing is left half done."""
    x = hl.zeros((4_000_000,), device="cuda").astype("float16")  # 8 MB; the buffer 16 MB
    ix = hl.tensor(np.array([5, 5, 7]), device="cuda")
    upd = hl.ones((3,), device="cuda").astype("float16")
    hl.cuda.synchronize()
    hl.cuda.empty_cache()
    used = hl.cuda.memory_stats()["in_use"]
    monkeypatch.setenv("HL_CUDA_EMU_MEMORY_MB", str((used >> 20) + 12))
    with pytest.raises(hl.errors.MemoryError, match="scatter_elements: out of cuda memory for "
                                                    "a float32 buffer of 4000000 elements"):
        hl.ops.scatter_elements_forward(x, ix, upd, 0, "add")
    monkeypatch.delenv("HL_CUDA_EMU_MEMORY_MB")
    y = hl.ops.scatter_elements_forward(x, ix, upd, 0, "add")
    assert y.astype("float32").numpy()[[5, 7]].tolist() == [2.0, 1.0]


@needs_emulation
def test_a_failing_launch_is_a_device_error():
    x = hl.ones((5,), device="cuda")
    _emu().hl_cuda_emu_fail_next_launch(0)
    with pytest.raises(hl.errors.DeviceError, match="exp: the CUDA kernel launch failed: "
                                                    "kernel unary_kernel failed"):
        x.exp()
    np.testing.assert_allclose(x.exp().numpy(), np.full(5, np.e, np.float32), rtol=1e-6)


@needs_emulation
def test_out_of_device_memory_is_a_memory_error(monkeypatch):
    hl.cuda.synchronize()
    monkeypatch.setenv("HL_CUDA_EMU_MEMORY_MB", "64")
    with pytest.raises(hl.errors.MemoryError, match="out of memory allocating 400000000 bytes "
                                                    "on cuda"):
        hl.empty((100_000_000,), device="cuda")
    monkeypatch.delenv("HL_CUDA_EMU_MEMORY_MB")
    assert hl.ones((10,), device="cuda").sum().item() == 10


def _run(code, **env):
    full = dict(os.environ, **env)
    for k, v in env.items():
        if v is None:
            full.pop(k)
    return subprocess.run([sys.executable, "-c", code], env=full, capture_output=True,
                          text=True, timeout=120)


def test_without_cuda_hl_imports_and_says_why():
    code = ("import hl, hl.singa.device as sd\n"
            "assert not hl.cuda_available() and hl.cuda.device_count() == 0\n"
            "why = hl.cuda.unavailable_reason(); assert why, why\n"
            "for f in (lambda: hl.ones((2,), device='cuda'), sd.create_cuda_gpu):\n"
            "    try: f()\n"
            "    except hl.errors.DeviceError as e: assert why[:40] in str(e), (why, str(e))\n"
            "    else: raise SystemExit('no DeviceError')\n"
            "print('ok', why)")
    r = _run(code, HL_CUDA_EMULATE=None, HL_CUDA="0")  # HL_CUDA=0: off even on a GPU machine
    assert r.returncode == 0 and r.stdout.startswith("ok HL_CUDA=0"), r.stdout + r.stderr


@needs_emulation
def test_two_devices_and_copies_between_them():
    code = ("import hl, numpy as np\n"
            "assert hl.cuda.device_count() == 2\n"
            "a = np.arange(6.).reshape(2, 3)\n"
            "t = hl.tensor(a, device='cuda:1')\n"
            "u = (t * 2).to('cuda:0')\n"
            "assert str(u.device) == 'cuda:0' and str((t * 2).device) == 'cuda:1'\n"
            "np.testing.assert_array_equal(u.numpy(), a * 2)\n"
            "assert hl.cuda.memory_stats('cuda:1')['in_use'] > 0\n"
            "try: hl.ones(2, device='cuda:2')\n"
            "except hl.errors.DeviceError: print('ok')\n")
    r = _run(code, HL_CUDA_EMULATE="1", HL_CUDA_EMU_DEVICES="2")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
