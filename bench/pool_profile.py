"""Where the threads' time goes in an ONNX model's replays: every thread-pool loop of `--runs`
replays recorded (hl._pool_trace), at each thread count, grouped by the kernel's chunk
function.

    python bench/pool_profile.py --models DIR --only mobilenet_v2 --batch 1 --threads 1,2
    python bench/pool_profile.py ... --loops      # also every loop of one replay

For each function: its loops per replay, their wall time (the median replay's), the threads'
busy time inside them, and at the second thread count the busy time against the first one's
("thread time x"): above 1, the same work cost the threads more (data from the other core,
cold caches), where busy time well under wall x threads means threads waited. Functions are
named from the extension's symbol table (`nm`, Linux); elsewhere by address. Timings are
medians over the replays after the first fifth."""
import argparse
import os
import subprocess
import sys

import _common

_common.setup(None)

from onnx_infer import MODELS, ensure_models, make_feeds, model_path  # noqa: E402


def symbol_names():
    """{address in this process: function name} for the extension's text symbols, or {} where
    they cannot be read (no nm, no /proc)."""
    import hl._hl_core as ext
    path = os.path.realpath(ext.__file__)
    try:
        with open("/proc/self/maps") as f:
            maps = [line.split() for line in f]
        out = subprocess.run(["nm", path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    # the file's mapping at offset 0: symbol values are relative to it
    bases = [int(m[0].split("-")[0], 16) for m in maps
             if len(m) >= 6 and m[5] == path and int(m[2], 16) == 0]
    if not bases:
        return {}
    names = {}
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[1] in "tTwW":
            names[bases[0] + int(parts[0], 16)] = parts[2]
    return names


def name_of(names, addr):
    return names.get(int(addr), f"0x{int(addr):x}")


def profile(rep, feeds, runs, threads):
    """The records of `runs` replays at `threads` threads: (array runs x loops, or None when
    the replays differ in their loops)."""
    import hl
    from hl import _pool_trace
    hl.set_num_threads(threads)
    for _ in range(5):  # the plan is recorded and planned in the first two
        rep.run(feeds)
    with _pool_trace.recording() as rec:
        for _ in range(runs):
            rep.run(feeds)
    regions = rec[0]
    if len(regions) % runs:
        return None
    table = regions.reshape(runs, -1)
    if not (table["fn"] == table["fn"][0]).all():
        return None
    return table[runs // 5:]


def summarize(table, names):
    """{function: [loops, wall us, busy us]} per replay (medians over replays per loop)."""
    import numpy as np
    wall = np.median(table["end_ns"] - table["start_ns"], axis=0) / 1e3
    busy = np.median(table["busy_ns"].sum(axis=2), axis=0) / 1e3
    out = {}
    for j, fn in enumerate(table["fn"][0]):
        row = out.setdefault(name_of(names, fn), [0, 0.0, 0.0])
        row[0] += 1
        row[1] += wall[j]
        row[2] += busy[j]
    return out, wall, busy, [name_of(names, fn) for fn in table["fn"][0]]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/hl-onnx-zoo-full"),
                    help="folder of the real-size models (made there when missing)")
    ap.add_argument("--only", default="mobilenet_v2", help="one model: " + ", ".join(MODELS))
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--loops", action="store_true", help="also print every loop of a replay")
    args = ap.parse_args()
    if args.only not in MODELS:
        sys.exit(f"unknown model {args.only!r}; choose from {list(MODELS)}")
    ensure_models(args.models, [args.only])
    import hl
    import hl.onnx
    path = model_path(args.models, args.only)
    feeds = make_feeds(path, args.only, args.batch)
    rep = hl.onnx.prepare(path)
    names = symbol_names()
    print(_common.machine_line())
    print(f"{MODELS[args.only][1]}, batch {args.batch}, {args.runs} replays a thread count")
    results = {}
    for t in [int(x) for x in args.threads.split(",")]:
        table = profile(rep, feeds, args.runs, t)
        if table is None:
            print(f"{t} threads: the replays ran different loops; nothing to compare")
            continue
        results[t] = summarize(table, names)
    if not results:
        return
    first = min(results)
    for t, (by_fn, wall, busy, _) in results.items():
        print(f"\n{t} thread(s): {len(wall)} loops a replay, wall {wall.sum():.0f} us, "
              f"busy {busy.sum():.0f} us (thread time)"
              + (f", {busy.sum() / results[first][2].sum():.2f}x {first} thread(s)'"
                 if t != first else ""))
        print(f"  {'function':36} {'loops':>5} {'wall us':>9} {'busy us':>9} {'busy/wall':>9}"
              + (f" {'thread time x':>13}" if t != first else ""))
        base = results[first][0]
        for fn, (n, w, b) in sorted(by_fn.items(), key=lambda kv: -kv[1][1]):
            ratio = f" {b / base[fn][2]:13.2f}" if t != first and fn in base and base[fn][2] \
                else ""
            print(f"  {fn[:36]:36} {n:5d} {w:9.1f} {b:9.1f} {b / w if w else 0:9.2f}" + ratio)
    if args.loops:
        for t, (by_fn, wall, busy, fns) in results.items():
            print(f"\nloops of one replay at {t} thread(s): function, wall us, busy us")
            for j, (fn, w, b) in enumerate(zip(fns, wall, busy)):
                print(f"  {j:4d} {fn[:36]:36} {w:9.1f} {b:9.1f}")


if __name__ == "__main__":
    main()
