"""ONNX inference latency: hl.onnx beside onnxruntime on the model zoo's real-size models.

    python bench/onnx_infer.py                          # ResNet-18, MobileNetV2, BERT, GPT-2
    python bench/onnx_infer.py --only resnet18,gpt2 --batches 1 --repeat 5
    python bench/onnx_infer.py --models DIR --threads 2
    python bench/onnx_infer.py --threads 1 --clock cpu     # a loaded host: CPU seconds

The models are shared/onnx-zoo/make_zoo.py's real sizes (ImageNet ResNet-18 and MobileNetV2
at 224x224, BERT-base question answering at 128 tokens, GPT-2 small at 64 tokens), opset 17,
with seeded random weights. Missing ones are generated into --models (default
~/.cache/hl-onnx-zoo-full) by `make_zoo.py --full`, which needs torchvision and transformers;
that takes a minute or two and about 1 GB for the four.

Both sides run the same file on the same inputs: hl through hl.onnx.prepare(path).run(feeds),
onnxruntime through an InferenceSession with its default graph optimisations and
intra_op_num_threads = --threads, inter_op_num_threads = 1; hl with hl.set_num_threads. Each
(library, model, batch) runs in a process of its own (another library's idle threads would
otherwise spin on the cores, see docs/performance.md), twice round the libraries (hl, ort, torch,
hl, ort, torch); the figure is the median latency over both processes' timed runs, after warm-up
runs. Each process times --repeat runs, and more until they add up to --min-time seconds (0.5 by
default, at most 1000 runs): a 3 ms model's median over 6 runs moved by a third when the host
took a core for a moment (stop 40); the slow models' counts stay at --repeat.
The first run's outputs of each side are compared: the "max err" column is the largest
|hl - ort| / (1 + |ort|), a check that the two compute the same thing. "load s": seconds from
the path to a ready model (hl.onnx.prepare; InferenceSession), the faster of the two processes;
"import s": the seconds before that to import the library (import hl, hl.onnx; import
onnxruntime), timed apart since issue 21 (before, "load s" included them).

A third column runs the same model in PyTorch eager mode (torch.inference_mode, the same
threads): make_zoo.py's builder with the seed the file was exported with, so the same
weights; its outputs are checked against onnxruntime's as hl's are ("max err" is the larger
of the two). It needs torchvision and transformers (`pip install -e ".[zoo]"`); without them
the column reads "-".

--clock cpu times each run by the process's CPU time instead of the wall clock. With
--threads 1 on a host that other work loads, that is the figure the load does not inflate
(a run's wall time there mostly waits for a core); with more threads it would count waiting
threads' spinning, so it is refused.

--profile adds, per model and batch, the time by operator type on each side: hl's from the
replayed plan's own per-record timing (each record's mean over 5 replays, by the kernel's
ONNX op type: conv_fused under Conv, matmul_fused under MatMul/Gemm; a model that runs node
by node times each node's handler instead), onnxruntime's from its own profiler (each
node's fastest run, after its fusions, so e.g. BatchNormalization and Relu vanish into Conv).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

from _common import machine_line, report, run_worker, settle, setup

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ZOO = os.environ.get("HL_ONNX_ZOO") or os.path.join(REPO, "..", "shared", "onnx-zoo")
OPSET = 17
MODELS = {  # name: (sequence length for text models, or None for images; description)
    "resnet18": (None, "ResNet-18 224x224"),
    "mobilenet_v2": (None, "MobileNetV2 224x224"),
    "bert_squad": (128, "BERT-base QA, 128 tokens"),
    "gpt2": (64, "GPT-2 small, 64 tokens"),
}


LIBS = ("hl", "ort", "torch")  # each in processes of its own, in this order


def model_path(folder, name):
    return os.path.join(folder, f"{name}-op{OPSET}.onnx")


def ensure_models(folder, names):
    """Generates the models missing from ``folder`` with make_zoo.py --full."""
    missing = [n for n in names if not os.path.isfile(model_path(folder, n))]
    if not missing:
        return
    script = os.path.join(ZOO, "make_zoo.py")
    if not os.path.isfile(script):
        sys.exit(f"{missing} are not in {folder} and there is no {script} to make them "
                 f"(set HL_ONNX_ZOO to the zoo's folder)")
    os.makedirs(folder, exist_ok=True)
    print(f"generating {missing} into {folder} (make_zoo.py --full) ...", flush=True)
    # make_zoo.py writes a manifest.json for the models it made: keep it in a scratch folder
    # so that making one model later does not leave a manifest naming only that one.
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        subprocess.run([sys.executable, script, "--full", "--out", tmp, "--opsets", str(OPSET),
                        *missing], check=True)
        for n in missing:
            os.replace(model_path(tmp, n), model_path(folder, n))


def make_feeds(path, name, batch):
    """Inputs for the model's graph inputs: a normal image, or token ids in [3, 1000) with an
    attention mask whose odd rows are padded on their last quarter, as make_zoo.py does. Made
    once, in the parent: reading the graph's inputs parses the whole file, and a worker that
    did so would have taken and freed twice the model's size in memory before timing its
    load (GPT-2: 1.3 GB), which the library's own allocations then found warm or not."""
    import numpy as np
    import onnx
    model = onnx.load(path, load_external_data=False)
    seq = MODELS[name][0]
    rng = np.random.default_rng(1)
    feeds = {}
    for spec in model.graph.input:
        dims = [d.dim_value for d in spec.type.tensor_type.shape.dim]
        if seq is None:
            feeds[spec.name] = rng.standard_normal((batch, *dims[1:])).astype(np.float32)
        elif spec.name == "input_ids":
            feeds[spec.name] = rng.integers(3, 1000, (batch, seq)).astype(np.int64)
        elif spec.name == "attention_mask":
            m = np.ones((batch, seq), np.int64)
            m[1::2, seq * 3 // 4:] = 0
            feeds[spec.name] = m
        else:  # token_type_ids: question, then context
            t = np.zeros((batch, seq), np.int64)
            t[:, seq // 3:] = 1
            feeds[spec.name] = t
    return feeds


# hl's kernels under the ONNX op type they mostly run (a fused kernel under its main op's),
# and onnxruntime's fused node types under the plain ones, so that the rows line up
HL_AS_ONNX = {"conv_fused": "Conv", "conv2d": "Conv", "matmul_fused": "MatMul/Gemm",
              "matmul": "MatMul/Gemm", "gemm": "MatMul/Gemm", "avg_pool": "GlobalAveragePool",
              "max_pool": "MaxPool", "layer_norm": "LayerNormalization", "add": "Add",
              "softmax": "Softmax", "gather": "Gather", "attention": "attention (fused)"}
ORT_AS_ONNX = {"MatMul": "MatMul/Gemm", "Gemm": "MatMul/Gemm", "FusedMatMul": "MatMul/Gemm",
               "FusedGemm": "MatMul/Gemm", "FusedConv": "Conv"}


def plan_op_times(rep, run, repeat):
    """{op type: [seconds, records]} of the plan the timed runs replayed: each record's mean
    over ``repeat`` replays with the plan's own per-record timing (hl.graph.profile's), or
    None when this signature runs node by node."""
    from hl import _core
    entries = [e for e in rep.model.program.plans.entries.values() if e]
    if len(entries) != 1:
        return None
    plan = entries[0].plan
    _core.plan_profile_reset(plan)
    _core.plan_set_profiling(plan, True)
    try:
        for _ in range(repeat):
            run()
    finally:
        _core.plan_set_profiling(plan, False)
    timed, ops, _, ns = _core.plan_profile(plan)
    out = {}
    for op, t in zip(ops, ns):
        slot = out.setdefault(HL_AS_ONNX.get(op, op), [0.0, 0])
        slot[0] += t * 1e-9 / max(timed, 1)
        slot[1] += 1
    return out


def op_times(lib, run, target, feeds, repeat):
    """{op type: [seconds, nodes]}: for hl the replayed plan's records (plan_op_times, means),
    else (and for a signature that runs node by node) each node's fastest of ``repeat``
    runs, summed by type. ``target`` is the BackendRep (hl), or the SessionOptions and path
    of onnxruntime's session, remade here with its profiler on (so the timed runs ran
    without it)."""
    best, kind = {}, {}
    if lib == "hl":
        planned = plan_op_times(target, run, repeat)
        if planned is not None:
            return planned
        # the nodes that run: the graph's, and those that fusion made at prepare()
        program = target.model.program
        # node by node: a replayed plan (hl/onnx/planned.py) calls no handler to time
        program.plans.run = lambda feeds, params, eager, names: eager(feeds)
        nodes = {id(n): n for n in list(target.nodes) + list(program.fused_nodes or [])}
        for node in nodes.values():
            def timed(n, *xs, _handler=node.handler):
                t0 = time.perf_counter()
                ys = _handler(n, *xs)
                best[n.index] = min(best.get(n.index, 1e9), time.perf_counter() - t0)
                kind[n.index] = n.op_type
                return ys
            node.handler = timed
        for _ in range(repeat):
            run()
    else:
        import onnxruntime as ort
        so, path = target
        so.enable_profiling = True
        so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "hl_bench_ort")
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
        for _ in range(repeat + 1):
            sess.run(None, feeds)
        profile = sess.end_profiling()
        with open(profile) as fh:
            events = json.load(fh)
        os.remove(profile)
        for e in events:
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time"):
                best[e["name"]] = min(best.get(e["name"], 1e9), e["dur"] * 1e-6)
                op = e["args"].get("op_name", "?")
                kind[e["name"]] = ORT_AS_ONNX.get(op, op)
    out = {}
    for key, t in best.items():
        slot = out.setdefault(kind[key], [0.0, 0])
        slot[0] += t
        slot[1] += 1
    return out


def torch_model(name, feeds):
    """make_zoo.py's PyTorch model for ``name`` with the weights of the exported file (its
    builder, seed 0 as make_zoo.py exports), and its arguments from ``feeds``; or None when
    torchvision / transformers are missing."""
    import torch
    sys.path.insert(0, ZOO)
    try:
        import make_zoo
        build, specs, _, _ = make_zoo.zoo(True)[name]
        torch.manual_seed(0)
        model = make_zoo.randomise(build(), 0)
    except ImportError as e:
        return f"no PyTorch column: {e} (make_zoo.py from {ZOO}; set HL_ONNX_ZOO)"
    return model, [torch.from_numpy(feeds[spec[0]]) for spec in specs]


def worker(lib, path, name, feeds_file, repeat, warmup, threads, save, profile=False,
           clock="wall", min_time=0.0):
    import numpy as np
    with np.load(feeds_file) as f:
        feeds = {k: f[k] for k in f.files}
    t0 = time.perf_counter()  # the library's import, timed apart from loading the model
    if lib == "torch":
        import torch
    elif lib == "hl":
        import hl
        import hl.onnx
    else:
        import onnxruntime as ort
    import_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    if lib == "torch":
        torch.set_num_threads(threads)
        made = torch_model(name, feeds)
        if isinstance(made, str):
            return {"times": [], "load_s": 0.0, "import_s": import_s, "why": made}
        model, args = made

        def run():
            with torch.inference_mode():
                out = model(*args)
            return [o.numpy() for o in (out if isinstance(out, (tuple, list)) else (out,))]
    elif lib == "hl":
        hl.set_num_threads(threads)
        rep = hl.onnx.prepare(path)

        def run():
            return rep.run(feeds)
    else:
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])

        def run():
            return sess.run(None, feeds)
    load_s = time.perf_counter() - t0
    outs = run()
    if save:
        np.savez(save, *[np.asarray(o) for o in outs])
    settle()
    for _ in range(warmup - 1):
        run()
    now = time.process_time if clock == "cpu" else time.perf_counter
    times = []
    while len(times) < repeat or (sum(times) < min_time and len(times) < MAX_RUNS):
        t0 = now()
        run()
        times.append(now() - t0)
    result = {"times": times, "load_s": load_s, "import_s": import_s}
    if profile and lib != "torch":
        result["ops"] = op_times(lib, run, rep if lib == "hl" else (so, path), feeds,
                                 min(repeat, 5))
    return result


