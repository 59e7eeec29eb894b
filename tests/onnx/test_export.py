"""hl.onnx.to_onnx: models exported, checked with onnx.checker (full_check=True), run by
onnxruntime and re-imported by hl.onnx.prepare, both compared with hl's own outputs.

Tolerances: float32 graphs agree with hl to rtol 1e-4, atol 1e-5 (onnxruntime's kernels sum
in other orders; the composed ops such as GELU before opset 20 round differently); integer
and boolean outputs exactly. Where dynamic axes are asked for, each model also runs at a
second size of those axes.
"""
import importlib.util
import os

import numpy as np
import onnx
import pytest

import hl
import hl.autograd.functional as F
from hl import errors
from hl import layers as L
from hl.onnx.export.io import _flatten_outputs

HAS_ORT = importlib.util.find_spec("onnxruntime") is not None
RTOL, ATOL = 1e-4, 1e-5
rng = np.random.default_rng(0)


def randn(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


class Fn(hl.Module):
    """A module whose forward is ``fn(self, *inputs)``, with the given sub-layers."""

    def __init__(self, fn, **layers):
        super().__init__()
        self.fn = fn
        for k, v in layers.items():
            setattr(self, k, v)

    def forward(self, *xs):
        return self.fn(self, *xs)


def reference(model, inputs):
    model.eval()
    with hl.no_grad():
        out = model(*[hl.tensor(a) for a in inputs])
    return [o.numpy() for o in _flatten_outputs(out, "forward")]


def compare(got, want, what):
    assert len(got) == len(want), what
    for i, (g, w) in enumerate(zip(got, want)):
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{what} output {i}: {g.dtype}, hl gives {w.dtype}"
        assert g.shape == w.shape, f"{what} output {i}: {g.shape}, hl gives {w.shape}"
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(g, w, err_msg=f"{what} output {i}")
        else:
            np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what} output {i}")


def check_export(model, inputs, others=(), reimport=True, **kwargs):
    """Exports, checks, and compares onnxruntime and hl's importer with the model itself on
    ``inputs`` and on each input list in ``others`` (other sizes of the dynamic axes)."""
    names = kwargs.pop("input_names", None) or ["x", "y", "z", "w"][:len(inputs)]
    proto = hl.onnx.to_onnx(model, inputs, input_names=names, **kwargs)
    onnx.checker.check_model(proto, full_check=True)
    session = None
    if HAS_ORT:
        import onnxruntime as ort
        session = ort.InferenceSession(proto.SerializeToString(),
                                       providers=["CPUExecutionProvider"])
    rep = hl.onnx.prepare(proto) if reimport else None
    for ins in [inputs] + list(others):
        want = reference(model, ins)
        if session is not None:
            compare(session.run(None, dict(zip(names, ins))), want, "onnxruntime")
        if rep is not None:
            compare(rep.run(list(ins)), want, "hl.onnx.prepare")
    return proto


def op_types(proto):
    return [n.op_type for n in proto.graph.node]


# ---- whole models --------------------------------------------------------------------------

