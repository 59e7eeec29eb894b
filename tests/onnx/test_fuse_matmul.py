"""hl/onnx/fuse_matmul.py: MatMul/Gemm with a constant B run on B packed at prepare(), with
bias, Reshape, residual and activation chains (BERT's erf GELU, GPT-2's tanh GELU, ReLU)
absorbed into hl.matmul_fused.

Each graph runs three ways: prepare()'d (fused), with all_outputs (the graph as written, node
by node) and in onnxruntime. Tolerances: rtol 1e-5, atol 1e-5 against both (float32 sums in
another order, fast erf/tanh within 3e-7).
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx

from ._models import ort_run

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)
K, N = 24, 40


def _init(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _scalar(name, value):
    return numpy_helper.from_array(np.array(value, np.float32), name)


def _model(nodes, inits, outputs=("y",), ranks=None):
    ranks = ranks or [3] * len(outputs)
    graph = helper.make_graph(
        nodes, "fuse_matmul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "t", K])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}{i}" for i in range(r)])
         for o, r in zip(outputs, ranks)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fused(rep):
    nodes = rep.model.program.fused_nodes or []
    return sorted((n.epilogue[0], bool(n.inputs[1]), bool(n.inputs[2]), bool(n.inputs[3]))
                  for n in nodes if n.op_type == "FusedMatMul")


def _check(model, shapes=((1, 5, K), (3, 7, K))):
    rep = hl.onnx.prepare(model)
    for shape in shapes:
        x = RNG.standard_normal(shape).astype(np.float32)
        got = rep.run([x])
        got_again = rep.run([x])  # the second run records the plan, the third replays it
        got_plan = rep.run([x])
        written = rep.run([x], all_outputs=True)
        want = ort_run(model, {"x": x})
        for g, g2, g3, o, w in zip(got, got_again, got_plan, model.graph.output, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(g, written[o.name], rtol=1e-5, atol=1e-5)
            np.testing.assert_array_equal(g, g2)
            np.testing.assert_array_equal(g, g3)
    return rep


def _bert_gelu(y, out, p):
    """BERT's export: x * (1 + erf(x / sqrt 2)) * 0.5."""
    nodes = [helper.make_node("Div", [y, f"{p}sqrt2"], [f"{p}d"]),
             helper.make_node("Erf", [f"{p}d"], [f"{p}e"]),
             helper.make_node("Add", [f"{p}e", f"{p}one"], [f"{p}a"]),
             helper.make_node("Mul", [y, f"{p}a"], [f"{p}m"]),
             helper.make_node("Mul", [f"{p}m", f"{p}half"], [out])]
    return nodes, [_scalar(f"{p}sqrt2", 1.4142135), _scalar(f"{p}one", 1.0),
                   _scalar(f"{p}half", 0.5)]


