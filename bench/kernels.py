"""Kernel benchmarks: hl's figure beside its peers' (numpy; PyTorch CPU when ``import torch``
works), all from the same run.

    python bench/kernels.py                      # every section
    python bench/kernels.py --only sgemm         # one section (comma-separate several)
    python bench/kernels.py --list               # the sections
    python bench/kernels.py --repeat 15 --threads 2

Each figure is the median over --repeat timed samples, after a warm-up; a sample times enough
back-to-back calls to last a few milliseconds. Each library is measured in a process of its
own, started one after the other by this script (--shared-process measures all in this one):
in one process, one library's idle worker threads (numpy's OpenBLAS pool, libgomp's and
PyTorch's OpenMP teams all spin for a while after a call) steal the two cores from the next,
which made figures swing by 3x and more. The ratio column is hl / peer in a
higher-is-better unit (GFLOP/s, GB/s; for per-call times, calls per second), so > 1 means hl is
faster. Timings on a shared machine are noisy: compare figures from the same run only.

A section is a function decorated with @section("name") that yields Row objects; add new ones
(conv, pooling...) the same way.
"""
import argparse
import os
import statistics
import sys
import time


def _threads_arg(argv):
    for i, a in enumerate(argv):
        if a == "--threads" and i + 1 < len(argv):
            return argv[i + 1]
        if a.startswith("--threads="):
            return a.split("=", 1)[1]
    return None


# --threads must reach numpy's own OpenBLAS and PyTorch's thread pools, which read their thread
# counts when they load: set the variables before importing anything.
if __name__ == "__main__" and _threads_arg(sys.argv[1:]):
    for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[_var] = _threads_arg(sys.argv[1:])

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

import hl  # noqa: E402
from hl import _core  # noqa: E402

try:
    import torch
except Exception:  # noqa: BLE001 - any failure to import just leaves PyTorch out
    torch = None

SECTIONS = {}


def section(name):
    def register(fn):
        SECTIONS[name] = fn
        return fn
    return register


class Row:
    """One measurement: hl's figure and each peer's, in `unit`; higher_better says which way
    the unit points (time units point down)."""

    def __init__(self, what, unit, hl_value, peers, higher_better=True, goal=None):
        self.what, self.unit, self.hl, self.peers = what, unit, hl_value, peers
        self.higher_better, self.goal = higher_better, goal


def calibrate(fn, min_time=0.005):
    """Warms fn up and returns how many back-to-back calls make a sample of min_time."""
    fn()
    fn()
    number = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        t = time.perf_counter() - t0
        if t >= min_time:
            return number
        number *= 2 if t == 0 else max(2, int(min_time / t * 1.2))


def sample(fn, number):
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    return (time.perf_counter() - t0) / number


def settle(seconds=0.1):
    """Lets the previous library's worker threads stop spinning (only needed when several
    libraries share this process: a worker process times one library, back to back, as a
    program using it would run)."""
    if WORKER_LIB is None:
        time.sleep(seconds)


# Process isolation: a worker (--worker LIB) times only LIB's candidates and records every
# measure() result in order; the parent runs one worker per library, merges the records and
# replays them through the same section code, which then prints the table.
WORKER_LIB = None
RECORD = None
REPLAY = None


def measure(cands, repeat):
    """{name: median seconds per call} for each (name, fn). The candidates take turns, one
    sample each per round, so a change in the machine's load affects them alike."""
    if REPLAY is not None:
        return {name: statistics.median(v) for name, v in REPLAY.pop(0).items()}
    names = [name for name, _ in cands]
    cands = [(name, fn) for name, fn in cands if fn is not None]
    if WORKER_LIB is not None:
        cands = [(name, fn) for name, fn in cands if name.split()[0] == WORKER_LIB]
    numbers = {}
    for name, fn in cands:
        settle()
        numbers[name] = calibrate(fn)
    samples = {name: [] for name, _ in cands}
    for _ in range(repeat):
        for name, fn in cands:
            settle()
            samples[name].append(sample(fn, numbers[name]))
    result = {name: statistics.median(v) for name, v in samples.items()}
    if RECORD is not None:
        RECORD.append(samples)
        # the other libraries' figures come from their own workers
        result = {name: result.get(name, float("nan")) for name in names}
    return result


# ---- sections ---------------------------------------------------------------------------

