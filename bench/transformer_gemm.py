"""The transformers' matrix products, one by one: hl's matmul_fused on a B packed once (what
hl.onnx runs for each MatMul/Gemm with a constant weight) beside onnxruntime's MatMul + Add on
the same constant weight (MLAS, which also packs it once, at session creation).

    python bench/transformer_gemm.py --threads 1,2 --repeat 15
    python bench/transformer_gemm.py --only gpt2_fc2,bert_fc2 --threads 2 --clock cpu

Shapes: GPT-2 small at batch 8 x 64 tokens (M = 512) and BERT-base at batch 8 x 128 tokens
(M = 1024): QKV (768 -> 2304), the attention's output projection (768 -> 768, + residual), the
MLP's FC1 (768 -> 3072, + GELU) and FC2 (3072 -> 768, + residual); the same at batch 1
(`_b1`: M = 64 and 128; BERT-base's Q, K and V are three 768 -> 768 products there);
gpt2_head and gpt2_head_b1 are GPT-2's 768 -> 50257 logits (0.4 s and 33 ms a call at one
thread: only with --only). Both sides add the bias;
hl's row also applies the model's epilogue (GELU, residual) inside the product, which
onnxruntime runs as separate nodes, so hl's figure includes more work than the peer's.

Each library runs in a process of its own (one after the other), --repeat timed calls after
a warm-up; the table gives the fastest call (the figure a loaded host inflates least) and the
median, GFLOP/s from the fastest, the ratio hl / onnxruntime time, and for each library
its speed-up from the first thread count listed to each other (the scaling issue 21 asks
about). With --clock cpu and one thread the process's CPU time is timed instead.
"""
import argparse
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

# name: (M, K, N, epilogue); epilogue: "bias", "bias+res", "bias+gelu", "bias+gelu_tanh"
SHAPES = {
    "gpt2_qkv": (512, 768, 2304, "bias"),
    "gpt2_proj": (512, 768, 768, "bias+res"),
    "gpt2_fc1": (512, 768, 3072, "bias+gelu_tanh"),
    "gpt2_fc2": (512, 3072, 768, "bias+res"),
    "bert_qkv": (1024, 768, 768, "bias"),
    "bert_proj": (1024, 768, 768, "bias+res"),
    "bert_fc1": (1024, 768, 3072, "bias+gelu"),
    "bert_fc2": (1024, 3072, 768, "bias+res"),
    "gpt2_head": (512, 768, 50257, "none"),
    "gpt2_qkv_b1": (64, 768, 2304, "bias"),
    "gpt2_proj_b1": (64, 768, 768, "bias+res"),
    "gpt2_fc1_b1": (64, 768, 3072, "bias+gelu_tanh"),
    "gpt2_fc2_b1": (64, 3072, 768, "bias+res"),
    "bert_qkv_b1": (128, 768, 768, "bias"),
    "bert_proj_b1": (128, 768, 768, "bias+res"),
    "bert_fc1_b1": (128, 768, 3072, "bias+gelu"),
    "bert_fc2_b1": (128, 3072, 768, "bias+res"),
    "gpt2_head_b1": (64, 768, 50257, "none"),
}
DEFAULT = [k for k in SHAPES if not k.startswith("gpt2_head")]


def _data(m, k, n):
    import numpy as np
    rng = np.random.default_rng(m + k + n)
    return (rng.standard_normal((m, k)).astype(np.float32),
            (rng.standard_normal((k, n)) * 0.05).astype(np.float32),
            rng.standard_normal(n).astype(np.float32),
            rng.standard_normal((m, n)).astype(np.float32))


def _hl_call(m, k, n, epi):
    import numpy as np
    import hl
    from hl import ops
    a, b, bias, r = _data(m, k, n)
    packed = ops.gemm_pack_b(hl.tensor(b))
    ta, tb, tr = hl.tensor(a), hl.tensor(bias), hl.tensor(r)
    out = hl.tensor(np.zeros((m, n), np.float32))  # written in place: no page faults timed
    act = epi.split("+")[-1] if "gelu" in epi else "none"
    bias_t = tb if "bias" in epi else None
    res_t = tr if "res" in epi else None
    return lambda: ops.matmul_fused_forward(ta, packed, bias_t, res_t, act=act, out=out)


def _ort_call(m, k, n, epi, threads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    a, b, bias, _ = _data(m, k, n)
    nodes = [helper.make_node("MatMul", ["a", "b"], ["p"])]
    inits = [numpy_helper.from_array(b, "b")]
    last = "p"
    if "bias" in epi:
        nodes.append(helper.make_node("Add", ["p", "bias"], ["y"]))
        inits.append(numpy_helper.from_array(bias, "bias"))
        last = "y"
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("a", TensorProto.FLOAT,
                                                                          [m, k])],
                              [helper.make_tensor_value_info(last, TensorProto.FLOAT, [m, n])],
                              inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    feeds = {"a": a}
    return lambda: sess.run(None, feeds)


def worker(lib, names, threads, repeat, clock):
    if lib == "hl":
        import hl
        hl.set_num_threads(threads)
    out = {}
    for name in names:
        m, k, n, epi = SHAPES[name]
        fn = _hl_call(m, k, n, epi) if lib == "hl" else _ort_call(m, k, n, epi, threads)
        out[name] = _common.time_steps(fn, repeat, 3, clock)
    _common.report(out)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", default=",".join(DEFAULT), help=f"comma-separated: {list(SHAPES)}")
    p.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    p.add_argument("--repeat", type=int, default=15)
    p.add_argument("--clock", choices=["wall", "cpu"], default="wall")
    p.add_argument("--worker", nargs=3, help=argparse.SUPPRESS)  # LIB THREADS NAMES
    args = p.parse_args()
    if args.worker:
        lib, threads, names = args.worker
        _common.setup(int(threads))
        worker(lib, names.split(","), int(threads), args.repeat, args.clock)
        return
    names, counts = args.only.split(","), [int(t) for t in args.threads.split(",")]
    for name in names:
        if name not in SHAPES:
            sys.exit(f"unknown shape {name!r}; known: {list(SHAPES)}")
    res = {}
    for t in counts:
        for lib in ("hl", "ort"):
            res[lib, t] = _common.run_worker(
                __file__, ["--worker", lib, t, ",".join(names), "--repeat", args.repeat,
                           "--clock", args.clock], f"{lib} at {t} threads")
    print(f"# {args.clock} clock, fastest / median of {args.repeat} calls, load "
          f"{os.getloadavg()[0]:.2f}")
    head = f"{'shape':<11} {'M x K x N':>17} {'thr':>3} {'hl ms':>14} {'ort ms':>14} " \
           f"{'hl GF/s':>7} {'ort GF/s':>8} {'hl/ort':>6} {'hl x':>5} {'ort x':>5}"
    print(head)
    for name in names:
        m, k, n, _ = SHAPES[name]
        flops = 2.0 * m * k * n
        for t in counts:
            h, o = res["hl", t][name], res["ort", t][name]
            hx = min(res["hl", counts[0]][name]) / min(h)
            ox = min(res["ort", counts[0]][name]) / min(o)
            print(f"{name:<11} {f'{m}x{k}x{n}':>17} {t:>3} "
                  f"{min(h)*1e3:6.2f}/{statistics.median(h)*1e3:7.2f} "
                  f"{min(o)*1e3:6.2f}/{statistics.median(o)*1e3:7.2f} "
                  f"{flops/min(h)/1e9:7.1f} {flops/min(o)/1e9:8.1f} {min(h)/min(o):6.3f} "
                  f"{hx:5.2f} {ox:5.2f}")


if __name__ == "__main__":
    main()