def max_err(a_file, b_file):
    import numpy as np
    with np.load(a_file) as a, np.load(b_file) as b:
        if sorted(a.files) != sorted(b.files) or \
                any(a[k].shape != b[k].shape for k in b.files):
            return float("inf")  # not the same outputs at all
        return max(float(np.max(np.abs(a[k] - b[k]) / (1 + np.abs(b[k])))) for k in b.files)


def ms(v):
    """Milliseconds to print: two decimals under 10 ms (a 3 ms model's 0.05 ms is 2%)."""
    return f"{v:.2f}" if v < 10 else f"{v:.1f}"


# --min-time's cap on the timed runs of one process.
MAX_RUNS = 1000


# A run whose outputs differ more from onnxruntime's than this fails the benchmark: a faster
# wrong answer is no result (float32 sums in another order stay near 1e-5 on these models).
AGREE = 1e-3


def run(args):
    import numpy as np
    names = [n.strip() for n in args.only.split(",")] if args.only else list(MODELS)
    unknown = [n for n in names if n not in MODELS]
    if unknown:
        sys.exit(f"unknown models {unknown}; choose from {list(MODELS)}")
    ensure_models(args.models, names)
    batches = [int(b) for b in args.batches.split(",")]
    what = "CPU ms per run (process time)" if args.clock == "cpu" else "latency in ms"
    print(machine_line())
    print(f"threads: {args.threads}   timed runs per process: {args.repeat} or more, up to "
          f"{args.min_time} s of them (after {args.warmup} warm-up), two processes per library; "
          f"{what}, median (min)")
    head = (f"{'model':27} {'batch':>5} {'hl ms':>16} {'ort ms':>16} {'hl/ort':>7} "
            f"{'torch ms':>9} {'hl/torch':>8} {'max err':>8} {'load s hl/ort':>13} "
            f"{'import s hl/ort':>15}")
    print(head)
    print("-" * len(head))
    ratios, notes = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            for batch in batches:
                res = {lib: {"times": [], "load": [], "import": []} for lib in LIBS}
                saved = {}
                feeds_file = os.path.join(tmp, f"feeds-{name}-{batch}.npz")
                np.savez(feeds_file, **make_feeds(model_path(args.models, name), name, batch))
                for round_ in range(2):
                    for lib in LIBS:
                        save = os.path.join(tmp, f"{lib}.npz") if round_ == 0 else ""
                        cmd = ["--worker", lib, "--only", name, "--batches", batch,
                               "--models", args.models, "--repeat", args.repeat,
                               "--warmup", args.warmup, "--threads", args.threads,
                               "--save", save, "--clock", args.clock, "--feeds", feeds_file,
                               "--min-time", args.min_time]
                        if args.profile and round_ == 0:
                            cmd.append("--profile")
                        r = run_worker(__file__, cmd, f"{name} batch {batch}, {lib}")
                        res[lib]["times"] += r["times"]
                        res[lib]["load"].append(r["load_s"])
                        res[lib]["import"].append(r["import_s"])
                        if save and r["times"]:
                            saved[lib] = save
                        if "ops" in r:
                            res[lib]["ops"] = r["ops"]
                        if r.get("why") and r["why"] not in notes:
                            notes.append(r["why"])
                            print(r["why"], flush=True)
                errs = {lib: max_err(saved[lib], saved["ort"]) for lib in saved if lib != "ort"}
                bad = {lib: e for lib, e in errs.items() if not e <= AGREE}
                if bad:
                    sys.exit(f"{name} batch {batch}: outputs differ from onnxruntime's by "
                             f"{bad} (more than {AGREE})")
                med = {k: statistics.median(v["times"]) * 1e3 for k, v in res.items() if v["times"]}
                low = {k: min(v["times"]) * 1e3 for k, v in res.items() if v["times"]}
                ratios.append(med["hl"] / med["ort"])
                torch_cols = (f"{ms(med['torch']):>9} {med['hl'] / med['torch']:8.2f}"
                              if "torch" in med else f"{'-':>9} {'-':>8}")
                print(f"{MODELS[name][1]:27} {batch:5d} {ms(med['hl']):>8} ({ms(low['hl']):>5})"
                      f" {ms(med['ort']):>8} ({ms(low['ort']):>5}) {ratios[-1]:7.2f} {torch_cols}"
                      f" {max(errs.values()):8.1e}"
                      f" {min(res['hl']['load']):6.2f}/{min(res['ort']['load']):<6.2f}"
                      f" {min(res['hl']['import']):6.2f}/{min(res['ort']['import']):<6.2f}",
                      flush=True)
                if args.profile:
                    print_ops(res["hl"]["ops"], res["ort"]["ops"])
    print(f"geometric mean hl/ort: {statistics.geometric_mean(ratios):.2f}")


