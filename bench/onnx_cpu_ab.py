"""CPU-time A/B of hl.onnx inference between two hl source trees (a branch against main).

    python bench/onnx_cpu_ab.py --a src --b /tmp/main_checkout/src --models DIR \
        --only resnet18,mobilenet_v2 --rounds 3

On a loaded machine wall-clock medians are mostly time spent waiting for a core; the CPU
time a process spends in `prepare(...).run` (time.process_time, one hl thread) is what the
code costs. Each round runs one process per tree, alternating, each timing --runs runs of
every model at batch 1 after 2 warm-ups (and the CPU time of its prepare(), the ":prepare"
rows); the table gives each side's median over all rounds.
Each tree must be built in place (python src/hl/_build.py in its checkout). The models are
onnx_infer.py's (`<name>-op17.onnx` in --models).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

WORKER = r'''
import json, sys, time
import hl, hl.onnx
sys.path.insert(0, sys.argv[4])
from onnx_infer import make_feeds
hl.set_num_threads(1)
models, names, runs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
out = {}
for name in names:
    path = f"{models}/{name}-op17.onnx"
    t = time.process_time()
    rep = hl.onnx.prepare(path)
    out[name + ":prepare"] = [time.process_time() - t]
    feeds = make_feeds(path, name, 1)
    for _ in range(2):
        rep.run(feeds)
    ts = []
    for _ in range(runs):
        t = time.process_time()
        rep.run(feeds)
        ts.append(time.process_time() - t)
    out[name] = ts
print(json.dumps(out))
'''


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the first tree's src folder")
    ap.add_argument("--b", required=True, help="the second tree's src folder")
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/hl-onnx-zoo-full"))
    ap.add_argument("--only", default="resnet18,mobilenet_v2",
                    help="onnx_infer.py's model names (its inputs for each, batch 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    sides = {"a": args.a, "b": args.b}
    res = {s: {} for s in sides}
    for r in range(args.rounds):
        for side, src in sides.items():
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src), OMP_NUM_THREADS="1",
                       OPENBLAS_NUM_THREADS="1")
            p = subprocess.run([sys.executable, "-c", WORKER, args.models, args.only,
                                str(args.runs), os.path.dirname(os.path.abspath(__file__))],
                               env=env, capture_output=True, text=True, check=True)
            for name, ts in json.loads(p.stdout.strip().splitlines()[-1]).items():
                res[side].setdefault(name, []).extend(ts)
    print(f"a = {args.a}, b = {args.b}; median CPU ms over {args.rounds} x {args.runs} runs, "
          f"batch 1, 1 thread")
    print(f"{'model':20} {'a ms':>8} {'b ms':>8} {'a / b':>6}")
    for name in args.only.split(","):
        for key in (name, name + ":prepare"):
            a = statistics.median(res["a"][key]) * 1e3
            b = statistics.median(res["b"][key]) * 1e3
            print(f"{key:20} {a:8.1f} {b:8.1f} {a / b:6.3f}")


if __name__ == "__main__":
    main()
