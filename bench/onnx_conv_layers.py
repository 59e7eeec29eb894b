"""Per-layer CPU time of hl's convolution kernels on an ONNX model's Conv shapes, beside
PyTorch's (one thread each, batch 1, the layers' own geometry, random weights).

    python bench/onnx_conv_layers.py --models /work/helpers/zoo_full --model mobilenet_v2
    python bench/onnx_conv_layers.py --models DIR --model mobilenet_v2 --only dw

Each distinct shape runs hl.ops.conv_fused_forward with a ReLU epilogue, its weight packed as
hl.onnx packs it at prepare() (panels for 1x1, for 3x3 on at most 7 input channels and for
stride-2 kernels larger than 1x1, Winograd's layout for other 3x3 stride 1), and
torch.relu(conv2d(...)); the median of 5 timings of --reps calls each, by the process's CPU
time (the host is shared: CPU time inflates less than wall time). Rows are the model's
distinct shapes with how often each occurs; the totals weight each by its count. Compare two
hl trees by running this script with PYTHONPATH set to each in turn.
"""
import argparse
import collections
import os
import time

import numpy as np


def conv_shapes(path):
    import onnx
    from onnx import shape_inference
    m = shape_inference.infer_shapes(onnx.load(path, load_external_data=False))
    shapes = {}
    for vi in list(m.graph.value_info) + list(m.graph.input) + list(m.graph.output):
        shapes[vi.name] = [d.dim_value or 1 for d in vi.type.tensor_type.shape.dim]
    inits = {i.name: tuple(i.dims) for i in m.graph.initializer}
    rows = []
    for n in m.graph.node:
        if n.op_type != "Conv":
            continue
        a = {x.name: onnx.helper.get_attribute_value(x) for x in n.attribute}
        pads = tuple(a.get("pads", [0] * 4))
        rows.append((tuple(shapes[n.input[0]]), inits[n.input[1]], a.get("group", 1),
                     tuple(a.get("strides", [1, 1])), pads))
    return collections.Counter(rows)


def cpu_median(fn, reps):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(5):
        t = time.process_time()
        for _ in range(reps):
            fn()
        ts.append((time.process_time() - t) / reps)
    return sorted(ts)[2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/hl-onnx-zoo-full"))
    ap.add_argument("--model", default="mobilenet_v2", help="onnx_infer.py's model name")
    ap.add_argument("--only", choices=["all", "dw", "pw"], default="all",
                    help="dw: depthwise layers, pw: 1x1 layers")
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    import torch
    import hl
    from hl.ops.conv import conv_fused_forward, conv_pack
    hl.set_num_threads(1)
    torch.set_num_threads(1)
    shapes = conv_shapes(f"{args.models}/{args.model}-op17.onnx")
    totals = collections.defaultdict(lambda: [0.0, 0.0])
    print(f"{'input':22s} {'weight':20s} group stride count    hl ms  GFLOP/s  torch ms  hl/torch")
    for (xs, ws, g, s, p), count in shapes.items():
        if (args.only == "dw" and g == 1) or (args.only == "pw" and (g > 1 or ws[2] != 1)):
            continue
        rng = np.random.default_rng(0)
        x = rng.standard_normal(xs).astype(np.float32)
        w = (rng.standard_normal(ws) * 0.1).astype(np.float32)
        b = rng.standard_normal(ws[0]).astype(np.float32)
        hx, hw, hb = hl.tensor(x), hl.tensor(w), hl.tensor(b)
        packed = None
        if g == 1 and ws[2] == 3 and ws[1] * 9 <= 64 and s[0] in (1, 2):
            packed = conv_pack(hw, g, "panels")   # an RGB stem: its own kernel (conv_stem.c)
        elif g == 1 and (ws[2] == 1 or (ws[2] == 3 and s == (1, 1))):
            packed = conv_pack(hw, g, "panels" if ws[2] == 1 else "winograd")
        elif g == 1 and s == (2, 2) and ws[2] * ws[3] > 1:  # stride 2 by phases, as hl.onnx
            packed = conv_pack(hw, g)
        kw = dict(stride=s, padding=[p[0], p[1], p[2], p[3]], groups=g, act="relu",
                  packed=packed)
        th = cpu_median(lambda: conv_fused_forward(hx, hw, hb, **kw), args.reps)
        tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)
        with torch.inference_mode():
            tt = cpu_median(lambda: torch.relu(torch.nn.functional.conv2d(
                tx, tw, tb, s, (p[0], p[1]), 1, g)), args.reps)
        oh = (xs[2] + p[0] + p[2] - ws[2]) // s[0] + 1
        ow = (xs[3] + p[1] + p[3] - ws[3]) // s[1] + 1
        flops = 2 * np.prod(ws) * xs[0] * oh * ow
        kind = "depthwise" if g > 1 else f"{ws[2]}x{ws[3]} stride {s[0]}"
        totals[kind][0] += th * count
        totals[kind][1] += tt * count
        print(f"{str(xs):22s} {str(ws):20s} {g:5d} {s[0]:6d} {count:5d} {th * 1e3:8.3f} "
              f"{flops / th / 1e9:8.1f} {tt * 1e3:9.3f} {th / tt:9.2f}", flush=True)
    for kind, (h, t) in totals.items():
        print(f"{kind:16s} hl {h * 1e3:7.2f} ms  torch {t * 1e3:7.2f} ms")
    print(f"{'total':16s} hl {sum(v[0] for v in totals.values()) * 1e3:7.2f} ms  torch "
          f"{sum(v[1] for v in totals.values()) * 1e3:7.2f} ms")


if __name__ == "__main__":
    main()