@section("sgemm")
def bench_sgemm(args):
    """float32 matrix product n x n x n, GFLOP/s (2 n^3 flops). Goal: >= 0.95x numpy."""
    rng = np.random.default_rng(0)
    for n in (128, 512, 1024, 2048):
        a = rng.standard_normal((n, n)).astype(np.float32)
        b = rng.standard_normal((n, n)).astype(np.float32)
        ha, hb = hl.tensor(a), hl.tensor(b)
        hc = hl.empty(n, n)
        ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
        t = measure([
            ("hl", lambda: ha @ hb),
            ("hl out=", lambda: hl.matmul(ha, hb, out=hc)),
            ("numpy", lambda: a @ b),
            ("torch", (lambda: ta @ tb) if torch else None),
        ], args.repeat)
        flops = 2.0 * n ** 3 / 1e9
        peers = {k: flops / v for k, v in t.items() if not k.startswith("hl")}
        yield Row(f"sgemm n={n}", "GFLOP/s", flops / t["hl"], peers, goal=0.95)
        yield Row(f"sgemm n={n} (out=)", "GFLOP/s", flops / t["hl out="], peers, goal=0.95)


@section("attention")
def bench_attention(args):
    """fused attention, softmax(q k^T / sqrt(d) + mask) v over (batch, 12 heads, s, 64):
    GFLOP/s (4 b h s^2 d flops); peers: torch's scaled_dot_product_attention, numpy's
    matmul/exp chain. BERT-base's block at 128 tokens, GPT-2's at 64."""
    rng = np.random.default_rng(0)
    for b, s in ((1, 128), (1, 64), (8, 128)):
        h, d = 12, 64
        q, k, v = (rng.standard_normal((b, h, s, d)).astype(np.float32) for _ in range(3))
        mask = np.where(rng.random((b, 1, s, s)) < 0.1, -np.inf, 0.0).astype(np.float32)
        mask[..., 0] = 0
        hq, hk, hv, hm = (hl.tensor(x) for x in (q, k, v, mask))

        def np_attention():
            x = q @ k.transpose(0, 1, 3, 2) * d ** -0.5 + mask
            e = np.exp(x - x.max(-1, keepdims=True))
            return (e / e.sum(-1, keepdims=True)) @ v
        if torch:
            tq, tk, tv, tm = (torch.from_numpy(x) for x in (q, k, v, mask))
        t = measure([
            ("hl", lambda: hl.attention(hq, hk, hv, hm, scale=d ** -0.5)),
            ("numpy", np_attention),
            ("torch", (lambda: torch.nn.functional.scaled_dot_product_attention(
                tq, tk, tv, attn_mask=tm)) if torch else None),
        ], args.repeat)
        flops = 4.0 * b * h * s * s * d / 1e9
        peers = {k_: flops / v_ for k_, v_ in t.items() if k_ != "hl"}
        yield Row(f"attention b={b} s={s}", "GFLOP/s", flops / t["hl"], peers)


N_ELEMWISE = 1 << 24  # 16M float32 = 64 MiB per operand


@section("elementwise")
def bench_elementwise(args):
    """add and relu over 16M float32, GB/s counting bytes read + written. Goal: >= 1.0x."""
    rng = np.random.default_rng(0)
    a = rng.standard_normal(N_ELEMWISE).astype(np.float32)
    b = rng.standard_normal(N_ELEMWISE).astype(np.float32)
    ha, hb, hout = hl.tensor(a), hl.tensor(b), hl.empty(N_ELEMWISE)
    nout = np.empty_like(a)
    ta, tb = (torch.from_numpy(a), torch.from_numpy(b)) if torch else (None, None)
    tout = torch.empty_like(ta) if torch else None
    gb = a.nbytes / 1e9
    t = measure([("hl", lambda: ha + hb), ("numpy", lambda: np.add(a, b)),
                 ("torch", (lambda: ta + tb) if torch else None)], args.repeat)
    yield Row("add 16M (new output)", "GB/s", 3 * gb / t["hl"],
              {k: 3 * gb / v for k, v in t.items() if k != "hl"}, goal=1.0)
    t = measure([("hl", lambda: hl.add(ha, hb, out=hout)),
                 ("numpy", lambda: np.add(a, b, out=nout)),
                 ("torch", (lambda: torch.add(ta, tb, out=tout)) if torch else None)], args.repeat)
    yield Row("add 16M (out=)", "GB/s", 3 * gb / t["hl"],
              {k: 3 * gb / v for k, v in t.items() if k != "hl"}, goal=1.0)
    t = measure([("hl", lambda: hl.relu(ha)), ("numpy", lambda: np.maximum(a, 0)),
                 ("torch", (lambda: torch.relu(ta)) if torch else None)], args.repeat)
    yield Row("relu 16M (new output)", "GB/s", 2 * gb / t["hl"],
              {k: 2 * gb / v for k, v in t.items() if k != "hl"}, goal=1.0)
    t = measure([("hl", lambda: hl.relu(ha, out=hout)),
                 ("numpy", lambda: np.maximum(a, 0, out=nout)),
                 ("torch", (lambda: torch.clamp(ta, min=0, out=tout)) if torch else None)],
                args.repeat)
    yield Row("relu 16M (out=)", "GB/s", 2 * gb / t["hl"],
              {k: 2 * gb / v for k, v in t.items() if k != "hl"}, goal=1.0)


