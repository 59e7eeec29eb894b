"""CPU-time A/B of hl.onnx inference between two hl source trees (a branch against main).

    python bench/onnx_cpu_ab.py --a src --b /tmp/main_checkout/src --models DIR \
        --only resnet18,mobilenet_v2 --rounds 3
    python bench/onnx_cpu_ab.py --a src --b MAIN/src --ort --batch 8 --only mobilenet_v2

On a loaded machine wall-clock medians are mostly time spent waiting for a core; the CPU
time a process spends in `prepare(...).run` (time.process_time, one hl thread) is what the
code costs. Each round runs one process per tree, alternating, each timing --runs runs of
every model at batch 1 after 2 warm-ups (and the CPU time of its prepare(), the ":prepare"
rows); the table gives each side's median over all rounds. --ort adds onnxruntime (one intra-op
thread, its default optimisations) as a third process in each round, so the ratio to it
comes from the same rounds; --batch times another batch size (prepare() rows at batch 1 only).
Each tree must be built in place (python src/hl/_build.py in its checkout). The models are
onnx_infer.py's (`<name>-op17.onnx` in --models).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

# One worker script for either library: its process prints every model's timings as JSON. The
# ALL-CAPS markers are the library's lines (hl: prepare(...).run; onnxruntime: a one-thread
# InferenceSession, its creation timed as the ":prepare" row like hl's prepare()).
_TEMPLATE = r'''
import json, sys, time
IMPORTS
sys.path.insert(0, sys.argv[4])
from onnx_infer import make_feeds
models, names, runs = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
batch = int(sys.argv[5])
out = {}
for name in names:
    path = f"{models}/{name}-op17.onnx"
    t = time.process_time()
    model = LOAD
    out[name + ":prepare"] = [time.process_time() - t]
    feeds = make_feeds(path, name, batch)
    for _ in range(2):
        RUN
    ts = []
    for _ in range(runs):
        t = time.process_time()
        RUN
        ts.append(time.process_time() - t)
    out[name] = ts
print(json.dumps(out))
'''


def _worker(imports, load, run):
    return (_TEMPLATE.replace("IMPORTS", imports).replace("LOAD", load)
            .replace("RUN", run))


WORKER = _worker("import hl, hl.onnx\nhl.set_num_threads(1)", "hl.onnx.prepare(path)",
                 "model.run(feeds)")
ORT_WORKER = _worker(
    "import onnxruntime as ort\nso = ort.SessionOptions()\n"
    "so.intra_op_num_threads = so.inter_op_num_threads = 1",
    'ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])',
    "model.run(None, feeds)")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the first tree's src folder")
    ap.add_argument("--b", required=True, help="the second tree's src folder")
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/hl-onnx-zoo-full"))
    ap.add_argument("--only", default="resnet18,mobilenet_v2",
                    help="onnx_infer.py's model names (its inputs for each, batch 1)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--ort", action="store_true", help="onnxruntime as a third process")
    args = ap.parse_args()
    sides = {"a": (WORKER, args.a), "b": (WORKER, args.b)}
    if args.ort:
        sides["ort"] = (ORT_WORKER, args.a)
    res = {s: {} for s in sides}
    for r in range(args.rounds):
        for side, (worker, src) in sides.items():
            env = dict(os.environ, PYTHONPATH=os.path.abspath(src), OMP_NUM_THREADS="1",
                       OPENBLAS_NUM_THREADS="1")
            p = subprocess.run([sys.executable, "-c", worker, args.models, args.only,
                                str(args.runs), os.path.dirname(os.path.abspath(__file__)),
                                str(args.batch)],
                               env=env, capture_output=True, text=True, check=True)
            for name, ts in json.loads(p.stdout.strip().splitlines()[-1]).items():
                res[side].setdefault(name, []).extend(ts)
    print(f"a = {args.a}, b = {args.b}; median CPU ms over {args.rounds} x {args.runs} runs, "
          f"batch {args.batch}, 1 thread")
    head = f"{'model':20} {'a ms':>8} {'b ms':>8} {'a / b':>6}"
    print(head + (f" {'ort ms':>8} {'a / ort':>7} {'b / ort':>7}" if args.ort else ""))
    for name in args.only.split(","):
        for key in (name, name + ":prepare"):
            a, b = (statistics.median(res[s][key]) * 1e3 for s in ("a", "b"))
            line = f"{key:20} {a:8.1f} {b:8.1f} {a / b:6.3f}"
            if args.ort:
                o = statistics.median(res["ort"][key]) * 1e3
                line += f" {o:8.1f} {a / o:7.3f} {b / o:7.3f}"
            print(line)


if __name__ == "__main__":
    main()
