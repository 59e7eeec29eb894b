"""libcore's work-claiming thread pool (libcore/src/cpu/thread_pool.c, docs/design-notes.md
"Threads"): chunks claimed by the caller and the workers, a loop that finishes on the caller
alone while the workers claim nothing (a descheduled worker), nested loops inline, failures
inside a chunk returned as hl errors, set_num_threads, two Python threads at once, fork. And
the kernels moved onto it give, bit for bit, at two threads what they give at one.

The pool is driven through hl_pool_probe (hl_core.h), whose items write the slot of the thread
that ran them; the kernels through hl's public API."""
import os
import re
import threading

import numpy as np
import pytest

import hl
from hl import _core

ffi, lib = _core.ffi, _core.lib
ZOO = os.environ.get("HL_ONNX_ZOO") or "/work/shared/onnx-zoo"


@pytest.fixture
def threads():
    """Sets hl's thread count for a test and restores it afterwards."""
    before = hl.get_num_threads()
    yield hl.set_num_threads
    hl.set_num_threads(before)


def probe(n, grain=1, fail_at=-1, nested=0, spin_ns=0, hold_workers=False):
    """Slots of the threads that ran items 0 .. n-1 (raises what the core reports)."""
    slots = np.full(n, -7, dtype=np.int32)
    ptr = ffi.cast("int32_t *", slots.ctypes.data) if n else ffi.NULL
    _core.check(lib.hl_pool_probe(n, grain, ptr, fail_at, nested, spin_ns, int(hold_workers)))
    return slots


def probe_lanes(n, nested=0, spin_ns=0, hold_workers=False):
    """probe's slots for a loop in lanes (hl_parallel_lanes)."""
    slots = np.full(n, -7, dtype=np.int32)
    ptr = ffi.cast("int32_t *", slots.ctypes.data) if n else ffi.NULL
    _core.check(lib.hl_pool_probe_lanes(n, ptr, nested, spin_ns, int(hold_workers)))
    return slots