@section("overhead")
def bench_overhead(args):
    """The cost of one call on 1-element tensors, Python to C and back. Goal: <= 2 us."""
    ha, hb = hl.tensor(np.ones(1, np.float32)), hl.tensor(np.ones(1, np.float32))
    na, nb = np.ones(1, np.float32), np.ones(1, np.float32)
    add = _core.OPS["add"]
    lib, ffi = _core.lib, _core.ffi
    slot = ffi.new("hl_tensor *[1]")

    def raw_cffi():  # the C call alone: the result is released at once
        lib.hl_binary(add, ha._h, hb._h, slot)
        lib.hl_tensor_release(slot[0])
        slot[0] = ffi.NULL

    ta, tb = (torch.ones(1), torch.ones(1)) if torch else (None, None)
    t = measure([("hl a + b", lambda: ha + hb), ("hl binding", lambda: _core.binary(add, ha._h, hb._h)),
                 ("hl cffi", raw_cffi), ("numpy", lambda: na + nb),
                 ("torch", (lambda: ta + tb) if torch else None)], args.repeat)
    us = {k: v * 1e6 for k, v in t.items()}
    peers = {k: v for k, v in us.items() if not k.startswith("hl")}
    yield Row("a + b, 1 element (hl.Tensor)", "us/call", us["hl a + b"], peers,
              higher_better=False, goal=2.0)
    yield Row("  _core.binary (binding)", "us/call", us["hl binding"], peers, higher_better=False)
    yield Row("  lib.hl_binary (cffi only)", "us/call", us["hl cffi"], peers, higher_better=False)
    # the other small calls an autograd step makes many of
    hm = hl.tensor(np.ones((4, 4), np.float32))
    nm = np.ones((4, 4), np.float32)
    tm = torch.ones(4, 4) if torch else None
    for what, h, n, t in [
            ("x * 2.0 (Python scalar)", lambda: ha * 2.0, lambda: na * 2.0,
             (lambda: ta * 2.0) if torch else None),
            ("x.exp() (a method)", lambda: ha.exp(), lambda: np.exp(na),
             (lambda: ta.exp()) if torch else None),
            ("x.sum() (reduction)", lambda: ha.sum(), lambda: na.sum(),
             (lambda: ta.sum()) if torch else None),
            ("m.T (a view)", lambda: hm.T, lambda: nm.T, (lambda: tm.T) if torch else None),
            ("m[1] (an index)", lambda: hm[1], lambda: nm[1], (lambda: tm[1]) if torch else None)]:
        t = measure([("hl", h), ("numpy", n), ("torch", t)], args.repeat)
        us = {k: v * 1e6 for k, v in t.items()}
        yield Row(what, "us/call", us["hl"], {k: v for k, v in us.items() if k != "hl"},
                  higher_better=False)