def test_mlp_dynamic_batch():
    model = hl.Sequential(L.Linear(16), L.ReLU(), L.Linear(4))
    proto = check_export(model, [randn(3, 8)], others=[[randn(7, 8)]],
                         dynamic_axes={"x": {0: "batch"}})
    assert op_types(proto) == ["Gemm", "Relu", "Gemm"]
    dims = proto.graph.output[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch" and dims[1].dim_value == 4


_BEFORE = (F.gt, F.argmax, hl.Tensor.__gt__, hl.Tensor.argmax)


def test_comparisons_and_argmax_bound_before_the_trace_are_still_traced():
    # The tracer patches nothing, so a function taken from hl before the export (the
    # module-level `from hl.autograd.functional import argmax` a user's file has) is seen
    # like any other: its ops are in the graph, which onnxruntime runs to hl's answer.
    gt, argmax = F.gt, F.argmax

    class Pick(hl.Module):
        def __init__(self):
            super().__init__()
            self.fc = L.Linear(5)

        def forward(self, x):
            y = self.fc(x)
            return argmax(y, 1), F.cast(gt(y, 0.0), "float32"), y.argmax(axis=0)

    model = Pick()
    proto = check_export(model, [randn(4, 3)], others=[[randn(6, 3)]],
                         dynamic_axes={"x": {0: "N"}})
    types = op_types(proto)
    assert "ArgMax" in types and "Greater" in types
    nodes = {n.name: n.op_type for n in proto.graph.node}
    assert nodes["fc"] == "Gemm"


def test_mnist_cnn_names_and_two_batch_sizes():
    from hl.demo import CNN
    model = CNN()
    proto = check_export(model, [randn(2, 1, 28, 28)], others=[[randn(5, 1, 28, 28)]],
                         dynamic_axes={"x": {0: "N"}})
    nodes = {n.name: n.op_type for n in proto.graph.node}
    assert nodes["conv1"] == "Conv" and nodes["fc2"] == "Gemm" and nodes["pool1"] == "MaxPool"
    inits = {t.name for t in proto.graph.initializer}
    assert {"conv1.W", "conv1.b", "conv2.W", "fc1.W", "fc2.b"} <= inits
    assert proto.graph.input[0].name == "x" and proto.graph.output[0].name == "output"


def test_batchnorm_dropout_exported_for_inference_and_modes_restored():
    model = hl.Sequential(L.Conv2d(4, 3), L.BatchNorm2d(), L.ReLU(), L.Dropout(0.5),
                          L.Flatten(), L.Linear(3))
    model.train()
    for _ in range(3):  # running statistics away from their initial 0 and 1
        model(hl.tensor(randn(4, 3, 8, 8) * 3 + 1))
    before = {k: t.numpy().copy() for k, t in model.get_states().items()}
    hl.onnx.to_onnx(model, [randn(2, 3, 8, 8)])
    assert all(layer.training for _, layer in model.named_layers())  # train() kept
    for k, t in model.get_states().items():  # the traces did not update the statistics
        np.testing.assert_array_equal(t.numpy(), before[k])
    # the trace patched nothing: hl's names and Tensor's methods are the ones from before
    assert hl.gt is F.gt and F.gt is _BEFORE[0] and F.argmax is _BEFORE[1]
    assert hl.Tensor.__gt__ is _BEFORE[2] and hl.Tensor.argmax is _BEFORE[3]
    proto = check_export(model, [randn(2, 3, 8, 8)], others=[[randn(3, 3, 8, 8)]],
                         dynamic_axes={"x": [0]})
    model_types = op_types(proto)
    assert "BatchNormalization" in model_types and "Dropout" not in model_types  # eval()
    inits = {t.name for t in proto.graph.initializer}
    assert {"1.running_mean", "1.running_var", "1.scale", "1.bias"} <= inits


class SingaNet(hl.Module):
    def __init__(self, bn=True):
        super().__init__()
        self.fc = L.Linear(6)
        self.bn = L.BatchNorm1d() if bn else L.Identity()
        self.drop = L.Dropout(0.3)

    def forward(self, x):
        h = self.fc(x)
        return self.drop(self.bn(h)) + 1.0, F.softmax(h * 0.5, -1)


def check_singa(model, proto, xs):
    onnx.checker.check_model(proto, full_check=True)
    for a in xs:
        want = reference(model, [a])
        compare(hl.onnx.prepare(proto).run([a]), want, "hl.onnx.prepare")
        if HAS_ORT:
            import onnxruntime as ort
            s = ort.InferenceSession(proto.SerializeToString())
            compare(s.run(None, {"input_0": a}), want, "onnxruntime")


def test_singa_form_multiple_outputs():
    """SINGA's to_onnx([x], [y1, y2]) from a recorded forward (the parameters require
    gradients, so autograd records it; x itself need not)."""
    model = SingaNet()
    model.train()
    for _ in range(3):
        model(hl.tensor(randn(8, 5) * 2 + 1))  # running statistics away from 0 and 1
    model.eval()
    x = hl.tensor(randn(4, 5))
    y1, y2 = model(x)
    proto = hl.onnx.to_onnx([x], [y1, y2], dynamic_axes={"input_0": {0: "N"}})
    assert [o.name for o in proto.graph.output] == ["output_0", "output_1"]
    assert "BatchNormalization" in op_types(proto)
    assert {n.name for n in proto.graph.node} >= {"fc", "bn"}  # from the parameters' names
    assert {"bn.running_mean", "bn.running_var", "fc.W"} <= {
        t.name for t in proto.graph.initializer}
    check_singa(model, proto, [x.numpy(), randn(7, 5)])


def test_singa_form_training_mode():
    """Recorded while training (SINGA's usual way): dropout is exported as ONNX's Dropout and
    a batch norm as the inference BatchNormalization over its running statistics (what the
    layer computes once put in eval mode)."""
    model = SingaNet(bn=False)
    model.train()
    x = hl.tensor(randn(4, 5))
    proto = hl.onnx.to_onnx([x], list(model(x)))
    assert "Dropout" in op_types(proto)
    check_singa(model, proto, [x.numpy()])
    model = SingaNet()
    model.train()
    proto = hl.onnx.to_onnx([x], list(model(x)))
    assert "BatchNormalization" in op_types(proto)
    model.eval()  # the exported model is the inference form: compare with eval mode
    check_singa(model, proto, [x.numpy()])


@pytest.mark.parametrize("cls,kwargs", [(L.LSTM, {}), (L.GRU, {"num_layers": 2,
                                                                  "bidirectional": True}),
                                        (L.RNN, {"nonlinearity": "relu"})])
def test_recurrent_unrolled(cls, kwargs):
    """Recurrent layers are exported unrolled over the time steps (Gemm, Split, Sigmoid,
    Tanh...): a dynamic batch axis, a fixed sequence length."""
    model = Fn(lambda s, x: s.rnn(x), rnn=cls(5, **kwargs))
    proto = check_export(model, [randn(4, 2, 3)], others=[[randn(4, 6, 3)]],
                         dynamic_axes={"x": {1: "N"}})
    assert all(n.name.startswith("rnn") for n in proto.graph.node)
    assert len(proto.graph.output) == (3 if cls is L.LSTM else 2)  # y, h (, c)


def test_recurrent_time_axis_cannot_be_dynamic():
    model = Fn(lambda s, x: s.rnn(x)[0], rnn=L.LSTM(4))
    with pytest.raises(errors.UnsupportedError, match="different ops"):
        hl.onnx.to_onnx(model, [randn(3, 2, 3)], dynamic_axes={"x": {0: "T"}},
                        input_names=["x"])


def test_attention_with_padding_mask():
    model = Fn(lambda s, q, m: s.att(q, q, q, key_padding_mask=m)[0],
               att=L.MultiHeadAttention(8, 2, batch_first=True))
    mask = np.array([[False] * 4 + [True], [False] * 5])
    mask3 = np.array([[False] * 4 + [True], [False] * 5, [True] + [False] * 4])
    check_export(model, [randn(2, 5, 8), mask], others=[[randn(3, 5, 8), mask3]],
                 dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})


