"""Per-node overhead of a replayed plan (issue 20, item 8): a long chain of tiny element-wise
ops (1 x 8 float32), run as
  - hl eager (one Python call per op: Python, cffi and the core's checks each time),
  - an hl plan replayed with fusion off (one kernel call per node: the plan's own dispatch),
  - an hl plan replayed as recorded by default (runs of up to 16 calls fused into one pass),
  - onnxruntime on the same chain as an ONNX graph (CPU provider; its graph optimiser left at
    the default, which may fuse too, and at ORT_DISABLE_ALL for a node-by-node figure).
Figures are microseconds per node (median of repeats), and the ratio to onnxruntime's.

    python bench/graph_overhead.py [--nodes 2000] [--repeats 200] [--threads 1]
"""
import argparse
import statistics

import _common

OPS = ("Add", "Mul", "Relu", "Sub", "Neg", "Abs")


def _chain(hl, x, c):
    v = x
    for k in range(ARGS.nodes):
        kind = OPS[k % len(OPS)]
        v = (v + c if kind == "Add" else v * c if kind == "Mul" else hl.relu(v) if kind == "Relu"
             else v - c if kind == "Sub" else -v if kind == "Neg" else abs(v))
    return v


def _median_us_per_node(fn):
    times = _common.time_steps(fn, ARGS.repeats, warmup=5)
    return statistics.median(times) / ARGS.nodes * 1e6


def bench_hl():
    import gc

    import numpy as np

    import hl
    from hl import _core
    hl.set_num_threads(ARGS.threads)
    x = hl.tensor(np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8))
    c = hl.tensor(np.float32(0.5))
    out = {"eager": _median_us_per_node(lambda: _chain(hl, x, c))}
    for name, options in (("plan_unfused", _core.PLAN_NO_FUSION), ("plan", 0)):
        _core.plan_begin()
        try:
            y = _chain(hl, x, c)
        finally:
            plan = _core.plan_end()
        gc.collect()
        _core.plan_set_options(plan, options)
        out[name] = _median_us_per_node(lambda: _core.plan_run(plan))
        out[name + "_stats"] = _core.plan_stats(plan)
    out["check"] = float(abs(y.numpy() - _chain(hl, x, c).numpy()).max())
    return out


def bench_onnxruntime():
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    nodes, prev = [], "x"
    for k in range(ARGS.nodes):
        kind = OPS[k % len(OPS)]
        ins = [prev, "c"] if kind in ("Add", "Mul", "Sub") else [prev]
        name = f"v{k}" if k < ARGS.nodes - 1 else "y"
        nodes.append(helper.make_node(kind, ins, [name]))
        prev = name
    graph = helper.make_graph(
        nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8])],
        [helper.make_tensor("c", TensorProto.FLOAT, [], [0.5])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    x = np.linspace(-1, 1, 8, dtype=np.float32).reshape(1, 8)
    out = {}
    for name, level in (("ort_default", ort.GraphOptimizationLevel.ORT_ENABLE_ALL),
                        ("ort_no_opt", ort.GraphOptimizationLevel.ORT_DISABLE_ALL)):
        so = ort.SessionOptions()
        so.graph_optimization_level = level
        so.intra_op_num_threads = ARGS.threads
        so.inter_op_num_threads = 1
        sess = ort.InferenceSession(model.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        out[name] = _median_us_per_node(lambda: sess.run(None, {"x": x}))
    return out


def _cpu():
    try:
        with open("/proc/cpuinfo") as f:
            return next(l.split(":", 1)[1].strip() for l in f if l.startswith("model name"))
    except (OSError, StopIteration):
        import platform
        return platform.machine()


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=2000)
    p.add_argument("--repeats", type=int, default=200)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--worker", choices=["hl", "onnxruntime"])
    ARGS = p.parse_args()
    _common.setup(ARGS.threads)
    if ARGS.worker:
        _common.report(bench_hl() if ARGS.worker == "hl" else bench_onnxruntime())
        return
    base = ["--nodes", ARGS.nodes, "--repeats", ARGS.repeats, "--threads", ARGS.threads]
    h = _common.run_worker(__file__, base + ["--worker", "hl"], "hl")
    o = _common.run_worker(__file__, base + ["--worker", "onnxruntime"], "onnxruntime")
    print(f"{ARGS.nodes} nodes of (1, 8) float32, {ARGS.threads} thread(s), {_cpu()}; "
          f"us per node, median of {ARGS.repeats}")
    ref = o["ort_no_opt"]
    for name, us in (("hl eager", h["eager"]), ("hl plan, fusion off", h["plan_unfused"]),
                     ("hl plan (fused)", h["plan"]), ("onnxruntime, no graph optimisation", ref),
                     ("onnxruntime, default optimisation", o["ort_default"])):
        print(f"  {name:38s} {us:8.3f} us   {us / ref:6.2f}x onnxruntime (no opt)")
    print(f"  fused plan: {h['plan_stats']['fused_groups']} passes for "
          f"{h['plan_stats']['fused_calls']} calls; max |plan - eager| = {h['check']:.1e}")


ARGS = None
if __name__ == "__main__":
    main()
