"""Weights kept only packed (fuse_matmul.py, Program.all_constants): a constant B that only
fused products read is dropped once packed and re-derived from the packed copy, bit for bit,
when a run needs the graph as written, a fallback needs it, or the weights are asked for."""
import threading

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx

from ._models import ort_run

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("k,n", [(1, 1), (5, 16), (300, 37), (513, 50), (768, 2304)])
def test_unpack_gives_back_the_matrix_bit_for_bit(k, n):
    """Also the check that PACK_NR / PACK_KC (hl.ops.linalg) agree with matmul_fused.c:
    K past one 256-row block and N past whole 16-column panels would come back scrambled."""
    b = RNG.standard_normal((k, n)).astype(np.float32)
    np.testing.assert_array_equal(hl.gemm_pack_b(hl.tensor(b)).unpack().numpy(), b)
    bt = np.ascontiguousarray(b.T)
    np.testing.assert_array_equal(hl.gemm_pack_b(hl.tensor(bt), trans_b=True).unpack(True)
                                  .numpy(), bt)


def _model(extra_nodes=(), outputs=("y",)):
    """y = relu(x @ W + b) @ V; ``extra_nodes`` may read W or V elsewhere."""
    w = numpy_helper.from_array(RNG.standard_normal((300, 40)).astype(np.float32), "W")
    v = numpy_helper.from_array(RNG.standard_normal((40, 24)).astype(np.float32), "V")
    b = numpy_helper.from_array(RNG.standard_normal(40).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "W"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("MatMul", ["r", "V"], ["y"]), *extra_nodes]
    outs = [helper.make_tensor_value_info(o, TensorProto.FLOAT, [f"{o}{i}" for i in range(2)])
            for o in outputs]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["b", 300])], outs, [w, v, b])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_b_read_only_by_products_is_kept_packed_only():
    model = _model()
    rep = hl.onnx.prepare(model)
    prog = rep.model.program
    assert sorted(prog.packed_only) == ["V", "W"]
    assert "W" not in prog.constants and "V" not in prog.constants
    x = RNG.standard_normal((3, 300)).astype(np.float32)
    want = ort_run(model, {"x": x})[0]
    fused = [rep.run([x])[0] for _ in range(3)]  # eager, recorded, replayed
    for f in fused:
        np.testing.assert_allclose(f, want, rtol=1e-5, atol=1e-4)
    # the weights, asked for: the file's values exactly, and from now on held plain
    vals = rep.model.initializer_values()
    np.testing.assert_array_equal(vals["W"].numpy(), numpy_helper.to_array(
        model.graph.initializer[0]))
    assert prog.packed_only == {} and "W" in prog.constants
    np.testing.assert_array_equal(rep.run([x])[0], fused[0])


def test_b_read_elsewhere_or_returned_stays_plain():
    # (a node reading only constants is folded at prepare(): W must meet a run-time value)
    scale = helper.make_node("ReduceSum", ["x"], ["xs"], keepdims=0)
    scaled_w = helper.make_node("Mul", ["W", "xs"], ["ws"])
    model = _model([scale, scaled_w], outputs=("y", "ws"))
    rep = hl.onnx.prepare(model)
    assert sorted(rep.model.program.packed_only) == ["V"]
    assert "W" in rep.model.program.constants
    x = RNG.standard_normal((2, 300)).astype(np.float32)
    for got, want in zip(rep.run([x]), ort_run(model, {"x": x})):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-3)


def test_intermediates_asked_for_restore_the_weights():
    model = _model()
    rep = hl.onnx.prepare(model)
    x = RNG.standard_normal((2, 300)).astype(np.float32)
    fused = rep.run([x])[0]
    written = rep.run([x], all_outputs=True)
    np.testing.assert_allclose(written["y"], fused, rtol=1e-5, atol=1e-4)
    assert "W" not in written  # constants are not values the run computed


def test_restoring_while_other_threads_run():
    model = _model()
    x = RNG.standard_normal((4, 300)).astype(np.float32)
    want = hl.onnx.prepare(model).run([x])[0]
    for _ in range(3):
        rep = hl.onnx.prepare(model)
        got, errs, start = [], [], threading.Barrier(3)

        def runs():
            try:
                start.wait()
                for _ in range(6):
                    got.append(rep.run([x])[0])
            except Exception as e:  # noqa: BLE001 - reported below
                errs.append(e)

        def restore():
            try:
                start.wait()
                rep.model.initializer_values()
                got.append(rep.run([x], all_outputs=True)["y"])
            except Exception as e:  # noqa: BLE001
                errs.append(e)
        threads = [threading.Thread(target=runs), threading.Thread(target=runs),
                   threading.Thread(target=restore)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errs and len(got) == 13
        for g in got:
            np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-4)  # sums in other orders