def test_embedding_integer_input():
    model = Fn(lambda s, ids: s.emb(ids).sum(1), emb=L.Embedding(10, 4))
    check_export(model, [np.array([[1, 2, 9], [0, 0, 3]])],
                 others=[[np.array([[1, 2, 9], [0, 0, 3], [4, 4, 4]])]],
                 dynamic_axes={"x": {0: "N"}})


# ---- one module per op family ----------------------------------------------------------------

X4 = randn(2, 3, 9, 9)
X4b = randn(3, 3, 9, 9)
V = randn(3, 5)
T3 = randn(2, 3, 4)
T3b = randn(5, 3, 4)
N4 = {"x": {0: "N"}}
N3 = {"x": {0: "N"}}
IDX = np.array([[0, 4], [1, 1], [3, 2]])

FAMILIES = {
    # element-wise and activations
    "unary": (lambda s, x: F.exp(x) + F.log1p(F.abs(x)) + F.rsqrt(F.abs(x) + 1) +
              F.trunc(x * 3) + F.expm1(x) + F.sign(x) + F.square(x), [V], None, None),
    "activations": (lambda s, x: F.selu(x) + F.elu(x, 0.5) + F.celu(x, 0.7) +
                    F.leaky_relu(x, 0.1) + F.gelu(x) + F.gelu(x, "tanh") + F.mish(x) +
                    F.hard_swish(x) + F.hard_sigmoid(x) + F.softplus(x) + F.softsign(x) +
                    F.sigmoid(x) + F.tanh(x), [X4], [X4b], N4),
    "binary": (lambda s, a, b: (a + b) * (a - 2.0) / (F.abs(b) + 1) + F.maximum(a, b) -
               F.minimum(a, 0.5) + F.pow(F.abs(a) + 1, b) + F.mod(a, 1.5) + F.fmod(b, 0.7),
               [V, randn(3, 5)], None, None),
    "integers": (lambda s, a, b: (a % b, F.mod(-a, b), F.abs(a) * 2,
                                  F.sum(a, 1), F.cumsum(a, 0)),
                 [np.array([[7, -3, 5]], np.int32), np.array([[2, 4, -3]], np.int32)], None,
                 None),
    "compare_where": (lambda s, a, b: (F.where(a > b, a, b * 2), a == b, F.logical_and(
        a >= 0, b <= 0), F.logical_xor(a < 0, b != 0), F.clip(a, -0.5, 0.5),
        F.cast(a * 4, "int32")), [np.round(V), np.round(V[::-1])], None, None),
    # reductions
    "reductions": (lambda s, x: (F.sum(x, 1), F.mean(x, (0, 2), True), F.max(x, -1),
                                 F.min(x), F.prod(x, 2), F.logsumexp(x, 1),
                                 F.var(x, 0, ddof=1), F.std(x, (1, 2)),
                                 F.vector_norm(x, 3, 1), F.vector_norm(x, float("inf"), 2),
                                 F.cumsum(x, 1, exclusive=True, reverse=True)),
                   [T3], [T3b], N3),
    "argmax_any": (lambda s, x: (F.argmax(x, 1), F.argmin(x), F.any(x > 1, 2),
                                 F.all(x > -2, (0, 1), True), F.count_nonzero(x > 0, 1)),
                   [T3], [T3b], N3),
    # shapes and indexing
    "reshape": (lambda s, x: (F.reshape(x, x.shape[0], -1), F.flatten(x, 1, 2),
                              F.reshape(x, x.shape[0] * 3, 81), F.squeeze(x[:, :1], 1),
                              F.unsqueeze(x, -1)), [X4], [X4b], N4),
    "permute_expand": (lambda s, x: (x.permute(0, 2, 3, 1), F.transpose(x, 1, 3),
                                     F.expand(x[:, :1], x.shape[0], 3, 9, 9),
                                     F.tile(x, (1, 2, 1, 1)), F.flip(x, (1, 3))),
                       [X4], [X4b], N4),
    "slicing": (lambda s, x: (x[:, 1:, ::2, -1], x[..., None, 2:-1, ::-1], x[:, [0, 2, 2]],
                              x[0, :, [1, 3]]), [X4], None, None),
    "split_concat": (lambda s, x: (F.split(x, 3, axis=1), F.split(x, [2, 7], axis=2),
                                   F.chunk(x, 2, axis=3), F.concat([x, x * 2], 1),
                                   F.stack([x, x], 1)), [X4], [X4b], N4),
    "pad": (lambda s, x: (F.pad(x, [(0, 0), (0, 0), (1, 2), (3, 0)]),
                          F.pad(x, [(0, 0), (0, 0), (1, 2), (3, 0)], mode="reflect"),
                          F.pad(x, [(0, 0), (0, 0), (-1, 2), (2, -2)], mode="edge"),
                          F.tril(x, 1), F.triu(x, -1)), [X4], [X4b], N4),
    "gather_scatter_topk": (lambda s, x, i: (
        F.gather(x, i, 1), F.gather_elements(x, i, 1), F.take(x, hl.tensor(np.array([0, 7]))),
        F.scatter_elements(x, i, F.ones_like(F.cast(i, "float32")), 1),
        F.scatter_elements(x, i, 2.0, 1, "add"), F.topk(x, 2, axis=1),
        F.gather(x, F.topk(x, 2, axis=1)[1], 1)), [V, IDX], None, None),
    # neural-network ops
    "conv": (lambda s, x: (s.c1(x), s.c2(x), s.c3(x), s.ct(x)), [X4], [X4b], N4),
    "conv1d_pool1d": (lambda s, x: (s.c(x), F.max_pool1d(x, 2), F.avg_pool1d(x, 3, 2)),
                      [randn(2, 3, 11)], [randn(4, 3, 11)], N3),
    "pools": (lambda s, x: (F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, 2, ceil_mode=True),
                            F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
                            F.avg_pool2d(x, 3, 2, 1, count_include_pad=False),
                            F.global_avg_pool2d(x), F.global_max_pool2d(x)),
              [X4], [randn(1, 3, 12, 7)], {"x": {0: "N", 2: "H", 3: "W"}}),
    "norms": (lambda s, x: (s.ln(x), F.group_norm(x, 3, s.w, s.b), F.instance_norm(x),
                            F.layer_norm(x, None, None, None, axis=2)),
              [randn(2, 6, 5, 5)], [randn(4, 6, 5, 5)], N4),
    "softmax_losses": (lambda s, x, t: (F.softmax(x, 1), F.log_softmax(x, 0),
                                        F.softmax_cross_entropy(x, t),
                                        F.softmax_cross_entropy(x, t, reduction="none"),
                                        F.softmax_cross_entropy(x, F.softmax(x * 2, 1)),
                                        F.nll_loss(F.log_softmax(x, 1), t, reduction="sum")),
                       [randn(4, 5), np.array([0, 4, 2, 1])], None, None),
    "resize": (lambda s, x: (F.resize(x, scales=[1, 1, 2, 1.5]),
                             F.resize(x, size=[x.shape[0], 3, 5, 12], mode="linear"),
                             F.interpolate(x, scale_factor=2, mode="bilinear",
                                           align_corners=True),
                             F.interpolate(x, size=(4, 13))), [X4], [X4b], N4),
    "linear_algebra": (lambda s, a, b: (s.lin(a), a @ b, F.matmul(a, b[:, 0]),
                                        F.gemm(b, b, None, trans_a=True, alpha=0.5),
                                        F.dot(a, b), F.outer(a[0, 0], b[0])),
                       [randn(2, 3, 4), randn(4, 3)], None, None),
}

