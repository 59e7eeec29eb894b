"""LSTM, GRU and RNN beyond ONNX's conformance cases: gradients against PyTorch's LSTM and
GRU given the same weights, sequence lengths, the attributes the cases leave out
(activations, clip, input_forget, layout) against onnxruntime, and bad input."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx
from hl import errors

from ._models import ort_run

RTOL, ATOL = 1e-4, 1e-5  # float32, same maths in another order

# PyTorch stacks the LSTM gates as (input, forget, cell, output), ONNX as (input, output,
# forget, cell); GRU: PyTorch (reset, update, new), ONNX (update, reset, hidden).
LSTM_FROM_TORCH = [0, 3, 1, 2]
GRU_FROM_TORCH = [1, 0, 2]


def _reorder(a, order, axis=0):
    """Torch's gate blocks along ``axis`` (numpy or torch array) in ONNX's order."""
    blocks = np.split(np.asarray(a), len(order), axis=axis)
    return np.concatenate([blocks[i] for i in order], axis=axis)


def _rnn_model(op, inputs, outputs, inits, opset=17, **attrs):
    """A one-node model: ``inputs`` and ``outputs`` are {name: (shape, elem type)} in the
    node's order (None for an omitted input), ``inits`` {name: array}."""
    names = list(inputs)
    node = helper.make_node(op, [n if inputs[n] is not None else "" for n in names],
                            list(outputs), **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, t, s) for n, v in inputs.items()
         if v is not None and n not in inits for s, t in [v]],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s or ["s", "d", "b", "h"])
         for n, s in outputs.items()],
        [numpy_helper.from_array(a, n) for n, a in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _torch_twin(torch, kind, size, hidden, bidirectional, batch_first, seed):
    torch.manual_seed(seed)
    cls = torch.nn.LSTM if kind == "LSTM" else torch.nn.GRU
    return cls(size, hidden, bidirectional=bidirectional, batch_first=batch_first)


def _onnx_weights(twin, kind, bidirectional):
    """(W, R, B) in ONNX's layout from a PyTorch LSTM/GRU."""
    order = LSTM_FROM_TORCH if kind == "LSTM" else GRU_FROM_TORCH
    sfx = ["_l0"] + (["_l0_reverse"] if bidirectional else [])
    p = {k: v.detach().numpy() for k, v in twin.named_parameters()}
    w = np.stack([_reorder(p["weight_ih" + s], order) for s in sfx])
    r = np.stack([_reorder(p["weight_hh" + s], order) for s in sfx])
    b = np.stack([np.concatenate([_reorder(p["bias_ih" + s], order),
                                  _reorder(p["bias_hh" + s], order)]) for s in sfx])
    return w, r, b


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("bidirectional,layout", [(False, 0), (True, 0), (True, 1)])
def test_outputs_and_gradients_match_pytorch(kind, bidirectional, layout):
    torch = pytest.importorskip("torch")
    seq, batch, size, hidden = 5, 3, 4, 6
    dirs = 2 if bidirectional else 1
    twin = _torch_twin(torch, kind, size, hidden, bidirectional, layout == 1, seed=0)
    w, r, b = _onnx_weights(twin, kind, bidirectional)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(batch, seq, size) if layout else (seq, batch, size))
    x = x.astype(np.float32)
    h0 = rng.normal(size=(dirs, batch, hidden)).astype(np.float32)
    c0 = rng.normal(size=(dirs, batch, hidden)).astype(np.float32)
    lay = (lambda a: a.transpose(1, 0, 2)) if layout else (lambda a: a)  # states' layout

    state_in = {"initial_h": (list(lay(h0).shape), TensorProto.FLOAT)}
    outs = {"Y": [batch, seq, dirs, hidden] if layout else [seq, dirs, batch, hidden],
            "Y_h": list(lay(h0).shape)}
    if kind == "LSTM":
        state_in["initial_c"] = (list(lay(c0).shape), TensorProto.FLOAT)
        outs["Y_c"] = list(lay(c0).shape)
    inputs = {"X": (list(x.shape), TensorProto.FLOAT), "W": 0, "R": 0, "B": 0,
              "sequence_lens": None, **state_in}
    attrs = dict(hidden_size=hidden, layout=layout,
                 direction="bidirectional" if bidirectional else "forward")
    if kind == "GRU":
        attrs["linear_before_reset"] = 1  # PyTorch's GRU
    model = _rnn_model(kind, inputs, outs, {"W": w, "R": r, "B": b}, opset=14, **attrs)
    m = hl.onnx.ONNXModel(model)

    feeds = [hl.tensor(x), hl.tensor(lay(h0))] + ([hl.tensor(lay(c0))] if kind == "LSTM" else [])
    for t in feeds:
        t.requires_grad = True
    ys = m.forward(*feeds)
    weights = [rng.normal(size=y.shape).astype(np.float32) for y in ys]
    loss = sum((y * hl.tensor(wt)).sum() for y, wt in zip(ys, weights))
    loss.backward()

    tx = torch.tensor(x, requires_grad=True)
    th0 = torch.tensor(h0, requires_grad=True)
    tc0 = torch.tensor(c0, requires_grad=True)
    if kind == "LSTM":
        ty, (thn, tcn) = twin(tx, (th0, tc0))
        t_states = [thn, tcn]
    else:
        ty, thn = twin(tx, th0)
        t_states = [thn]
    # torch's y is [seq, batch, dirs * hidden] (or batch first); ONNX's has a dirs axis.
    if layout:
        ty = ty.reshape(batch, seq, dirs, hidden)
    else:
        ty = ty.reshape(seq, batch, dirs, hidden).transpose(1, 2)
    t_outs = [ty] + [s.transpose(0, 1) if layout else s for s in t_states]
    tloss = sum((t * torch.from_numpy(wt)).sum() for t, wt in zip(t_outs, weights))
    tloss.backward()

    for y, t in zip(ys, t_outs):
        np.testing.assert_allclose(y.numpy(), t.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(feeds[0].grad.numpy(), tx.grad.numpy(), rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(feeds[1].grad.numpy(), lay(th0.grad.numpy()), rtol=1e-3,
                               atol=1e-5)
    if kind == "LSTM":
        np.testing.assert_allclose(feeds[2].grad.numpy(), lay(tc0.grad.numpy()), rtol=1e-3,
                                   atol=1e-5)
    want_w, want_r, want_b = _grads_in_onnx_layout(twin, kind, bidirectional)
    got = {m.onnx_names[k]: getattr(m, k).grad.numpy() for k in m.onnx_names}
    np.testing.assert_allclose(got["W"], want_w, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(got["R"], want_r, rtol=1e-3, atol=1e-5)
    np.testing.assert_allclose(got["B"], want_b, rtol=1e-3, atol=1e-5)


def _grads_in_onnx_layout(twin, kind, bidirectional):
    order = LSTM_FROM_TORCH if kind == "LSTM" else GRU_FROM_TORCH
    sfx = ["_l0"] + (["_l0_reverse"] if bidirectional else [])
    g = {k: v.grad.numpy() for k, v in twin.named_parameters()}
    w = np.stack([_reorder(g["weight_ih" + s], order) for s in sfx])
    r = np.stack([_reorder(g["weight_hh" + s], order) for s in sfx])
    b = np.stack([np.concatenate([_reorder(g["bias_ih" + s], order),
                                  _reorder(g["bias_hh" + s], order)]) for s in sfx])
    return w, r, b


def test_sequence_lens_match_pytorch_run_per_entry():
    """Each batch entry stops at its own length: its outputs after it are zero, Y_h holds
    its last step, and the reverse direction starts from its own last step."""
    torch = pytest.importorskip("torch")
    seq, batch, size, hidden = 6, 3, 3, 4
    twin = _torch_twin(torch, "LSTM", size, hidden, True, False, seed=2)
    w, r, b = _onnx_weights(twin, "LSTM", True)
    x = np.random.default_rng(3).normal(size=(seq, batch, size)).astype(np.float32)
    lens = np.array([6, 2, 4], dtype=np.int32)
    model = _rnn_model("LSTM", {"X": ([seq, batch, size], TensorProto.FLOAT), "W": 0,
                                "R": 0, "B": 0,
                                "sequence_lens": ([batch], TensorProto.INT32)},
                       {"Y": [seq, 2, batch, hidden], "Y_h": [2, batch, hidden],
                        "Y_c": [2, batch, hidden]},
                       {"W": w, "R": r, "B": b}, hidden_size=hidden,
                       direction="bidirectional")
    y, yh, yc = hl.onnx.prepare(model).run([x, lens])
    for i, n in enumerate(lens):
        with torch.no_grad():
            ty, (th, tc) = twin(torch.from_numpy(x[:n, i:i + 1]))
        np.testing.assert_allclose(y[:n, :, i], ty.numpy().reshape(n, 2, hidden),
                                   rtol=RTOL, atol=ATOL)
        assert not y[n:, :, i].any()
        np.testing.assert_allclose(yh[:, i], th.numpy()[:, 0], rtol=RTOL, atol=ATOL)
        np.testing.assert_allclose(yc[:, i], tc.numpy()[:, 0], rtol=RTOL, atol=ATOL)


def _random_weights(rng, dirs, gates, hidden, size, bias=True):
    w = rng.normal(0, 0.5, (dirs, gates * hidden, size)).astype(np.float32)
    r = rng.normal(0, 0.5, (dirs, gates * hidden, hidden)).astype(np.float32)
    b = rng.normal(0, 0.2, (dirs, 2 * gates * hidden)).astype(np.float32)
    return (w, r, b) if bias else (w, r)


CASES = [  # (op, gates, attributes): what the conformance cases leave out
    ("LSTM", 4, dict(clip=0.8, direction="bidirectional")),
    ("LSTM", 4, dict(input_forget=1, direction="reverse")),
    ("LSTM", 4, dict(activations=["HardSigmoid", "LeakyRelu", "ScaledTanh"],
                     activation_alpha=[0.3, 0.05, 1.5], activation_beta=[0.4, 0.7])),
    ("GRU", 3, dict(linear_before_reset=0, direction="bidirectional", clip=1.5)),
    ("GRU", 3, dict(activations=["Sigmoid", "Softsign", "Affine", "Elu"],
                    activation_alpha=[0.5, 0.7], activation_beta=[0.1],
                    direction="bidirectional")),
    ("RNN", 1, dict(activations=["Relu"], direction="reverse")),
    ("RNN", 1, dict(activations=["ThresholdedRelu", "Softplus"], activation_alpha=[0.2],
                    direction="bidirectional")),  # onnxruntime has no layout 1
]


@pytest.mark.parametrize("op,gates,attrs", CASES, ids=[f"{c[0]}-{i}" for i, c in
                                                      enumerate(CASES)])
def test_attributes_match_onnxruntime(op, gates, attrs):
    pytest.importorskip("onnxruntime")
    rng = np.random.default_rng(4)
    seq, batch, size, hidden = 4, 3, 3, 5
    dirs = 2 if attrs.get("direction") == "bidirectional" else 1
    layout = attrs.get("layout", 0)
    w, r, b = _random_weights(rng, dirs, gates, hidden, size)
    x = rng.normal(size=(batch, seq, size) if layout else (seq, batch, size))
    x = x.astype(np.float32)
    lens = np.array([4, 1, 3], dtype=np.int32)
    h0 = rng.normal(size=(batch, dirs, hidden) if layout else (dirs, batch, hidden))
    h0 = h0.astype(np.float32)
    inputs = {"X": (list(x.shape), TensorProto.FLOAT), "W": 0, "R": 0, "B": 0,
              "sequence_lens": ([batch], TensorProto.INT32),
              "initial_h": (list(h0.shape), TensorProto.FLOAT)}
    yshape = [batch, seq, dirs, hidden] if layout else [seq, dirs, batch, hidden]
    outs = {"Y": yshape, "Y_h": list(h0.shape)}
    model = _rnn_model(op, inputs, outs, {"W": w, "R": r, "B": b}, opset=14,
                       hidden_size=hidden, **attrs)
    onnx.checker.check_model(model)
    want = ort_run(model, {"X": x, "sequence_lens": lens, "initial_h": h0})
    got = hl.onnx.prepare(model).run([x, lens, h0])
    for g, wt in zip(got, want):
        np.testing.assert_allclose(g, wt, rtol=RTOL, atol=ATOL)


def test_opset7_model_without_layout_matches_opset14():
    rng = np.random.default_rng(5)
    w, r, b = _random_weights(rng, 1, 3, 4, 2)
    x = rng.normal(size=(3, 2, 2)).astype(np.float32)
    runs = []
    for opset in (7, 14, 22):
        model = _rnn_model("GRU", {"X": ([3, 2, 2], TensorProto.FLOAT), "W": 0, "R": 0,
                                   "B": 0}, {"Y": [3, 1, 2, 4]}, {"W": w, "R": r, "B": b},
                           opset=opset, hidden_size=4)
        runs.append(hl.onnx.prepare(model).run([x])[0])
    np.testing.assert_array_equal(runs[0], runs[1])
    np.testing.assert_array_equal(runs[0], runs[2])


# ---- bad input ------------------------------------------------------------------------------

def _lstm(x_shape, w, r, hidden, **attrs):
    return _rnn_model("LSTM", {"X": (list(x_shape), TensorProto.FLOAT), "W": 0, "R": 0},
                      {"Y": None}, {"W": w, "R": r}, hidden_size=hidden, **attrs)


def test_weights_of_the_wrong_shape():
    rng = np.random.default_rng(0)
    w, r = _random_weights(rng, 1, 4, 3, 5, bias=False)  # W expects input size 5
    model = _lstm([2, 1, 4], w, r, 3)
    with pytest.raises(errors.ShapeError, match=r"LSTM.*W must have shape \(1, 12, 4\)"):
        hl.onnx.prepare(model).run([np.zeros((2, 1, 4), np.float32)])


def test_bidirectional_needs_two_directions_of_weights():
    rng = np.random.default_rng(0)
    w, r = _random_weights(rng, 1, 4, 3, 2, bias=False)
    model = _lstm([2, 1, 2], w, r, 3, direction="bidirectional")
    with pytest.raises(errors.ShapeError, match=r"2 direction"):
        hl.onnx.prepare(model).run([np.zeros((2, 1, 2), np.float32)])


def test_unknown_activation():
    rng = np.random.default_rng(0)
    w, r = _random_weights(rng, 1, 4, 3, 2, bias=False)
    model = _lstm([2, 1, 2], w, r, 3, activations=["Sigmoid", "Tanh", "Gelu"])
    with pytest.raises(errors.UnsupportedError, match="activation 'Gelu'"):
        hl.onnx.prepare(model, check=False).run([np.zeros((2, 1, 2), np.float32)])


def test_sequence_lens_out_of_range():
    rng = np.random.default_rng(0)
    w, r = _random_weights(rng, 1, 1, 3, 2, bias=False)
    model = _rnn_model("RNN", {"X": ([2, 2, 2], TensorProto.FLOAT), "W": 0, "R": 0, "B": None,
                               "sequence_lens": ([2], TensorProto.INT32)},
                       {"Y": None}, {"W": w, "R": r}, hidden_size=3)
    with pytest.raises(errors.ValueError, match=r"sequence_lens \[1, 5\] must lie in \[0, 2\]"):
        hl.onnx.prepare(model).run([np.zeros((2, 2, 2), np.float32),
                                    np.array([1, 5], np.int32)])
