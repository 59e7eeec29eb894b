"""hl/onnx/fuse_attention.py: attention chains (MatMul(Q, K^T), scale, mask Add, Softmax,
SDPA's IsNaN/Where, MatMul(., V)) run as one hl.attention kernel in prepare()'d programs.

Each graph runs three ways: prepare()'d (fused), with all_outputs (the graph as written, node
by node) and in onnxruntime; NaN positions must agree. Tolerances: rtol 1e-5, atol 1e-6
(float32 sums in another order, the scale applied once instead of to Q and K).
The zoo's BERT and GPT-2 (tests/onnx/test_zoo*.py) check the fused models against their
float64-checked reference outputs.
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx
from tests.concurrency import run_threads

from ._models import ort_run

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)
H, D = 3, 8
E = H * D
FLOAT, BOOL = TensorProto.FLOAT, TensorProto.BOOL


def _const(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.asarray(value, dtype), name)


def _heads(src, out, perm):
    """(b, t, E) -> (b, t, H, D) -> Transpose(perm)."""
    return [helper.make_node("Reshape", [src, "split"], [f"{out}_r"]),
            helper.make_node("Transpose", [f"{out}_r"], [out], perm=perm)]


def _sdpa_graph(opset=17):
    """What torch.onnx exports for scaled_dot_product_attention with a boolean mask (BERT
    and GPT-2 of the zoo): sqrt(scale) on Q and on K^T, Where(mask, 0, -inf), Softmax,
    Where(IsNaN(p), 0, p), MatMul, and the heads merged back by Transpose + Reshape."""
    nodes = [helper.make_node("MatMul", ["x", "Wq"], ["q0"]),
             helper.make_node("MatMul", ["x", "Wk"], ["k0"]),
             helper.make_node("MatMul", ["x", "Wv"], ["v0"])]
    nodes += _heads("q0", "q", [0, 2, 1, 3]) + _heads("k0", "kt", [0, 2, 3, 1]) + \
        _heads("v0", "v", [0, 2, 1, 3])
    nodes += [helper.make_node("Mul", ["q", "c"], ["qs"]),
              helper.make_node("Mul", ["kt", "c"], ["ks"]),
              helper.make_node("MatMul", ["qs", "ks"], ["s"]),
              helper.make_node("Where", ["keep", "zero", "neg_inf"], ["bias"]),
              helper.make_node("Add", ["s", "bias"], ["sm_in"]),
              helper.make_node("Softmax", ["sm_in"], ["p"], axis=-1),
              helper.make_node("IsNaN", ["p"], ["nan"]),
              helper.make_node("Where", ["nan", "zero", "p"], ["p0"]),
              helper.make_node("MatMul", ["p0", "v"], ["o"]),
              helper.make_node("Shape", ["o"], ["o_shape"]),   # as exporters size the merge
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merge"], ["y"])]
    inits = [_const(n, RNG.standard_normal((E, E)) * 0.3) for n in ("Wq", "Wk", "Wv")] + \
        [_const("split", [0, 0, H, D], np.int64), _const("merge", [0, 0, E], np.int64),
         _const("c", D ** -0.25), _const("zero", 0.0), _const("neg_inf", -np.inf)]
    graph = helper.make_graph(
        nodes, "sdpa",
        [helper.make_tensor_value_info("x", FLOAT, ["b", "t", E]),
         helper.make_tensor_value_info("keep", BOOL, ["b", 1, "t", "t"])],
        [helper.make_tensor_value_info("y", FLOAT, ["b", "t", E]),
         helper.make_tensor_value_info("o_shape", TensorProto.INT64, [4])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _classic_graph(scale_op="Div", cast=False, axis=-1, outputs=("y",), c_shape=(),
                   mask_mul=False):
    """Older exports (and GPT-2 of the small zoo): MatMul(Q, K^T), then Div by sqrt(D) or
    Mul by its inverse, Add of a float (b, 1, 1, t) mask (with mask_mul, the mask times a
    constant first, as Hugging Face's (1 - m) * -10000), Softmax, [Cast], MatMul."""
    nodes = _heads("x", "q", [0, 2, 1, 3]) + _heads("xk", "kt", [0, 2, 3, 1]) + \
        _heads("xv", "v", [0, 2, 1, 3])
    nodes += [helper.make_node("MatMul", ["q", "kt"], ["s"]),
              helper.make_node(scale_op, ["s", "c"], ["ss"]),
              helper.make_node("Add", ["mask_s" if mask_mul else "mask", "ss"], ["sm_in"]),
              helper.make_node("Softmax", ["sm_in"], ["p"], axis=axis)]
    if mask_mul:  # a Mul by a constant on the mask's side too, and first in the Add
        nodes.insert(0, helper.make_node("Mul", ["mask", "c"], ["mask_s"]))
    if cast:
        nodes.append(helper.make_node("Cast", ["p"], ["pc"], to=FLOAT))
    nodes += [helper.make_node("MatMul", ["pc" if cast else "p", "v"], ["o"]),
              helper.make_node("Transpose", ["o"], ["ot"], perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ot", "merge"], ["y"])]
    c = np.sqrt(D) if scale_op == "Div" else 1 / np.sqrt(D)
    inits = [_const("split", [0, 0, H, D], np.int64), _const("merge", [0, 0, E], np.int64),
             _const("c", np.full(c_shape, c))]
    ins = [helper.make_tensor_value_info(n, FLOAT, ["b", "t", E]) for n in ("x", "xk", "xv")]
    ins.append(helper.make_tensor_value_info("mask", FLOAT, ["mb", 1, 1, "t"]))
    ranks = {"y": 3, "ss": 4}
    graph = helper.make_graph(nodes, "classic", ins, [helper.make_tensor_value_info(
        o, FLOAT, [f"{o}{i}" for i in range(ranks[o])]) for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _fused(rep):
    return [n for n in rep.model.program.fused_nodes or [] if n.op_type == "FusedAttention"]


def _check(model, feeds_list, extra=()):
    rep = hl.onnx.prepare(model)
    names = [o.name for o in model.graph.output]
    for feeds in feeds_list:
        got = [rep.run(feeds) for _ in range(3)]  # eager, recording the plan, replaying it
        written = rep.run(feeds, all_outputs=True)
        want = ort_run(model, feeds)
        for i, (name, w) in enumerate(zip(names, want)):
            for g in got:
                np.testing.assert_array_equal(np.isnan(g[i]), np.isnan(w))
                np.testing.assert_allclose(g[i], w, rtol=1e-5, atol=1e-6, err_msg=name)
            np.testing.assert_allclose(got[0][i], written[name], rtol=1e-5, atol=1e-6)
    return rep


def _sdpa_feeds(b, t, hidden_rows=()):
    keep = RNG.random((b, 1, t, t)) > 0.3
    keep[..., 0] = True
    for bi, row in hidden_rows:
        keep[bi, 0, row] = False
    return {"x": RNG.standard_normal((b, t, E)).astype(np.float32), "keep": keep}


def test_sdpa_export_fuses_and_matches_onnxruntime():
    """Including fully masked rows: Softmax gives NaN there and the IsNaN/Where 0, which the
    kernel's nan_to_zero reproduces (onnxruntime agrees)."""
    model = _sdpa_graph()
    rep = _check(model, [_sdpa_feeds(1, 5), _sdpa_feeds(2, 13, hidden_rows=[(1, 4), (0, 0)])])
    (node,) = _fused(rep)
    assert node.nan_to_zero and node.merge_heads
    assert node.scale == pytest.approx(D ** -0.5, rel=1e-6)
    feeds = _sdpa_feeds(2, 7, hidden_rows=[(0, 3)])
    y = rep.run(feeds)[0]
    assert (y[0, 3] == 0).all()


def test_sdpa_export_large_logits_and_long_rows_as_accurate_as_onnxruntime():
    """40 and 67 keys (the kernel's 8-key registers and a tail), inputs scaled by 30 (scores
    in the thousands: the max shift keeps exp finite, and float32 scores carry absolute
    errors of ~1e-4 into exp, so both libraries stray from the exact answer by up to ~1%)
    and a fully masked row (0). Against the graph in float64: hl's largest error, relative
    to 1 + |y|, at most twice onnxruntime's plus 1e-5; NaN nowhere, zeros where masked."""
    model = _sdpa_graph()
    w = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in model.graph.initializer}
    rep = hl.onnx.prepare(model)
    for b, t in ((1, 40), (2, 67)):
        f = _sdpa_feeds(b, t, hidden_rows=[(b - 1, t // 2)])
        f["x"] = f["x"] * np.float32(30)
        x = f["x"].astype(np.float64)
        q, k, v = ((x @ w[n]).reshape(b, t, H, D).transpose(0, 2, 1, 3)
                   for n in ("Wq", "Wk", "Wv"))
        s_ = q @ k.transpose(0, 1, 3, 2) * D ** -0.5 + np.where(f["keep"], 0.0, -np.inf)
        with np.errstate(invalid="ignore"):
            e = np.exp(s_ - s_.max(-1, keepdims=True))
            p_ = np.nan_to_num(e / e.sum(-1, keepdims=True), nan=0.0)
        want = (p_ @ v).transpose(0, 2, 1, 3).reshape(b, t, E)
        got, ort = rep.run(f)[0], ort_run(model, f)[0]
        assert not np.isnan(got).any() and (got[b - 1, t // 2] == 0).all()
        err = lambda y: np.max(np.abs(y - want) / (1 + np.abs(want)))  # noqa: E731
        assert err(got) <= 2 * err(ort) + 1e-5, (err(got), err(ort))


@pytest.mark.parametrize("scale_op,cast,mask_mul", [("Div", False, False),
                                                    ("Mul", True, False),
                                                    ("Div", False, True)])
def test_classic_exports_fuse(scale_op, cast, mask_mul):
    """Div/Mul on the scores, the mask added first (and scaled itself), GPT-2's Cast to
    float32; a fully masked row (-inf mask) is NaN as onnxruntime's Softmax gives it."""
    model = _classic_graph(scale_op, cast, mask_mul=mask_mul)
    feeds = {n: RNG.standard_normal((2, 6, E)).astype(np.float32) for n in ("x", "xk", "xv")}
    mask = np.where(RNG.random((2, 1, 1, 6)) < 0.3, -1e4, 0.0).astype(np.float32)
    masked = dict(feeds, mask=np.full((2, 1, 1, 6), -np.inf, np.float32))
    rep = _check(model, [dict(feeds, mask=mask), masked])
    (node,) = _fused(rep)
    assert not node.nan_to_zero and node.merge_heads
    assert node.scale == pytest.approx(D ** -0.5, rel=1e-6)
    assert np.isnan(rep.run(masked)[0]).all()


def test_what_is_not_attention_is_left_alone():
    """Softmax over another axis, a scale of rank 5 (it would widen the scores), and scores
    the graph returns, are not fused."""
    assert _fused(hl.onnx.prepare(_classic_graph(axis=2))) == []
    assert _fused(hl.onnx.prepare(_classic_graph(c_shape=(1, 1, 1, 1, 1)))) == []
    model = _classic_graph(outputs=("y", "ss"))
    feeds = {n: RNG.standard_normal((1, 4, E)).astype(np.float32) for n in ("x", "xk", "xv")}
    rep = _check(model, [dict(feeds, mask=np.zeros((1, 1, 1, 4), np.float32))])
    assert _fused(rep) == []


def test_a_call_the_kernel_cannot_take_runs_the_nodes_as_written():
    """A mask that widens the scores (a batch of 2 over q, k, v's batch of 1) and float64
    operands: the absorbed nodes run one by one and give what onnxruntime gives."""
    model = _classic_graph()
    feeds = {n: RNG.standard_normal((1, 5, E)).astype(np.float32) for n in ("x", "xk", "xv")}
    wide = RNG.standard_normal((2, 1, 1, 5)).astype(np.float32)
    rep = hl.onnx.prepare(model)
    assert len(_fused(rep)) == 1
    got = rep.run(dict(feeds, mask=wide))[0]
    assert got.shape == (2, 5, E)
    np.testing.assert_allclose(got, ort_run(model, dict(feeds, mask=wide))[0], rtol=1e-5,
                               atol=1e-6)
    from hl.onnx.fuse_attention import _fits
    f64 = [hl.tensor(np.zeros((1, 1, 2, 2))) for _ in range(3)]
    assert not _fits(*f64, None)


def test_two_threads_share_a_prepared_model():
    model = _sdpa_graph()
    rep = hl.onnx.prepare(model)
    feeds = [_sdpa_feeds(2, 9, hidden_rows=[(1, 2)]) for _ in range(2)]
    want = [ort_run(model, f)[0] for f in feeds]

    def worker(i):
        for _ in range(4):
            np.testing.assert_allclose(rep.run(feeds[i])[0], want[i], rtol=1e-5, atol=1e-6)
    run_threads(worker, 2)
