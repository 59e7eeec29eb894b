"""hl/onnx/common_nodes.py: nodes that compute the same values (same op, attributes and
inputs, small constants compared by value) run once in prepare()'d programs.

Every graph runs three ways: prepare()'d (merged, then replayed as a plan), with all_outputs
(the graph as written, node by node) and in onnxruntime; outputs agree exactly with the
written graph (merging changes which node computes a value, not how) and within rtol 1e-6
of onnxruntime.
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx

from ._models import ort_run

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)


def _model(nodes, inits, outputs, inputs=(("x", TensorProto.FLOAT, [2, 6]),)):
    graph = helper.make_graph(
        nodes, "common_nodes",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [_output(o) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _output(name, rank=2):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                         [f"{name}_{i}" for i in range(rank)])


def _const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


def _ops(rep):
    """The op types the prepared program runs, in order."""
    nodes = rep.model.program.fused_nodes or rep.model.program.graph.nodes
    skip = rep.model.program.folded | rep.model.program.fused_skip
    return [n.op_type for n in nodes if n.index not in skip]


def _check(model, feeds):
    rep = hl.onnx.prepare(model)
    want = ort_run(model, feeds)
    for _ in range(3):  # node by node, recording the plan, replaying it
        got = rep.run(list(feeds.values()))
        written = rep.run(list(feeds.values()), all_outputs=True)
        for g, o, w in zip(got, model.graph.output, want):
            np.testing.assert_array_equal(g, written[o.name])
            np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-7)
    return rep


def test_per_layer_mask_chains_run_once():
    """BERT's export: each of three 'layers' turns the same int64 mask into an additive
    float mask (Cast, Sub from its own copy of 1, Mul by its own copy of -10000, Where on
    Equal) and adds it to its scores: one chain is left, every layer reads it."""
    nodes, inits = [], []
    for layer in range(3):
        p = f"l{layer}_"
        nodes += [helper.make_node("Cast", ["mask"], [p + "c"], to=TensorProto.FLOAT),
                  helper.make_node("Sub", [p + "one", p + "c"], [p + "s"]),
                  helper.make_node("Mul", [p + "s", p + "big"], [p + "m"]),
                  helper.make_node("Equal", [p + "m", p + "zero"], [p + "e"]),
                  helper.make_node("Where", [p + "e", p + "zero", p + "m"], [p + "w"]),
                  helper.make_node("Add", ["x" if layer == 0 else f"l{layer - 1}_y", p + "w"],
                                   [p + "y"])]
        inits += [_const(p + "one", 1.0), _const(p + "big", -10000.0), _const(p + "zero", 0.0)]
    model = _model(nodes, inits, ["l2_y"], inputs=(("x", TensorProto.FLOAT, [2, 6]),
                                                   ("mask", TensorProto.INT64, [2, 6])))
    feeds = {"x": RNG.standard_normal((2, 6)).astype(np.float32),
             "mask": np.array([[1, 1, 1, 0, 0, 1], [1, 0, 1, 1, 1, 1]], np.int64)}
    rep = _check(model, feeds)
    ops = _ops(rep)
    assert [ops.count(op) for op in ("Cast", "Sub", "Mul", "Equal", "Where", "Add")] == \
        [1, 1, 1, 1, 1, 3]


def test_different_attributes_are_not_merged():
    """Same op on the same input, attributes differing in value (LeakyRelu's alpha, a
    Transpose's perm, Softmax's axis) or only in the sign of a zero (Clip's bounds via
    attributes is not in opset 17: LeakyRelu alpha 0.0 against -0.0 stands for it)."""
    nodes = [helper.make_node("LeakyRelu", ["x"], ["a"], alpha=0.1),
             helper.make_node("LeakyRelu", ["x"], ["b"], alpha=0.2),
             helper.make_node("LeakyRelu", ["x"], ["a2"], alpha=0.1),
             helper.make_node("Transpose", ["x"], ["t1"], perm=[1, 0]),
             helper.make_node("Transpose", ["x"], ["t2"], perm=[0, 1]),
             helper.make_node("Softmax", ["x"], ["s1"], axis=0),
             helper.make_node("Softmax", ["x"], ["s2"], axis=1),
             helper.make_node("LeakyRelu", ["x"], ["z1"], alpha=0.0),
             helper.make_node("LeakyRelu", ["x"], ["z2"], alpha=-0.0),
             helper.make_node("Add", ["a", "b"], ["ab"]),
             helper.make_node("Add", ["ab", "a2"], ["y"]),
             helper.make_node("Add", ["s1", "s2"], ["s"]),
             helper.make_node("Add", ["z1", "z2"], ["z"])]
    model = _model(nodes, [], ["y", "t1", "t2", "s", "z"])
    rep = _check(model, {"x": RNG.standard_normal((2, 6)).astype(np.float32)})
    ops = _ops(rep)
    # only a2 (alpha 0.1 again) is merged: 0.1, 0.2, 0.0, -0.0 stay
    assert ops.count("LeakyRelu") == 4
    assert ops.count("Transpose") == 2 and ops.count("Softmax") == 2


def test_different_constant_values_are_not_merged():
    """Mul by constants of other names: equal values merge; a value one ulp away in one
    element, the same bytes in another shape, or a zero of the other sign do not. Constants
    larger than SMALL_CONSTANT are compared by name, not by value (equal ones stay apart)."""
    from hl.onnx.common_nodes import SMALL_CONSTANT
    n_big = SMALL_CONSTANT // 4 + 6
    big = RNG.standard_normal(n_big).astype(np.float32)
    row = np.arange(6, dtype=np.float32)
    row2 = row.copy()
    row2[5] = np.nextafter(np.float32(5), np.float32(6))
    inits = [_const("c1", row), _const("c2", row.copy()), _const("c3", row2),
             _const("c4", row.reshape(1, 6)), _const("z", 0.0), _const("nz", -0.0),
             _const("big1", big), _const("big2", big.copy())]
    nodes = [helper.make_node("Mul", ["x", c], [f"m_{c}"])
             for c in ("c1", "c2", "c3", "c4", "z", "nz")]
    nodes += [helper.make_node("Mul", ["xb", b], [f"m_{b}"]) for b in ("big1", "big2")]
    outputs = ["m_c1", "m_c2", "m_c3", "m_c4", "m_z", "m_nz", "m_big1", "m_big2"]
    model = _model(nodes, inits, [])
    model.graph.ClearField("output")  # outputs read through Identity: mergeable nodes
    for o in outputs:
        model.graph.node.append(helper.make_node("Identity", [o], ["out_" + o]))
        model.graph.output.append(_output("out_" + o, 1 if "big" in o else 2))
    model.graph.input.append(helper.make_tensor_value_info("xb", TensorProto.FLOAT, [n_big]))
    feeds = {"x": -np.abs(RNG.standard_normal((2, 6))).astype(np.float32),
             "xb": RNG.standard_normal(n_big).astype(np.float32)}
    rep = _check(model, feeds)
    got = rep.run(list(feeds.values()))
    assert np.signbit(got[4]).sum() == 12 - np.signbit(got[5]).sum() == 12  # -x * 0: -0.0
    assert np.array_equal(got[2][:, :5], got[0][:, :5]) and not np.array_equal(got[2], got[0])
    # c1 = c2 merged; c3, c4 (another shape), z, nz and both big ones stay
    assert _ops(rep).count("Mul") == 7


def test_random_ops_are_never_merged():
    """Two RandomUniformLike nodes on the same input with the same attributes draw twice;
    two Dropouts in training mode likewise (their masks differ); equal deterministic ops
    beside them are merged."""
    nodes = [helper.make_node("RandomUniformLike", ["x"], ["r1"], low=0.0, high=1.0),
             helper.make_node("RandomUniformLike", ["x"], ["r2"], low=0.0, high=1.0),
             helper.make_node("Sub", ["r1", "r2"], ["d"]),
             helper.make_node("Abs", ["x"], ["a1"]),
             helper.make_node("Abs", ["x"], ["a2"]),
             helper.make_node("Sub", ["a1", "a2"], ["z"])]
    model = _model(nodes, [], ["d", "z"], inputs=(("x", TensorProto.FLOAT, [64, 64]),))
    rep = hl.onnx.prepare(model)
    x = RNG.standard_normal((64, 64)).astype(np.float32)
    for _ in range(3):
        d, z = rep.run([x])
        assert np.count_nonzero(d) > 0.99 * d.size  # two draws, not one read twice
        np.testing.assert_array_equal(z, np.zeros_like(z))
    ops = _ops(rep)
    assert ops.count("RandomUniformLike") == 2 and ops.count("Abs") == 1


def test_graph_outputs_keep_their_names():
    """Two equal nodes whose outputs are both graph outputs both run (each name is asked
    for); a third equal one that is not an output is merged into the first."""
    nodes = [helper.make_node("Exp", ["x"], ["e1"]),
             helper.make_node("Exp", ["x"], ["e2"]),
             helper.make_node("Exp", ["x"], ["e3"]),
             helper.make_node("Neg", ["e3"], ["n"])]
    model = _model(nodes, [], ["e1", "e2", "n"])
    rep = _check(model, {"x": RNG.standard_normal((2, 6)).astype(np.float32)})
    assert _ops(rep).count("Exp") == 2