@section("sum")
def bench_sum(args):
    """Sums over 16M float32, GB/s of input read."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N_ELEMWISE).astype(np.float32)
    hx = hl.tensor(x)
    tx = torch.from_numpy(x) if torch else None
    gb = x.nbytes / 1e9
    cases = [("sum 16M (all)", None, None), ("sum (4096, 4096) axis=1 (rows)", (4096, 4096), 1),
             ("sum (4096, 4096) axis=0 (columns)", (4096, 4096), 0),
             ("sum (1M, 16) axis=0 (few columns)", (1 << 20, 16), 0)]
    for what, shape, axis in cases:
        xs = x if shape is None else x.reshape(shape)
        hs = hx if shape is None else hx.reshape(*shape)
        ts = (tx if shape is None else tx.reshape(shape)) if torch else None
        t = measure([("hl", lambda: hl.sum(hs, axis=axis)), ("numpy", lambda: np.sum(xs, axis=axis)),
                     ("torch", (lambda: torch.sum(ts) if axis is None else torch.sum(ts, dim=axis))
                      if torch else None)], args.repeat)
        yield Row(what, "GB/s", gb / t["hl"], {k: gb / v for k, v in t.items() if k != "hl"})


@section("maxpool")
def bench_maxpool(args):
    """max_pool2d, ms per call (lower is better): the MNIST CNN's 2x2 stride-2 pools (batch 64)
    and ResNet's 3x3 stride-2 padding-1 pool, forward without indices (inference) and with
    them (training), and forward + backward: hl's as graph mode replays it (a plan whose
    backward finds each window's maximum again in the input, no indices kept) against
    PyTorch's forward with indices and its indexed backward."""
    from hl import ops
    rng = np.random.default_rng(0)
    for shape, k, kw in (((64, 20, 24, 24), 2, {"stride": 2}), ((64, 50, 8, 8), 2, {"stride": 2}),
                         ((8, 64, 56, 56), 3, {"stride": 2, "padding": 1})):
        x = rng.standard_normal(shape).astype(np.float32)
        hx = hl.tensor(x)
        hy = ops.max_pool2d_forward(hx, k, return_indices=True, **kw)[0]
        dy = rng.standard_normal(hy.shape).astype(np.float32)
        hdy = hl.tensor(dy)

        def fwd_bwd():   # x read again after the gradient, as ReLU's backward does in a model
            y, idx = ops.max_pool2d_forward(hx * 1.0, k, return_indices=True, **kw)
            return y, ops.max_pool2d_grad(hdy, idx, shape, k, **kw)
        _core.plan_begin()
        try:
            fwd_bwd()
        finally:
            plan = _core.plan_end()

        def hl_values():
            with hl.no_grad():
                return hl.max_pool2d(hx, k, **kw)
        tx, tdy = (torch.from_numpy(x), torch.from_numpy(dy)) if torch else (None, None)
        tkw = {"stride": kw["stride"], "padding": kw.get("padding", 0)}

        def torch_fwd_bwd():
            ty, ti = torch.nn.functional.max_pool2d(tx * 1.0, k, return_indices=True, **tkw)
            return torch.ops.aten.max_pool2d_with_indices_backward(
                tdy, tx, [k, k], [tkw["stride"]] * 2, [tkw["padding"]] * 2, [1, 1], False, ti)
        name = f"{k}x{k}/{kw['stride']}{' p1' if 'padding' in kw else ''} {'x'.join(map(str, shape))}"
        for what, h, t in (
                ("forward", hl_values,
                 (lambda: torch.nn.functional.max_pool2d(tx, k, **tkw)) if torch else None),
                ("forward, indices", lambda: ops.max_pool2d_forward(hx, k, return_indices=True, **kw),
                 (lambda: torch.nn.functional.max_pool2d(tx, k, return_indices=True, **tkw))
                 if torch else None),
                ("fwd+bwd (hl: plan)", lambda: _core.plan_run(plan), torch_fwd_bwd if torch else None)):
            r = measure([("hl", h), ("torch", t)], args.repeat)
            ms = {k_: v * 1e3 for k_, v in r.items()}
            yield Row(f"{name} {what}", "ms", ms["hl"], {k_: v for k_, v in ms.items() if k_ != "hl"},
                      higher_better=False)


@section("mixed")
def bench_mixed(args):
    """Two-layer MLP forward (matmuls with element-wise ops between), ms per step.

    The case where OpenBLAS's threads and libcore's OpenMP threads take turns on the cores."""
    rng = np.random.default_rng(0)
    for n, m in ((128, 4096), (512, 512)):
        xa = rng.standard_normal((m, n)).astype(np.float32)
        wa = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
        x, w = hl.tensor(xa), hl.tensor(wa)
        tx, tw = (torch.from_numpy(xa), torch.from_numpy(wa)) if torch else (None, None)

        def hl_step():
            h = (x @ w).relu()
            return (h @ w).relu() + h

        def np_step():
            h = np.maximum(xa @ wa, 0)
            return np.maximum(h @ wa, 0) + h

        def torch_step():
            h = torch.relu(tx @ tw)
            return torch.relu(h @ tw) + h

        t = measure([("hl", hl_step), ("numpy", np_step),
                     ("torch", torch_step if torch else None)], args.repeat)
        ms = {k: v * 1e3 for k, v in t.items()}
        yield Row(f"relu(relu(x@w)@w)+h, x {m}x{n}, w {n}x{n}", "ms", ms["hl"],
                  {k: v for k, v in ms.items() if k != "hl"}, higher_better=False)