def lane_of(n, t):
    """Which lane each of n items is in, for t threads: lane l holds [l n / t, (l + 1) n / t)."""
    firsts = [n * lane // t for lane in range(t + 1)]
    return np.searchsorted(firsts, np.arange(n), side="right") - 1


def test_every_item_runs_once_on_a_thread_of_the_loop(threads):
    threads(2)
    for n, grain in [(1, 1), (2, 1), (7, 3), (1000, 1), (1000, 999), (100_000, 64)]:
        slots = probe(n, grain)
        # -7 would be an item no chunk ran; a slot >= 2 a thread the loop may not use
        assert set(np.unique(slots)) <= {0, 1}, (n, grain, np.unique(slots))


def test_caller_and_worker_share_the_chunks(threads):
    threads(2)
    # 64 items of 0.5 ms: the worker wakes within that (retried: the host may be loaded)
    for _ in range(5):
        slots = probe(64, 1, spin_ns=500_000)
        if set(np.unique(slots)) == {0, 1}:
            break
    assert set(np.unique(slots)) == {0, 1}, np.bincount(slots)


def test_caller_finishes_alone_when_workers_claim_nothing(threads):
    """A descheduled worker: the caller claims every chunk and returns, never waiting for it."""
    threads(2)
    slots = probe(256, 1, spin_ns=10_000, hold_workers=True)
    assert (slots == 0).all()
    assert set(np.unique(probe(64, 1, spin_ns=100_000))) <= {0, 1}  # the pool works after


@pytest.mark.parametrize("t", [1, 2, 3, 4])
def test_lanes_run_every_item_once(threads, t):
    threads(t)
    for n in (0, 1, 2, 3, 7, 64, 1000, 100_003):
        slots = probe_lanes(n)
        assert set(np.unique(slots)) <= set(range(t)), (n, np.unique(slots))


def test_each_thread_starts_with_its_own_lane(threads):
    """Slot l runs the first chunk of lane l (in lanes, threads take their own items first,
    then the others' from the back): 4 chunks a lane of 0.4 ms each, so the worker is up
    long before the caller could reach lane 1's first chunk."""
    threads(2)
    n = 64
    lanes = lane_of(n, 2)
    assert lanes[31] == 0 and lanes[32] == 1
    def own_lanes_first(slots):
        # slot l ran lane l's first chunk, and most of each lane (the other thread may take
        # chunks from its back)
        return slots[0] == 0 and slots[32] == 1 and \
            all((slots[lanes == lane] == lane).mean() >= 0.5 for lane in (0, 1))

    for _ in range(8):  # retried: the host may deschedule a thread for milliseconds
        probe_lanes(n)  # the worker is awake
        slots = probe_lanes(n, spin_ns=50_000)
        if own_lanes_first(slots):
            break
    assert own_lanes_first(slots), slots


def test_lanes_finish_on_the_caller_when_workers_claim_nothing(threads):
    """A descheduled worker: the caller takes the worker's lane too, from its back."""
    threads(2)
    slots = probe_lanes(256, spin_ns=10_000, hold_workers=True)
    assert (slots == 0).all()
    assert set(np.unique(probe_lanes(64, spin_ns=50_000))) <= {0, 1}


def test_nested_loops_in_lanes_run_inline(threads):
    threads(2)
    slots = probe_lanes(64, nested=16, spin_ns=20_000)
    assert (slots >= 0).all(), slots


def test_nested_loops_run_inline_on_their_thread(threads):
    threads(2)
    slots = probe(64, 1, nested=16, spin_ns=50_000)
    assert (slots >= 0).all(), slots  # -1: a nested item left its thread or its slot changed


@pytest.mark.parametrize("fail_at", [0, 37, 63])
def test_a_failing_chunk_raises_an_hl_error(threads, fail_at):
    threads(2)
    with pytest.raises(hl.errors.ValueError, match=f"pool probe: item {fail_at} failed"):
        probe(64, 1, fail_at=fail_at, spin_ns=20_000)
    assert set(np.unique(probe(64, 1))) <= {0, 1}  # and the pool is free again


def test_bad_probe_arguments_are_an_hl_error():
    with pytest.raises(hl.errors.ValueError, match="grain 0"):
        _core.check(lib.hl_pool_probe(4, 0, ffi.NULL, -1, 0, 0, 0))


def test_set_num_threads_bounds_the_slots(threads):
    threads(1)
    assert (probe(200, 1, spin_ns=20_000) == 0).all()
    threads(3)
    for _ in range(5):
        slots = probe(120, 1, spin_ns=200_000)
        if len(np.unique(slots)) > 1:
            break
    assert set(np.unique(slots)) <= {0, 1, 2} and len(np.unique(slots)) > 1
    threads(2)
    assert set(np.unique(probe(200, 1, spin_ns=20_000))) <= {0, 1}
    # the third worker, idle now, takes no chunk of a loop in lanes either (it once stole
    # from the others' lanes)
    for _ in range(3):
        assert set(np.unique(probe_lanes(200, spin_ns=20_000))) <= {0, 1}
    threads(1)
    assert (probe_lanes(64, spin_ns=10_000) == 0).all()


def test_two_python_threads_use_the_pool_at_once(threads):
    """One thread's loop has the pool, the other's runs inline: both complete, no deadlock."""
    threads(2)
    out, errors = {}, []

    def body(i):
        try:
            for k in range(20):
                out[i, k] = probe(40, 1, spin_ns=20_000, nested=4 if i else 0)
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    ts = [threading.Thread(target=body, args=(i,)) for i in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not any(t.is_alive() for t in ts), "a thread is stuck in the pool"
    assert not errors, errors
    assert all(set(np.unique(s)) <= {0, 1} for s in out.values())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_gets_a_fresh_pool(threads):
    threads(2)
    x = hl.tensor(np.linspace(-3, 3, 300_000, dtype=np.float32))
    want = (x.tanh() * 3 + x).numpy()
    probe(64, 1, spin_ns=10_000)  # the parent's workers exist
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its pool has no workers until its first loop starts them
        ok = False
        try:
            slots = probe(64, 1, spin_ns=10_000)
            got = (x.tanh() * 3 + x).numpy()
            ok = set(np.unique(slots)) <= {0, 1} and np.array_equal(got, want)
        finally:
            os.write(w, b"1" if ok else b"0")
            os._exit(0)
    os.close(w)
    answer = os.read(r, 1)
    os.waitpid(pid, 0)
    assert answer == b"1"


# ---- kernels on the pool: two threads give what one gives, bit for bit ----

def _kernels_on_the_pool(seed):
    """name -> array: one call of each kernel family moved onto the pool. (Not OpenBLAS's
    products, which the pool also runs: OpenBLAS splits its sums by its thread count.)"""
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    T = hl.tensor
    v = T(f(200_003))
    out = {
        "elementwise": ((v.exp() * v.tanh() + v.sigmoid()) / (v.abs() + 1)).numpy(),
        "broadcast": (T(f(300, 257)) * T(f(257)) + T(f(300, 1))).numpy(),
        "outer": (T(f(700, 1)) @ T(f(1, 513))).numpy(),
        "depthwise": hl.conv2d(T(f(2, 32, 40, 40)), T(f(32, 1, 3, 3)), padding=1,
                               groups=32).numpy(),
        "conv_3x3": hl.conv2d(T(f(2, 16, 30, 30)), T(f(32, 16, 3, 3)), padding=1).numpy(),
    }
    # a packed 1x1 convolution with its epilogue (cpu/conv_packed.c), as ONNX inference runs it
    x1, w1 = T(f(1, 64, 28, 28)), T(f(96, 64, 1, 1))
    out["conv_packed"] = hl.ops.conv_fused_forward(
        x1, w1, T(f(96)), residual=T(f(1, 96, 28, 28)), act="clip", alpha=0.0, beta=6.0,
        packed=hl.ops.conv_pack(w1)).numpy()
    # Adam's update of a large parameter (cpu/optim.c), three steps
    p = hl.Tensor(f(300_001), requires_grad=True, stores_grad=True, name="p")
    opt = hl.opt.Adam(lr=1e-2)
    for _ in range(3):
        opt.update(p, T(f(300_001)))
    out["adam"] = p.numpy()
    return out


def test_kernels_on_the_pool_bitwise_at_one_and_two_threads(threads):
    threads(1)
    one = _kernels_on_the_pool(3)
    threads(2)
    for _ in range(2):
        two = _kernels_on_the_pool(3)
        for name in one:
            assert np.array_equal(one[name], two[name], equal_nan=True), name


@pytest.mark.parametrize("model", ["mobilenet_v2"])
def test_onnx_model_bitwise_at_one_and_two_threads(threads, model):
    """Packed 1x1 and depthwise convolutions, fused epilogues, Gemm: the inference path.
    (ResNet-18's and ShuffleNet's results depend on the thread count, on main as here: their
    stems and some 3x3 layers are OpenBLAS products.)"""
    import hl.onnx
    path = os.path.join(ZOO, f"{model}-op17.onnx")
    data = np.load(os.path.join(ZOO, f"{model}.npz"))
    feeds = {k[len("in_"):]: data[k] for k in data.files if k.startswith("in_")}
    assert feeds, data.files
    threads(1)
    one = hl.onnx.prepare(path).run(feeds)
    threads(2)
    two = hl.onnx.prepare(path).run(feeds)
    for a, b in zip(one, two):
        assert np.array_equal(np.asarray(a), np.asarray(b))


# ---- recording the loops (hl_pool_trace_start, hl._pool_trace) ----------------------------

def _consistent(r, threads):
    """What every record must say of itself, whatever the timing: its chunks all ran, on the
    loop's slots, inside its wall time."""
    assert r["chunks_run"].sum() == r["chunks"], r
    assert r["threads"] == threads, r
    assert r["end_ns"] >= r["start_ns"] and r["fn"] != 0, r
    assert (r["busy_ns"] >= 0).all()
    assert r["busy_ns"].sum() <= (r["end_ns"] - r["start_ns"]) * threads, r
    assert (r["chunks_run"][threads:] == 0).all(), r


def test_recording_gives_one_record_a_loop(threads):
    from hl import _pool_trace
    threads(2)
    with _pool_trace.recording() as rec:
        probe(64, 1, spin_ns=20_000)
        probe(1000, 100)
    loops = rec[0]
    assert len(loops) == 2
    assert list(loops["items"]) == [64, 1000] and list(loops["chunks"]) == [8, 8]
    for r in loops:
        _consistent(r, 2)
    assert loops[0]["busy_ns"].sum() >= 64 * 20_000   # the items' spins ran inside chunks
    threads(1)
    with _pool_trace.recording() as rec:
        probe(10, 1)
    (r,) = rec[0]
    _consistent(r, 1)
    assert r["busy_ns"][0] == r["end_ns"] - r["start_ns"]


def test_recording_skips_nested_loops_and_stops_at_its_capacity(threads):
    from hl import _pool_trace
    threads(2)
    with _pool_trace.recording() as rec:
        probe(16, 1, nested=8)     # 16 nested loops run inline inside the chunks
    assert len(rec[0]) == 1 and rec[0][0]["items"] == 16
    with _pool_trace.recording(capacity=3) as rec:
        for _ in range(10):
            probe(100, 10)
    assert len(rec[0]) == 3
    with _pool_trace.recording():
        with pytest.raises(hl.errors.ValueError, match="recording is on already"):
            with _pool_trace.recording():
                pass
    assert lib.hl_pool_trace_stop() == 0   # off again: nothing to stop
    # records the C side would write past: refused before it sees them
    for bad in (np.zeros(8, dtype=np.int64), np.zeros((2, 4), dtype=_pool_trace.REGION),
                np.zeros(8, dtype=_pool_trace.REGION)[::2], [0] * 8):
        with pytest.raises(hl.errors.ValueError, match="pool_region_dtype"):
            _core.pool_trace_start(bad)
    assert lib.hl_pool_trace_stop() == 0
    with pytest.raises(hl.errors.ValueError, match="capacity"):
        _core.check(lib.hl_pool_trace_start(ffi.NULL, 0))


def test_recording_while_two_python_threads_use_the_pool(threads):
    """One thread holds the pool, the other's loops run inline: each loop still gets one
    record of its own, consistent with itself."""
    from hl import _pool_trace
    threads(2)
    loops_each, failures = 40, []

    def work():
        try:
            for _ in range(loops_each):
                probe(32, 1, spin_ns=2_000)
        except Exception as e:  # noqa: BLE001 - reported below
            failures.append(e)

    with _pool_trace.recording() as rec:
        workers = [threading.Thread(target=work) for _ in range(2)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
    assert not failures, failures
    assert len(rec[0]) == 2 * loops_each
    for r in rec[0]:
        _consistent(r, int(r["threads"]))
        assert r["threads"] in (1, 2) and r["items"] == 32


def test_the_pool_hands_over_jobs_without_a_data_race_under_thread_sanitizer():
    """libcore/tests/test_thread_pool.c, built from the pool's sources with -fsanitize=thread
    (`make test-tsan`, docs/sanitizers.md): loops at 1-8 threads, nested loops, failures,
    gangs, held workers and three callers at once. TSan aborts the run on the first race it
    sees; the program itself checks that every item ran exactly once."""
    import importlib.util
    import subprocess
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    spec = importlib.util.spec_from_file_location("hl_build_for_tsan",
                                                  os.path.join(root, "src", "hl", "_build.py"))
    build = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(build)
    try:
        out = build._make("test-tsan", libcore=os.path.join(root, "libcore"),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    except subprocess.CalledProcessError as e:
        pytest.fail(f"make test-tsan failed:\n{e.stdout[-4000:]}")
    assert "WARNING: ThreadSanitizer" not in out, out[-4000:]
    assert re.search(r"test_thread_pool: \d+ checks, 0 failed", out), out[-4000:]


# ---- the native libraries' own threads stay idle ----

_IDLE_PROBE = r"""
import os, sys, time
import numpy  # its own OpenBLAS: loaded, and its threads asleep, before hl comes
time.sleep(0.4)
def cpu_by_thread():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{tid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        out[tid] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return out
before = cpu_by_thread()
import hl
leaked = [k for k in ("GOMP_SPINCOUNT", "OPENBLAS_THREAD_TIMEOUT") if k in os.environ
          and os.environ[k] != os.environ.get("HL_TEST_KEEP_" + k)]
time.sleep(float(sys.argv[1]))
new = {t: s for t, s in cpu_by_thread().items() if t not in before}
print(len(new), sum(new.values()), ",".join(leaked))
"""


def _threads_started_by_import(wait_s, **env):
    """(threads `import hl` started, their CPU seconds over wait_s, variables it left set)."""
    import subprocess
    import sys
    full = {k: v for k, v in os.environ.items()
            if k not in ("GOMP_SPINCOUNT", "OPENBLAS_THREAD_TIMEOUT", "GOTO_THREAD_TIMEOUT")}
    full.update(env)
    full.update({"HL_TEST_KEEP_" + k: v for k, v in env.items()})
    out = subprocess.run([sys.executable, "-c", _IDLE_PROBE, str(wait_s)], env=full, text=True,
                         check=True, stdout=subprocess.PIPE).stdout.split()
    return int(out[0]), float(out[1]), out[2] if len(out) > 2 else ""


@pytest.mark.skipif(not os.path.isdir("/proc/self/task") or (os.cpu_count() or 1) < 2,
                    reason="reads threads' CPU time from /proc (Linux); OpenBLAS starts "
                           "server threads only with two or more CPUs")
def test_import_leaves_no_native_thread_spinning():
    """OpenBLAS's server threads, which hl never wakes (its work runs on libcore's pool), sleep
    at once instead of spinning ~0.1 s on the cores the first products need; the variable that
    tells them so is not left set. A user's own OPENBLAS_THREAD_TIMEOUT wins: 2^30 cycles
    (~0.4 s) of spin shows up as CPU time, which is what makes the first check able to fail."""
    count, cpu, leaked = _threads_started_by_import(0.5)
    assert count >= 1, "OpenBLAS started no thread: the check below would prove nothing"
    assert cpu < 0.05, f"threads started by `import hl` spun {cpu:.3f} s of CPU while idle"
    assert leaked == ""
    count, cpu, leaked = _threads_started_by_import(0.5, OPENBLAS_THREAD_TIMEOUT="30")
    assert cpu > 0.1, f"the user's OPENBLAS_THREAD_TIMEOUT=30 was not kept (spun {cpu:.3f} s)"
    assert leaked == ""
