"""One convolution layer as a one-node ONNX model (Conv [+ Clip 0..6]), hl's replayed plan
against onnxruntime's node, one process: the layer's own time on each side, without the
Python around a run.

    python bench/onnx_layer_vs_ort.py 32 16 112 --batch 8             # 1x1, 32->16 at 112x112
    python bench/onnx_layer_vs_ort.py 3 32 224 --k 3 --stride 2 --clip --batch 8   # the stem
    python bench/onnx_layer_vs_ort.py 576 576 14 --k 3 --stride 2 --group 576     # depthwise

hl: the plan's own per-record profile (hl_plan_profile), per replay of 10, minimum and median
over --reps / 10 such groups; onnxruntime: its per-node profile (the Conv or FusedConv node
only: with one layer onnxruntime adds reorders to and from its blocked layout, NCHWc, that a
whole model pays once, and they are left out), minimum and median of the last three quarters
of --reps runs. Both at --threads. The outputs must agree within 1e-4 (relative to 1 + |ort|).
Compare two hl trees by running this script with PYTHONPATH set to each in turn, alternating.
"""
import argparse
import json
import os
import tempfile

import numpy as np


def model(cin, cout, size, k, stride, group, batch, clip):
    import onnx
    import onnx.helper as oh
    from onnx import numpy_helper
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((cout, cin // group, k, k)) * 0.1).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    out = (size + 2 * (k // 2) - k) // stride + 1
    nodes = [oh.make_node("Conv", ["x", "W", "B"], ["c" if clip else "y"], kernel_shape=[k, k],
                          strides=[stride, stride], pads=[k // 2] * 4, group=group)]
    inits = [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")]
    if clip:
        inits += [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
        nodes.append(oh.make_node("Clip", ["c", "lo", "hi"], ["y"]))
    g = oh.make_graph(nodes, "layer", [oh.make_tensor_value_info("x", 1, [batch, cin, size, size])],
                      [oh.make_tensor_value_info("y", 1, [batch, cout, out, out])], inits)
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)])


def plan_of(rep):
    from hl.onnx.planned import PlanCache

    def find(o, depth=0):
        if isinstance(o, PlanCache):
            return o
        if depth > 3:
            return None
        for v in getattr(o, "__dict__", {}).values():
            r = find(v, depth + 1)
            if r is not None:
                return r
    return [e for e in find(rep).entries.values() if e is not None][0].plan


def time_hl(path, x, reps, threads):
    import hl
    import hl.onnx
    from hl import _core
    hl.set_num_threads(threads)
    rep = hl.onnx.prepare(path)
    for _ in range(5):
        rep.run({"x": x})
    plan = plan_of(rep)
    per = []
    for _ in range(max(1, reps // 10)):
        _core.plan_set_profiling(plan, True, 0)
        for _ in range(10):
            rep.run({"x": x})
        timed, _ops, _first, ns = _core.plan_profile(plan)
        per.append(sum(ns) / timed / 1e3)
    return per, np.asarray(rep.run({"x": x})[0])


def time_ort(path, x, reps, threads):
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "hl_layer_ort")
    sess = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    for _ in range(reps):
        out = sess.run(None, {"x": x})[0]
    prof = sess.end_profiling()
    with open(prof) as fh:
        events = json.load(fh)
    os.remove(prof)
    durs = [e["dur"] for e in events if e.get("cat") == "Node" and
            e["name"].endswith("_kernel_time") and
            e["args"].get("op_name") in ("Conv", "FusedConv")]
    return durs[len(durs) // 4:], out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("cin", type=int)
    ap.add_argument("cout", type=int)
    ap.add_argument("size", type=int, help="the input's height and width")
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--stride", type=int, default=1)
    ap.add_argument("--group", type=int, default=1)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--clip", action="store_true", help="a Clip(0, 6) after the Conv")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--reps", type=int, default=200)
    a = ap.parse_args()
    x = np.random.default_rng(1).standard_normal(
        (a.batch, a.cin, a.size, a.size)).astype(np.float32)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "layer.onnx")
        with open(path, "wb") as fh:
            fh.write(model(a.cin, a.cout, a.size, a.k, a.stride, a.group, a.batch,
                           a.clip).SerializeToString())
        hl_us, hl_out = time_hl(path, x, a.reps, a.threads)
        ort_us, ort_out = time_ort(path, x, a.reps, a.threads)
    err = float(np.max(np.abs(hl_out - ort_out) / (1 + np.abs(ort_out))))
    print(f"{a.cin}->{a.cout} {a.size}x{a.size} k{a.k} s{a.stride} g{a.group} b{a.batch} "
          f"t{a.threads}: hl min {min(hl_us):.0f} med {np.median(hl_us):.0f} us | "
          f"ort min {min(ort_us):.0f} med {np.median(ort_us):.0f} us | "
          f"hl/ort med {np.median(hl_us) / np.median(ort_us):.2f} | err {err:.1e}")
    if err > 1e-4:
        raise SystemExit(f"outputs differ from onnxruntime's by {err:.1e} (> 1e-4)")


if __name__ == "__main__":
    main()