def print_ops(hl_ops, ort_ops):
    total = {"hl": sum(v[0] for v in hl_ops.values()), "ort": sum(v[0] for v in ort_ops.values())}
    print(f"    {'op type':24} {'hl ms':>8} {'nodes':>5} {'ort ms':>8} {'nodes':>5}"
          f"   (node sums: hl {total['hl'] * 1e3:.1f}, ort {total['ort'] * 1e3:.1f})")
    for op in sorted(set(hl_ops) | set(ort_ops),
                     key=lambda k: -max(hl_ops.get(k, [0])[0], ort_ops.get(k, [0])[0])):
        h, o = hl_ops.get(op, [0.0, 0]), ort_ops.get(op, [0.0, 0])
        if max(h[0], o[0]) < 0.01 * max(total.values()):
            continue  # under 1% of either side's total
        print(f"    {op:24} {h[0] * 1e3:8.2f} {h[1]:5d} {o[0] * 1e3:8.2f} {o[1]:5d}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/hl-onnx-zoo-full"),
                    help="folder of the real-size models (made there when missing)")
    ap.add_argument("--only", help="comma-separated models: " + ", ".join(MODELS))
    ap.add_argument("--batches", default="1,8")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=0.5,
                    help="time at least this many seconds of runs a process (at least "
                         "--repeat runs, at most %d): a fast model's median over a few runs "
                         "is thrown by one stall of a shared host" % MAX_RUNS)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--profile", action="store_true",
                    help="also print the time by operator type on each side")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time runs by the wall clock (latency) or the process's CPU time "
                         "(with --threads 1 only: what a loaded host does not inflate)")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--save", help=argparse.SUPPRESS)
    ap.add_argument("--feeds", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.clock == "cpu" and args.threads != 1:
        ap.error("--clock cpu needs --threads 1 (it would count idle threads' spinning)")
    setup(args.threads)
    if args.worker:
        r = worker(args.worker, model_path(args.models, args.only), args.only, args.feeds,
                   args.repeat, args.warmup, args.threads, args.save, args.profile,
                   args.clock, args.min_time)
        report(r)
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
