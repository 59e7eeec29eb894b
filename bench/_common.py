"""What every benchmark script does first."""
import os
import sys
import time

_STARTED = time.monotonic()  # about when the process started: scripts import this first


def setup(threads):
    """Pins OpenMP / OpenBLAS / MKL to `threads` (before any library starts its pool) and
    lets the scripts import hl (src/) and the test helpers (tests/) from the checkout."""
    if threads:
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[var] = str(threads)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sys.path[:0] = [os.path.join(root, "src"), root]


def step_worker_args(lib, name, args, warmup=None):
    """The worker command line of a training-step benchmark (train.py, graph.py): one
    library, one model, the steps, warm-up and threads the user asked for."""
    return (["--worker", lib, "--only", name, "--steps", args.steps,
             "--warmup", args.warmup if warmup is None else warmup] +
            (["--threads", args.threads] if args.threads else []))


def run_worker(script, args, what):
    """Runs ``script`` again as a worker process (``python script *args``), each library is
    timed in a process of its own, and returns the dict it printed after ``RESULT``. A
    worker that fails ends the benchmark with its error output, naming ``what``."""
    import json
    import subprocess
    out = subprocess.run([sys.executable, os.path.abspath(script)] + [str(a) for a in args],
                         capture_output=True, text=True)
    if out.returncode != 0:
        sys.exit(f"{what}: the worker failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.split("RESULT ", 1)[1])


def settle():
    """Waits until the native libraries' start-up spin is over: numpy's bundled OpenBLAS
    starts its threads when numpy is imported, and they spin 2^28 cycles (~0.1 s) before they
    sleep, on the cores a run timed then would need (hl's own copy is told not to, hl/_core.py;
    numpy's is the user's). Timed runs start at least 0.3 s into the process."""
    time.sleep(max(0.0, _STARTED + 0.3 - time.monotonic()))


def time_steps(step, steps, warmup, clock="wall"):
    """Runs step() warmup times untimed, then steps times; the wall time of each timed run,
    or with clock "cpu" the process's CPU time (on a loaded host the wall clock mostly
    measures the wait for a core; CPU time with one thread does not)."""
    settle()
    now = time.process_time if clock == "cpu" else time.perf_counter
    for _ in range(warmup):
        step()
    times = []
    for _ in range(steps):
        t0 = now()
        step()
        times.append(now() - t0)
    return times


def report(result):
    """What a worker prints last: its result for run_worker."""
    import json
    print("RESULT " + json.dumps(result))


def machine_line():
    """The CPU's model name and the instruction set hl's kernels use on it (results differ
    between AVX2 and AVX-512 machines: say which one a figure comes from)."""
    import platform
    name = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as f:
            name = next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    import hl._core
    return f"CPU: {name}, {os.cpu_count()} logical cores; hl kernels: {hl._core.cpu_kernels()}"