def _gpt2_gelu(y, out, p):
    """GPT-2's export: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""
    nodes = [helper.make_node("Mul", [y, f"{p}half"], [f"{p}h"]),
             helper.make_node("Pow", [y, f"{p}three"], [f"{p}p"]),
             helper.make_node("Mul", [f"{p}p", f"{p}c"], [f"{p}q"]),
             helper.make_node("Add", [y, f"{p}q"], [f"{p}s"]),
             helper.make_node("Mul", [f"{p}s", f"{p}k"], [f"{p}t"]),
             helper.make_node("Tanh", [f"{p}t"], [f"{p}u"]),
             helper.make_node("Add", [f"{p}u", f"{p}one"], [f"{p}v"]),
             helper.make_node("Mul", [f"{p}h", f"{p}v"], [out])]
    return nodes, [_scalar(f"{p}half", 0.5), _scalar(f"{p}three", 3.0),
                   _scalar(f"{p}c", 0.044715), _scalar(f"{p}k", 0.7978846),
                   _scalar(f"{p}one", 1.0)]


def test_bert_mlp_gelu_then_projection_with_residual():
    gelu, consts = _bert_gelu("h1", "g", "a_")
    nodes = [helper.make_node("MatMul", ["x", "W1"], ["m1"]),
             helper.make_node("Add", ["b1", "m1"], ["h1"]),  # the bias first, as exported
             *gelu,
             helper.make_node("MatMul", ["g", "W2"], ["m2"]),
             helper.make_node("Add", ["b2", "m2"], ["h2"]),
             helper.make_node("Add", ["h2", "x"], ["y"])]
    inits = [_init("W1", (K, N)), _init("b1", (N,)), _init("W2", (N, K)), _init("b2", (K,)),
             *consts]
    rep = _check(_model(nodes, inits))
    assert _fused(rep) == [("gelu", True, False, False), ("none", True, True, False)]


def test_gpt2_gemm_between_reshapes_with_tanh_gelu_and_residual():
    gelu, consts = _gpt2_gelu("r1", "g", "a_")
    nodes = [helper.make_node("Reshape", ["x", "flat"], ["x2"]),
             helper.make_node("Gemm", ["x2", "W1", "b1"], ["m1"]),
             helper.make_node("Reshape", ["m1", "back1"], ["r1"]),
             *gelu,
             helper.make_node("Reshape", ["g", "flat2"], ["g2"]),
             helper.make_node("Gemm", ["g2", "W2t", "b2"], ["m2"], transB=1),
             helper.make_node("Reshape", ["m2", "back2"], ["r2"]),
             helper.make_node("Add", ["x", "r2"], ["y"])]
    shape = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731
    inits = [_init("W1", (K, N)), _init("b1", (N,)), _init("W2t", (K, N)), _init("b2", (K,)),
             shape("flat", [-1, K]), shape("back1", [-1, 5, N]), shape("flat2", [-1, N]),
             shape("back2", [-1, 5, K]), *consts]
    rep = _check(_model(nodes, inits), shapes=((1, 5, K), (2, 5, K)))
    assert _fused(rep) == [("gelu_tanh", True, False, True), ("none", True, True, True)]


def test_split_into_heads_lone_products_and_relu():
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["q0"]),
             helper.make_node("Add", ["q0", "bq"], ["q1"]),
             helper.make_node("Reshape", ["q1", "heads"], ["q"]),   # (b, t, 4, 10)
             helper.make_node("Transpose", ["q"], ["qt"], perm=[0, 2, 1, 3]),
             helper.make_node("MatMul", ["x", "Wr"], ["r0"]),
             helper.make_node("Relu", ["r0"], ["y2"]),
             helper.make_node("MatMul", ["x", "Wl"], ["y3"])]
    inits = [_init("Wq", (K, N)), _init("bq", (N,)), _init("Wr", (K, 33)), _init("Wl", (K, 7)),
             numpy_helper.from_array(np.array([0, 0, 4, 10], np.int64), "heads")]
    rep = _check(_model(nodes, inits, outputs=("qt", "y2", "y3"), ranks=(4, 3, 3)))
    assert _fused(rep) == [("none", False, False, False), ("none", True, False, True),
                           ("relu", False, False, False)]


def test_what_cannot_run_in_the_kernel_runs_the_absorbed_nodes():
    """A residual that broadcasts (b, 1, N) and an input of another rank than the Gemm takes
    fall back to the nodes as written; an intermediate read twice or returned is not fused
    away; a chain that is no activation of ours (x * 2 + 1) stays as written."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]),
             helper.make_node("Add", ["m", "rb"], ["s"]),       # rb: (1, 1, N) computed
             helper.make_node("ReduceMean", ["x"], ["xm"], axes=[1, 2], keepdims=1),
             helper.make_node("Mul", ["xm", "wide"], ["rb"]),
             helper.make_node("MatMul", ["x", "W2"], ["m2"]),  # three weights: the same
             helper.make_node("Mul", ["m2", "two"], ["t"]),     # product thrice would be one
             helper.make_node("Add", ["t", "one"], ["y2"]),     # (common_nodes.py)
             helper.make_node("MatMul", ["x", "W3"], ["m3"]),
             helper.make_node("Relu", ["m3"], ["y3"])]
    inits = [_init("W", (K, N)), _init("W2", (K, N)), _init("W3", (K, N)),
             numpy_helper.from_array(np.ones((1, 1, N), np.float32), "wide"),
             _scalar("two", 2.0), _scalar("one", 1.0)]
    model = _model([nodes[2], nodes[3], nodes[0], nodes[1]] + nodes[4:], inits,
                   outputs=("s", "y2", "y3", "m3"))
    rep = _check(model)
    kinds = _fused(rep)
    assert ("none", False, True, False) in kinds   # the broadcasting residual: run as written
    assert ("relu", False, False, False) not in kinds  # m3 is returned too


def test_a_float64_model_is_left_as_written():
    nodes = [helper.make_node("MatMul", ["x", "W"], ["y"])]
    w = numpy_helper.from_array(RNG.standard_normal((K, N)), "W")
    graph = helper.make_graph(nodes, "f64", [helper.make_tensor_value_info(
        "x", TensorProto.DOUBLE, ["b", K])], [helper.make_tensor_value_info(
            "y", TensorProto.DOUBLE, ["b", N])], [w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl.onnx.prepare(model)
    assert _fused(rep) == []
    x = RNG.standard_normal((3, K))
    np.testing.assert_allclose(rep.run([x])[0], x @ numpy_helper.to_array(w), rtol=1e-12)