LAYERS = {
    "conv": lambda: dict(c1=L.Conv2d(4, 3, stride=2, padding=1),
                         c2=L.Conv2d(6, 3, groups=3, dilation=2, padding="same"),
                         c3=L.Conv2d(2, 1, bias=False),
                         ct=L.ConvTranspose2d(4, 3, stride=2, padding=1, output_padding=1)),
    "conv1d_pool1d": lambda: dict(c=L.Conv1d(4, 3, stride=2, padding=1)),
    "norms": lambda: dict(ln=L.LayerNorm(), w=hl.tensor(randn(6)), b=hl.tensor(randn(6))),
    "linear_algebra": lambda: dict(lin=L.Linear(5)),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_op_family(family):
    fn, inputs, other, dynamic = FAMILIES[family]
    model = Fn(fn, **LAYERS.get(family, dict)())
    check_export(model, inputs, others=[other] if other else [], dynamic_axes=dynamic)


# ---- opsets ------------------------------------------------------------------------------

OPSET_MODEL = (lambda s, x: (F.sum(x, 1), F.max(x, (1, 2), True), F.squeeze(x[:, :1], 1),
                             F.unsqueeze(x, 0), F.split(x, [1, 2], 1),
                             F.pad(x, [(0, 0), (1, 1), (0, 2)]), F.clip(x, -1.0, None),
                             s.ln(x), F.gelu(x), F.mish(x), F.hard_swish(x), F.triu(x),
                             F.resize(x, size=[x.shape[0], 6, 8]), F.var(x, 2)))


@pytest.mark.parametrize("opset", [13, 14, 17, 18, 20, onnx.defs.onnx_opset_version()])
def test_opsets(opset):
    model = Fn(OPSET_MODEL, ln=L.LayerNorm())
    proto = check_export(model, [T3], others=[[T3b]], dynamic_axes={"x": {0: "N"}},
                         opset=opset, reimport=opset <= 18)
    assert proto.opset_import[0].version == opset
    types = op_types(proto)
    assert ("LayerNormalization" in types) == (opset >= 17)
    assert ("Gelu" in types) == (opset >= 20) and ("Mish" in types) == (opset >= 18)
    assert ("Trilu" in types) == (opset >= 14)
    axes_attr = [n for n in proto.graph.node if n.op_type == "ReduceMax"][0].attribute
    assert any(a.name == "axes" for a in axes_attr) == (opset < 18)


def test_newest_opsets_reimport():
    """Opsets past 18 re-import too (their operators are the importer's newest handlers)."""
    model = Fn(OPSET_MODEL, ln=L.LayerNorm())
    for opset in (20, onnx.defs.onnx_opset_version()):
        proto = hl.onnx.to_onnx(model, [T3], opset=opset)
        compare(hl.onnx.prepare(proto).run([T3]), reference(model, [T3]), f"opset {opset}")


# ---- imported models written back -----------------------------------------------------------

def test_onnx_model_written_back_with_new_weights_and_cut():
    from hl.demo import CNN
    x = randn(2, 1, 28, 28)
    proto = hl.onnx.to_onnx(CNN(), [x], dynamic_axes={"x": {0: "N"}})
    imported = hl.onnx.ONNXModel(proto)
    with hl.no_grad():
        for t in imported.parameters():
            t.copy_(t * 0.5 + 0.01)
    imported.eval()
    back = hl.onnx.to_onnx(imported)
    onnx.checker.check_model(back, full_check=True)
    want = imported(hl.tensor(x))[0].numpy()
    compare(hl.onnx.prepare(back).run([x]), [want], "written back")
    cut = hl.onnx.to_onnx(imported, last_layers=-3)  # up to fc1's ReLU, as SINGA counts
    onnx.checker.check_model(cut, full_check=True)
    want = imported(hl.tensor(x), last_layers=-3)[0].numpy()
    assert want.shape == (2, 500)
    compare(hl.onnx.prepare(cut).run([x]), [want], "cut")
    if HAS_ORT:
        import onnxruntime as ort
        s = ort.InferenceSession(cut.SerializeToString())
        compare(s.run(None, {"x": x}), [want], "cut, onnxruntime")


def test_onnx_model_subclass_with_new_head():
    """A transfer-learning subclass (imported body, new hl head) is traced like any Module;
    the imported part keeps its ONNX node and weight names."""
    from hl.demo import CNN
    body = hl.onnx.to_onnx(CNN(), [randn(2, 1, 28, 28)], dynamic_axes={"x": {0: "N"}})

    class Tuned(hl.onnx.ONNXModel):
        def __init__(self, proto):
            super().__init__(proto)
            self.head = L.Linear(3)

        def forward(self, x):
            return self.head(super().forward(x, last_layers=-3)[0])

    proto = check_export(Tuned(body), [randn(2, 1, 28, 28)], others=[[randn(4, 1, 28, 28)]],
                         dynamic_axes={"x": {0: "N"}})
    assert {"conv1", "fc1", "head"} <= {n.name for n in proto.graph.node}
    assert {"conv1.W", "fc1.W", "head.W"} <= {t.name for t in proto.graph.initializer}


def test_gradients_of_reimported_export_match_the_original():
    """Exported and re-imported as a trainable ONNXModel, the model gives the same loss
    gradients for every parameter as the hl model it came from."""
    model = hl.Sequential(L.Conv2d(3, 3), L.BatchNorm2d(), L.ReLU(), L.MaxPool2d(2),
                          L.Flatten(), L.Linear(4), L.Tanh(), L.Linear(2))
    x, labels = randn(4, 2, 8, 8), np.array([0, 1, 1, 0])
    model.eval()
    proto = hl.onnx.to_onnx(model, [x])
    imported = hl.onnx.ONNXModel(proto)
    imported.eval()
    out = model(hl.tensor(x))
    F.softmax_cross_entropy(out, labels).backward()
    out2 = imported(hl.tensor(x))[0]
    F.softmax_cross_entropy(out2, labels).backward()
    np.testing.assert_allclose(out2.numpy(), out.numpy(), rtol=RTOL, atol=ATOL)
    mine = {k: t for k, t in model.get_params().items()}
    for local, onnx_name in imported.onnx_names.items():
        if onnx_name in mine:
            np.testing.assert_allclose(getattr(imported, local).grad.numpy(),
                                       mine[onnx_name].grad.numpy(), rtol=1e-4, atol=1e-6,
                                       err_msg=onnx_name)


# ---- every Function has an export ----------------------------------------------------------

# Abstract bases: never called themselves, only their subclasses (which have rules).
ABSTRACT = {"Binary", "Reduction", "Pool"}


def test_every_function_class_has_an_export_rule():
    from hl.autograd.function import Function  # hl imports every op family
    from hl.onnx.registry import rule_for
    seen, stack = set(), [Function]
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen and sub.__module__.startswith("hl.autograd"):
                seen.add(sub)
                stack.append(sub)
    missing = sorted(c.__name__ for c in seen
                     if c.__name__ not in ABSTRACT and rule_for(c) is None)
    assert not missing, f"Function classes without an ONNX export rule: {missing}"


# ---- writing files -------------------------------------------------------------------------

def test_path_and_save_write_atomically(tmp_path):
    model = hl.Sequential(L.Linear(3))
    path = tmp_path / "m.onnx"
    path.write_bytes(b"old")
    proto = hl.onnx.to_onnx(model, [randn(2, 4)], path=str(path))
    assert onnx.load(str(path)) == proto
    from hl.onnx.export import save
    save(proto, path)
    assert sorted(os.listdir(tmp_path)) == ["m.onnx"]  # no temporary file left behind
    with pytest.raises(errors.ValueError, match="ModelProto"):
        save(b"bytes", path)


def test_placeholder_inputs_and_names():
    model = hl.Sequential(L.Linear(3), L.Softmax())
    proto = hl.onnx.to_onnx(model, [hl.Placeholder((2, 4), name="features")],
                            output_names=["probs"], dynamic_axes={"features": {0: "b"},
                                                                  "probs": {0: "b"}})
    assert proto.graph.input[0].name == "features" and proto.graph.output[0].name == "probs"
    assert proto.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "b"
    compiled = hl.Sequential(L.Linear(3))
    compiled.compile([hl.Placeholder((2, 4))], is_train=False)
    proto = hl.onnx.to_onnx(compiled)  # the shapes compile was given
    assert [d.dim_value for d in proto.graph.input[0].type.tensor_type.shape.dim] == [2, 4]
    back = hl.onnx.to_onnx(hl.onnx.prepare(proto))  # an imported model, written back
    assert op_types(back) == ["Gemm"]


# ---- bad input -----------------------------------------------------------------------------

def test_bad_arguments():
    model = hl.Sequential(L.Linear(3))
    x = randn(2, 4)
    with pytest.raises(errors.ValueError, match="opset"):
        hl.onnx.to_onnx(model, [x], opset=12)
    with pytest.raises(errors.ValueError, match="opset"):
        hl.onnx.to_onnx(model, [x], opset=onnx.defs.onnx_opset_version() + 1)
    with pytest.raises(errors.ValueError, match="neither an input nor an output"):
        hl.onnx.to_onnx(model, [x], dynamic_axes={"nope": {0: "N"}})
    with pytest.raises(errors.IndexError, match="out of range"):
        hl.onnx.to_onnx(model, [x], dynamic_axes={"input_0": {2: "N"}}, input_names=[
            "input_0"])
    with pytest.raises(errors.ValueError, match="dynamic_axes"):
        hl.onnx.to_onnx(model, [x], dynamic_axes={"input_0": "N"}, input_names=["input_0"])
    with pytest.raises(errors.ValueError, match="Module"):
        hl.onnx.to_onnx("model.onnx", [x])
    with pytest.raises(errors.ValueError, match="example inputs"):
        hl.onnx.to_onnx(hl.Sequential(L.Linear(3)))
    with pytest.raises(errors.ValueError, match="input_names"):
        hl.onnx.to_onnx(model, [x], input_names=["a", "b"])
    with pytest.raises(errors.ShapeError, match="Linear"):
        hl.onnx.to_onnx(model, [randn(2, 5)])  # the built layer expects 4 features


def test_what_cannot_be_exported_is_an_error_not_a_wrong_model():
    x = randn(2, 4)
    # a value read on the host becomes a constant that differs between two traces
    read = Fn(lambda s, a: a * hl.tensor(a.numpy().mean()))
    with pytest.raises(errors.UnsupportedError, match="constant"):
        hl.onnx.to_onnx(read, [x])
    # a branch on the values runs different ops when the second trace goes the other way
    # (its inputs are the example's rotated by one place, perturbed)
    branch = Fn(lambda s, a: F.relu(a) if a.numpy()[0, 0] > a.numpy()[0, 1] else F.tanh(a))
    with pytest.raises(errors.UnsupportedError, match="different ops"):
        hl.onnx.to_onnx(branch, [np.arange(8, dtype=np.float32).reshape(2, 4)])
    # a size fixed by the model cannot be dynamic
    fixed = Fn(lambda s, a: s.ln(a), ln=L.LayerNorm(4))
    with pytest.raises(errors.UnsupportedError, match="dynamic axes at other sizes"):
        hl.onnx.to_onnx(fixed, [x], dynamic_axes={"x": {1: "F"}}, input_names=["x"])
    # forward must return tensors
    with pytest.raises(errors.UnsupportedError, match="float"):
        hl.onnx.to_onnx(Fn(lambda s, a: 1.5), [x])
    # an op hl has no export for (nonzero's result is a constant that changes with x)
    nz = Fn(lambda s, a: F.gather(F.reshape(a, -1), F.reshape(F.nonzero(
        F.reshape(a, -1) > 0), -1), 0))
    signs = np.float32([[1, -2, 3, -4], [-5, 6, 7, -8]])  # rotated by one, the signs move
    with pytest.raises(errors.UnsupportedError, match="constant"):
        hl.onnx.to_onnx(nz, [signs])
    # a forward that raises leaves no tracer and no wrapped comparison behind
    with pytest.raises(errors.ShapeError):
        hl.onnx.to_onnx(Fn(lambda s, a: F.reshape(a > 0, 3, 3)), [x])
    from hl.autograd.mode import trace_state
    assert trace_state.tracer is None and F.gt is _BEFORE[0]


def test_singa_form_errors():
    fc = L.Linear(3)
    x = hl.tensor(randn(2, 4))
    plain = hl.tensor(randn(2, 4))
    with pytest.raises(errors.ValueError, match="not recorded"):
        hl.onnx.to_onnx([plain], [F.relu(plain)])  # nothing required a gradient
    with pytest.raises(errors.ValueError, match="read by no recorded op"):
        y = fc(F.reshape(x, 2, 4) * 2.0)  # plain ops on x first: they would be constants
        hl.onnx.to_onnx([x], [y])
    y = fc(x)
    y.backward(hl.ones_like(y))
    with pytest.raises(errors.ValueError, match="freed by backward"):
        hl.onnx.to_onnx([x], [y])
    with pytest.raises(errors.ValueError, match="not an hl tensor"):
        hl.onnx.to_onnx([x], [np.zeros(3)])


def test_singa_form_fixed_sizes_cannot_be_made_dynamic():
    fc = L.Linear(3)
    x = hl.tensor(randn(2, 3, 4), requires_grad=True)
    y = fc(F.reshape(x, 2, 12))  # the recorded reshape holds the batch size
    with pytest.raises(errors.UnsupportedError, match="Module instead"):
        hl.onnx.to_onnx([x], [y], dynamic_axes={"input_0": {0: "N"}})
    proto = hl.onnx.to_onnx([x], [y])  # fixed sizes are fine
    compare(hl.onnx.prepare(proto).run([x.numpy()]), [y.numpy()], "singa fixed")


def test_onnx_model_export_errors():
    proto = hl.onnx.to_onnx(hl.Sequential(L.Linear(3), L.ReLU()), [randn(2, 4)])
    imported = hl.onnx.ONNXModel(proto)
    with pytest.raises(errors.IndexError, match="last_layers"):
        hl.onnx.to_onnx(imported, last_layers=7)
    with pytest.raises(errors.ValueError, match="no input or output"):
        hl.onnx.to_onnx(imported, dynamic_axes={"nope": [0]})
    with pytest.raises(errors.ValueError, match="last_layers"):
        hl.onnx.to_onnx(hl.Sequential(L.Linear(3)), [randn(2, 4)], last_layers=-2)
