"""libcore's thread pool: a stream of short parallel loops at several thread counts (what a
model's hundreds of small regions look like), and the kernels whose loops run on the pool, at
1 and 2 threads.

    python bench/thread_pool.py                       # both parts
    python bench/thread_pool.py --only loops --threads 1,2,4 --spin 0,200000
    python bench/thread_pool.py --only kernels --repeat 9

`loops`: each job is hl_pool_probe over `--items` items that each busy-wait `--item-us`; the
figures are the median wall and CPU time per job over `--repeat` rounds of `--jobs` jobs.
`--spin` runs the stream once per value of HL_POOL_SPIN_NS (an idle worker's spin before it
sleeps, in ns; 'default' leaves the pool's own choice: 200 us, or none when the threads
outnumber the CPUs), each in a fresh process. Over-subscription shows as CPU per job well
above the work's (items x item-us) and as wall time that grows with the thread count.

`kernels`: median ms per call at 1 and 2 threads and their ratio, for the kernel families the
pool2 branch moved off OpenMP (run it with PYTHONPATH pointing at another checkout to compare
builds). The machine's load average is printed beside the figures: on a shared host, read
ratios from the same run.
"""
import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def loop_stream(threads, items, item_us, jobs, repeat):
    import hl
    from hl import _core
    hl.set_num_threads(threads)
    slots = np.zeros(items, np.int32)
    ptr = _core.ffi.cast("int32_t *", slots.ctypes.data)
    probe = _core.lib.hl_pool_probe
    walls, cpus = [], []
    for _ in range(repeat):
        w, c = time.perf_counter(), time.process_time()
        for _ in range(jobs):
            probe(items, 1, ptr, -1, 0, int(item_us * 1000), 0)
        walls.append((time.perf_counter() - w) / jobs * 1e6)
        cpus.append((time.process_time() - c) / jobs * 1e6)
    return float(np.median(walls)), float(np.median(cpus))


def kernel_calls():
    import hl
    from hl import ops
    rng = np.random.default_rng(0)
    f = lambda *s: hl.tensor(rng.standard_normal(s).astype(np.float32))  # noqa: E731
    x, xc, xl = f(1 << 21), f(200_000, 8), f(4, 250_000)
    xm, xg = f(2000, 512), f(20_000, 64)
    ig = hl.tensor(rng.integers(0, 20_000, 20_000))
    xt, xr = f(2000, 1000), f(1, 3, 224, 224)
    ai = hl.tensor(rng.integers(-99, 99, (256, 256)))
    b, w = f(1280, 1000), f(960, 320, 1, 1)
    w3 = f(256, 256, 3, 3)
    return {
        "sum 2M (sliced)": lambda: hl.sum(x),
        "sum 200k x 8 axis 0": lambda: hl.sum(xc, axis=0),
        "logsumexp 4 x 250k": lambda: hl.logsumexp(xl, axis=1),
        "mean 2000 x 512 axis 1": lambda: hl.mean(xm, axis=1),
        "argmax 4 x 250k": lambda: hl.argmax(xl, axis=1),
        "cumsum 2000 x 512": lambda: hl.cumsum(xm, axis=1),
        "gather 20k rows of 64": lambda: hl.gather(xg, ig, axis=0),
        "topk 5 of 2000 x 1000": lambda: hl.topk(xt, 5),
        "tril 2000 x 1000": lambda: hl.tril(xt),
        "pad 1x3x224x224 by 2": lambda: hl.pad(xr, (0, 0, 2, 2, 0, 0, 2, 2)),
        "resize linear 224->448": lambda: hl.resize(xr, size=(1, 3, 448, 448), mode="linear"),
        "uniform 4M": lambda: hl.rand(1 << 22),
        "matmul int64 256^3": lambda: hl.matmul(ai, ai),
        "gemm_pack_b 1280x1000": lambda: ops.gemm_pack_b(b),
        "conv_pack 960x320": lambda: ops.conv_pack(w),
        "conv_pack winograd 256x256": lambda: ops.conv_pack(w3, layout="winograd"),
    }


def time_kernels(repeat):
    """(name, median ms at 1 thread, at 2), one kernel at a time."""
    import hl
    for name, call in kernel_calls().items():
        med = {}
        for threads in (1, 2):
            hl.set_num_threads(threads)
            call()
            ts = []
            for _ in range(repeat):  # CPU kernels finish before the call returns
                t = time.perf_counter()
                call()
                ts.append(time.perf_counter() - t)
            med[threads] = float(np.median(ts)) * 1e3
        yield name, med[1], med[2]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", choices=("loops", "kernels"))
    ap.add_argument("--threads", default="1,2,4")
    ap.add_argument("--spin", default="default,0,200000")
    ap.add_argument("--items", type=int, default=16)
    ap.add_argument("--item-us", type=float, default=5.0)
    ap.add_argument("--jobs", type=int, default=400)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--_child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a._child:  # one (threads, spin) stream in this process
        wall, cpu = loop_stream(int(a._child), a.items, a.item_us, a.jobs, a.repeat)
        print(f"{wall:.1f} {cpu:.1f}")
        return
    print(f"host: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    if a.only in (None, "loops"):
        work = a.items * a.item_us
        print(f"\nloops: {a.jobs} jobs x {a.items} items x {a.item_us} us "
              f"(work {work:.0f} us a job), median of {a.repeat} rounds, us per job")
        print(f"{'threads':>7} {'spin ns':>9} {'wall':>9} {'cpu':>9} {'cpu/work':>9}")
        for threads in a.threads.split(","):
            for spin in a.spin.split(","):
                env = dict(os.environ)
                if spin != "default":
                    env["HL_POOL_SPIN_NS"] = spin
                out = subprocess.run([sys.executable, __file__, "--_child", threads,
                                      "--items", str(a.items), "--item-us", str(a.item_us),
                                      "--jobs", str(a.jobs), "--repeat", str(a.repeat)],
                                     env=env, check=True, stdout=subprocess.PIPE,
                                     text=True).stdout.split()
                wall, cpu = float(out[0]), float(out[1])
                print(f"{threads:>7} {spin:>9} {wall:9.1f} {cpu:9.1f} {cpu / work:9.2f}",
                      flush=True)
    if a.only in (None, "kernels"):
        print(f"\nkernels: median ms of {a.repeat} calls (load {os.getloadavg()[0]:.1f})")
        print(f"{'kernel':<28} {'1 thread':>9} {'2 threads':>9} {'2t/1t':>6}")
        for name, one, two in time_kernels(a.repeat):
            print(f"{name:<28} {one:9.3f} {two:9.3f} {two / one:6.2f}", flush=True)
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