# ---- driver -----------------------------------------------------------------------------

def fmt(v):
    return f"{v:9.3g}" if v < 100 else f"{v:9.0f}"


def print_rows(rows, peer_names):
    head = f"{'measurement':40} {'unit':8} {'hl':>9}"
    for p in peer_names:
        head += f" {p:>9} {'hl/' + p:>9}"
    head += "  goal"
    print(head)
    print("-" * len(head))
    for r in rows:
        line = f"{r.what:40} {r.unit:8} {fmt(r.hl)}"
        flags = []
        for p in peer_names:
            v = r.peers.get(p)
            if v is None:
                line += f" {'-':>9} {'-':>9}"
                continue
            ratio = r.hl / v if r.higher_better else v / r.hl
            line += f" {fmt(v)} {ratio:9.2f}"
            if r.goal is not None and p == "numpy" and r.higher_better:
                flags.append("ok" if ratio >= r.goal else f"below {r.goal}x")
        if r.goal is not None and not r.higher_better:
            flags.append("ok" if r.hl <= r.goal else f"above {r.goal} us")
        print(line + ("  " + ", ".join(flags) if flags else ""))
    sys.stdout.flush()


def run_worker(args, names):
    global WORKER_LIB, RECORD
    import json
    WORKER_LIB, RECORD = args.worker, []
    for name in names:
        for _ in SECTIONS[name](args):
            pass
    print("RESULTS " + json.dumps(RECORD))
    return 0


def collect_from_workers(argv, names):
    """Runs one worker process per library, twice round the libraries (so a slow spell of the
    machine is less likely to fall on one library alone), and leaves their pooled samples in
    REPLAY."""
    global REPLAY
    import json
    import subprocess
    merged = None
    for _ in range(2):
        for lib in ["hl", "numpy"] + (["torch"] if torch else []):
            out = subprocess.run([sys.executable, os.path.abspath(__file__), *argv,
                                  "--only", ",".join(names), "--worker", lib],
                                 capture_output=True, text=True, check=True).stdout
            record = json.loads(out.split("RESULTS ", 1)[1])
            if merged is None:
                merged = record
                continue
            for m, r in zip(merged, record):
                for name, samples in r.items():
                    m.setdefault(name, []).extend(samples)
    REPLAY = merged


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated section names (see --list)")
    ap.add_argument("--list", action="store_true", help="list the sections and exit")
    ap.add_argument("--repeat", type=int, default=7, help="timed samples per figure (median)")
    ap.add_argument("--shared-process", action="store_true",
                    help="measure every library in this one process (faster, noisier)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--threads", type=int,
                    help="threads for every library (hl, numpy's OpenBLAS, torch); default: as "
                         "each finds")
    args = ap.parse_args(argv)
    if args.list:
        for name, fn in SECTIONS.items():
            print(f"{name:12} {fn.__doc__.strip().splitlines()[0]}")
        return 0
    names = list(SECTIONS) if not args.only else [s.strip() for s in args.only.split(",")]
    unknown = [n for n in names if n not in SECTIONS]
    if unknown:
        ap.error(f"unknown section(s) {unknown}; choose from {list(SECTIONS)}")
    if args.threads:
        hl.set_num_threads(args.threads)
        if torch:
            torch.set_num_threads(args.threads)
    if args.worker:
        return run_worker(args, names)
    if not args.shared_process:
        collect_from_workers(argv if argv is not None else sys.argv[1:], names)
    print(f"hl {hl.__version__}: {hl.get_num_threads()} threads; numpy {np.__version__}"
          + (f"; torch {torch.__version__}: {torch.get_num_threads()} threads" if torch else
             "; torch not importable") + f"; {os.cpu_count()} CPUs; median of {args.repeat}")
    peer_names = ["numpy"] + (["torch"] if torch else [])
    for name in names:
        print(f"\n[{name}] {SECTIONS[name].__doc__.strip().splitlines()[0]}")
        print_rows(list(SECTIONS[name](args)), peer_names)
    return 0


if __name__ == "__main__":
    sys.exit(main())
