"""Control flow (If, Loop, Scan), Attention and the newest transformer ops, random
generators, DFT/STFT: what the conformance cases leave out. Gradients through subgraphs and
through Attention/RMSNormalization/RotaryEmbedding/SwiGLU against PyTorch, moments of the
random ops, and bad input."""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx
from hl import errors

RTOL, ATOL = 1e-4, 1e-5
F32 = TensorProto.FLOAT


def _vi(name, shape, t=F32):
    """A value's type; ``shape`` a list, or a rank (its dimensions unnamed)."""
    if isinstance(shape, int):
        shape = [f"{name}{i}" for i in range(shape)]
    return helper.make_tensor_value_info(name, t, shape)


def _model(nodes, inputs, outputs, inits=None, opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs,
                              [numpy_helper.from_array(a, n) for n, a in (inits or {}).items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _scalar(name, value, dtype):
    return helper.make_node("Constant", [], [name],
                            value=numpy_helper.from_array(np.array(value, dtype=dtype)))


# ---- If -------------------------------------------------------------------------------------

def _if_model():
    """y = x * w if c else x + 1, both branches reading x and w from the outer graph."""
    then = helper.make_graph([helper.make_node("Mul", ["x", "w"], ["t"])], "then", [],
                             [_vi("t", [3])])
    other = helper.make_graph([_scalar("one", 1.0, np.float32),
                               helper.make_node("Add", ["x", "one"], ["e"])], "else", [],
                              [_vi("e", [3])])
    node = helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)
    w = np.array([2.0, -1.0, 0.5], np.float32)
    return _model([node], [_vi("c", [], TensorProto.BOOL), _vi("x", [3])], [_vi("y", [3])],
                  {"w": w}), w


def test_if_takes_the_branch_and_its_gradient():
    model, w = _if_model()
    x = np.array([1.0, 2.0, 3.0], np.float32)
    rep = hl.onnx.prepare(model)
    np.testing.assert_allclose(rep.run([np.array(True), x])[0], x * w)
    np.testing.assert_allclose(rep.run([np.array(False), x])[0], x + 1)
    m = hl.onnx.ONNXModel(model)
    xt = hl.tensor(x)
    xt.requires_grad = True
    (y,) = m.forward(hl.tensor(np.array(True)), xt)
    (y * hl.tensor(np.array([1.0, 2.0, 3.0], np.float32))).sum().backward()
    np.testing.assert_allclose(m.w.grad.numpy(), x * [1, 2, 3])
    np.testing.assert_allclose(xt.grad.numpy(), w * [1, 2, 3])


def test_if_needs_a_single_bool():
    model, _ = _if_model()
    model.graph.input[0].type.tensor_type.elem_type = TensorProto.FLOAT
    with pytest.raises(errors.DTypeError, match="If.*condition must be a bool"):
        hl.onnx.prepare(model, check=False).run([np.array(1.5, np.float32),
                                                 np.ones(3, np.float32)])


# ---- Loop -----------------------------------------------------------------------------------

def _loop_model(with_trip_count=True, with_cond=True, limit=100.0):
    """state = state * w + i for each iteration i while sum(state) < limit; every new state
    is also a scan output."""
    body = helper.make_graph(
        [helper.make_node("Cast", ["i"], ["fi"], to=F32),
         helper.make_node("Mul", ["s_in", "w"], ["sw"]),
         helper.make_node("Add", ["sw", "fi"], ["s_out"]),
         helper.make_node("ReduceSum", ["s_out"], ["total"], keepdims=0),
         _scalar("limit", limit, np.float32),
         helper.make_node("Less", ["total", "limit"], ["c_out"]),
         helper.make_node("Identity", ["s_out"], ["scan"])],
        "body",
        [_vi("i", [], TensorProto.INT64), _vi("c_in", [], TensorProto.BOOL), _vi("s_in", [2])],
        [_vi("c_out", [], TensorProto.BOOL), _vi("s_out", [2]), _vi("scan", [2])])
    node = helper.make_node("Loop", ["M" if with_trip_count else "",
                                     "c" if with_cond else "", "s0"],
                            ["s_final", "history"], body=body)
    inputs = ([_vi("M", [], TensorProto.INT64)] if with_trip_count else []) + \
        ([_vi("c", [], TensorProto.BOOL)] if with_cond else []) + [_vi("s0", [2])]
    w = np.array([1.5, 0.5], np.float32)
    return _model([node], inputs, [_vi("s_final", [2]), _vi("history", ["n", 2])],
                  {"w": w}), w


def _loop_reference(s, w, trips, limit):
    history = []
    for i in range(trips):
        s = s * w + i
        history.append(s)
        if s.sum() >= limit:
            break
    return s, np.array(history).reshape(-1, 2)


def test_loop_runs_to_its_trip_count_or_condition():
    s0 = np.array([1.0, 2.0], np.float32)
    for trips, limit in [(3, 100.0), (10, 20.0), (0, 100.0)]:
        model, w = _loop_model(limit=limit)
        s, hist = hl.onnx.prepare(model).run([np.array(trips), np.array(True), s0])
        want_s, want_h = _loop_reference(s0, w, trips, limit)
        np.testing.assert_allclose(s, want_s, rtol=RTOL)
        np.testing.assert_allclose(hist, want_h, rtol=RTOL)
    model, w = _loop_model(with_trip_count=False, limit=20.0)  # while loop
    s, hist = hl.onnx.prepare(model).run([np.array(True), s0])
    np.testing.assert_allclose(s, _loop_reference(s0, w, 1000, 20.0)[0], rtol=RTOL)
    model, w = _loop_model(with_cond=False, limit=0.0)  # for loop: the body's cond ignored
    s, hist = hl.onnx.prepare(model).run([np.array(4), s0])
    assert hist.shape == (4, 2)


def test_loop_gradient_matches_pytorch():
    torch = pytest.importorskip("torch")
    model, w = _loop_model()
    m = hl.onnx.ONNXModel(model)
    s0 = np.array([1.0, 2.0], np.float32)
    s0t = hl.tensor(s0)
    s0t.requires_grad = True
    s, hist = m.forward(hl.tensor(np.array(3)), hl.tensor(np.array(True)), s0t)
    r = np.arange(6, dtype=np.float32).reshape(3, 2)
    ((hist * hl.tensor(r)).sum() + s.sum()).backward()

    tw = torch.tensor(w, requires_grad=True)
    ts = torch.tensor(s0, requires_grad=True)
    cur, hs = ts, []
    for i in range(3):
        cur = cur * tw + i
        hs.append(cur)
    ((torch.stack(hs) * torch.from_numpy(r)).sum() + cur.sum()).backward()
    np.testing.assert_allclose(m.w.grad.numpy(), tw.grad.numpy(), rtol=RTOL)
    np.testing.assert_allclose(s0t.grad.numpy(), ts.grad.numpy(), rtol=RTOL)


def test_loop_without_trip_count_or_condition_is_refused():
    model, _ = _loop_model(with_trip_count=False, with_cond=False)
    with pytest.raises(errors.ONNXError, match="Loop.*never end"):
        hl.onnx.prepare(model).run([np.ones(2, np.float32)])


# ---- Scan -----------------------------------------------------------------------------------

def test_scan_directions_and_axes():
    """A running sum over axis 1 of x, scanned backwards, its outputs stacked on axis 1."""
    body = helper.make_graph(
        [helper.make_node("Add", ["acc_in", "xi"], ["acc_out"]),
         helper.make_node("Identity", ["acc_out"], ["y"])],
        "body", [_vi("acc_in", [2]), _vi("xi", [2])], [_vi("acc_out", [2]), _vi("y", [2])])
    node = helper.make_node("Scan", ["acc0", "x"], ["acc", "ys"], body=body, num_scan_inputs=1,
                            scan_input_axes=[1], scan_input_directions=[1],
                            scan_output_axes=[1])
    model = _model([node], [_vi("acc0", [2]), _vi("x", [2, 4])],
                   [_vi("acc", [2]), _vi("ys", [2, 4])], opset=16)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    acc, ys = hl.onnx.prepare(model).run([np.zeros(2, np.float32), x])
    np.testing.assert_allclose(acc, x.sum(1))
    np.testing.assert_allclose(ys, np.cumsum(x[:, ::-1], axis=1))


# ---- Attention ------------------------------------------------------------------------------

def _attention_model(q_shape, k_shape, v_shape, mask_shape=None, opset=23, **attrs):
    inputs = [_vi("Q", q_shape), _vi("K", k_shape), _vi("V", v_shape)]
    names = ["Q", "K", "V"]
    if mask_shape is not None:
        inputs.append(_vi("mask", mask_shape))
        names.append("mask")
    node = helper.make_node("Attention", names, ["Y"], **attrs)
    return _model([node], inputs, [_vi("Y", len(q_shape))], opset=opset)


def _torch_attention(torch, q, k, v, mask, causal, scale):
    reps = q.shape[1] // k.shape[1]
    k, v = k.repeat_interleave(reps, 1), v.repeat_interleave(reps, 1)
    s = q @ k.transpose(-1, -2) * scale
    if mask is not None:
        s = s + mask
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, -1) @ v


@pytest.mark.parametrize("heads,causal,with_mask", [((2, 2), False, True),
                                                    ((4, 2), True, False),
                                                    ((6, 3), True, True)])
def test_attention_gradients_match_pytorch(heads, causal, with_mask):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(0)
    hq, hkv = heads
    q = rng.normal(size=(2, hq, 3, 4)).astype(np.float32)
    k = rng.normal(size=(2, hkv, 5, 4)).astype(np.float32)
    v = rng.normal(size=(2, hkv, 5, 6)).astype(np.float32)
    mask = rng.normal(size=(3, 5)).astype(np.float32) if with_mask else None
    model = _attention_model(q.shape, k.shape, v.shape, mask.shape if with_mask else None,
                             is_causal=int(causal), scale=0.3)
    m = hl.onnx.ONNXModel(model)
    feeds = [hl.tensor(a) for a in (q, k, v)]
    for t in feeds:
        t.requires_grad = True
    (y,) = m.forward(*feeds, *([hl.tensor(mask)] if with_mask else []))
    r = rng.normal(size=y.shape).astype(np.float32)
    (y * hl.tensor(r)).sum().backward()

    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ty = _torch_attention(torch, tq, tk, tv, torch.from_numpy(mask) if with_mask else None,
                          causal, 0.3)
    (ty * torch.from_numpy(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    for got, want in zip(feeds, (tq, tk, tv)):
        np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=1e-3, atol=1e-5)


def test_attention_fully_masked_row_gives_zeros_and_finite_gradients():
    q = np.ones((1, 1, 2, 4), np.float32)
    mask = np.array([[True, True, True], [False, False, False]])
    model = _attention_model([1, 1, 2, 4], [1, 1, 3, 4], [1, 1, 3, 4])
    model.graph.input.append(_vi("mask", [2, 3], TensorProto.BOOL))
    model.graph.node[0].input.append("mask")
    m = hl.onnx.ONNXModel(model)
    qt = hl.tensor(q)
    qt.requires_grad = True
    (y,) = m.forward(qt, hl.tensor(np.ones((1, 1, 3, 4), np.float32)),
                     hl.tensor(np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)),
                     hl.tensor(mask))
    assert not y.numpy()[0, 0, 1].any() and np.isfinite(y.numpy()).all()
    y.sum().backward()
    assert np.isfinite(qt.grad.numpy()).all()


def test_attention_bad_shapes():
    model = _attention_model([1, 2, 3, 4], [1, 2, 5, 8], [1, 2, 5, 4])
    with pytest.raises(errors.ShapeError, match="Attention.*disagree"):
        hl.onnx.prepare(model, check=False).run([np.zeros((1, 2, 3, 4), np.float32),
                                                 np.zeros((1, 2, 5, 8), np.float32),
                                                 np.zeros((1, 2, 5, 4), np.float32)])
    model = _attention_model([1, 3, 12], [1, 3, 12], [1, 3, 12], q_num_heads=5,
                             kv_num_heads=3)
    with pytest.raises(errors.ShapeError, match="does not split into 5 heads"):
        hl.onnx.prepare(model, check=False).run([np.zeros((1, 3, 12), np.float32)] * 3)


# ---- RMSNormalization, RotaryEmbedding, SwiGLU ------------------------------------------------

def _grad_check(torch, model, arrays, torch_fn, rtol=1e-3):
    """The first output of ``model`` and the gradients reaching its inputs against
    torch_fn(*tensors)."""
    m = hl.onnx.ONNXModel(model)
    feeds = [hl.tensor(a) for a in arrays]
    for t, a in zip(feeds, arrays):
        t.requires_grad = a.dtype.kind == "f"
    y = m.forward(*feeds)[0]
    r = np.random.default_rng(9).normal(size=y.shape).astype(np.float32)
    (y * hl.tensor(r)).sum().backward()
    ts = [torch.tensor(a, requires_grad=a.dtype.kind == "f") for a in arrays]
    ty = torch_fn(*ts)
    (ty * torch.from_numpy(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=ATOL)
    for got, want in zip(feeds, ts):
        if want.requires_grad:
            np.testing.assert_allclose(got.grad.numpy(), want.grad.numpy(), rtol=rtol,
                                       atol=1e-5)


def test_rms_normalization_gradient():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.normal(size=(2, 3, 4)).astype(np.float32)
    scale = rng.normal(size=(3, 4)).astype(np.float32)
    model = _model([helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1,
                                     epsilon=1e-3)],
                   [_vi("x", [2, 3, 4]), _vi("s", [3, 4])], [_vi("y", [2, 3, 4])], opset=23)
    _grad_check(torch, model, [x, scale],
                lambda x, s: x * torch.rsqrt((x * x).mean((1, 2), keepdim=True) + 1e-3) * s)


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_gradient(interleaved):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(2)
    x = rng.normal(size=(2, 2, 3, 8)).astype(np.float32)  # [batch, heads, seq, size]
    angles = rng.uniform(0, 3, size=(10, 3)).astype(np.float32)  # rotary dim 6 of 8
    pos = np.array([[0, 4, 9], [1, 2, 3]], np.int64)
    model = _model([helper.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                                     interleaved=interleaved, rotary_embedding_dim=6)],
                   [_vi("x", [2, 2, 3, 8]), _vi("cos", [10, 3]), _vi("sin", [10, 3]),
                    _vi("pos", [2, 3], TensorProto.INT64)], [_vi("y", [2, 2, 3, 8])],
                   opset=23)

    def rotate(x, cos, sin, pos):
        c, s = cos[pos][:, None], sin[pos][:, None]  # [batch, 1, seq, 3]
        rot, rest = x[..., :6], x[..., 6:]
        a, b = (rot[..., 0::2], rot[..., 1::2]) if interleaved else (rot[..., :3], rot[..., 3:])
        re, im = a * c - b * s, a * s + b * c
        rot = torch.stack([re, im], -1).flatten(-2) if interleaved else torch.cat([re, im], -1)
        return torch.cat([rot, rest], -1)
    _grad_check(torch, model, [x, np.cos(angles), np.sin(angles), pos], rotate)


def test_swiglu_gradient_and_shape_check():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(3)
    a, b = (rng.normal(size=(3, 5)).astype(np.float32) for _ in range(2))
    model = _model([helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=1.7)],
                   [_vi("a", [3, 5]), _vi("b", [3, "n"])], [_vi("y", [3, 5])], opset=28)
    _grad_check(torch, model, [a, b], lambda a, b: a * torch.sigmoid(1.7 * a) * b)
    with pytest.raises(errors.ShapeError, match="SwiGLU.*same shape"):
        hl.onnx.prepare(model, check=False).run([a, b[:, :4].copy()])


# ---- random generators ------------------------------------------------------------------------

def _random_model(op, inputs=(), rank=1, out=F32, **attrs):
    node = helper.make_node(op, [i.name for i in inputs], ["y"], **attrs)
    return _model([node], list(inputs), [_vi("y", rank, out)], opset=22)


def test_random_normal_and_uniform_shapes_dtypes_and_moments():
    y = hl.onnx.prepare(_random_model("RandomNormal", rank=2, shape=[200, 100], mean=2.0,
                                      scale=0.5)).run([])[0]
    assert y.shape == (200, 100) and y.dtype == np.float32
    assert abs(y.mean() - 2.0) < 0.02 and abs(y.std() - 0.5) < 0.02
    y = hl.onnx.prepare(_random_model("RandomUniform", shape=[20000], low=-1.0, high=3.0,
                                      dtype=TensorProto.DOUBLE, out=TensorProto.DOUBLE)
                        ).run([])[0]
    assert y.dtype == np.float64 and y.min() >= -1.0 and y.max() < 3.0
    assert abs(y.mean() - 1.0) < 0.05 and abs(y.var() - 16 / 12) < 0.05
    like = _random_model("RandomNormalLike", [_vi("x", [50, 40], TensorProto.FLOAT16)], 2,
                         TensorProto.FLOAT16)
    y = hl.onnx.prepare(like).run([np.zeros((50, 40), np.float16)])[0]
    assert y.shape == (50, 40) and y.dtype == np.float16 and abs(y.mean()) < 0.1
    like = _random_model("RandomUniformLike", [_vi("x", [7, 3])], 2, TensorProto.DOUBLE,
                         dtype=TensorProto.DOUBLE)
    y = hl.onnx.prepare(like).run([np.zeros((7, 3), np.float32)])[0]
    assert y.shape == (7, 3) and y.dtype == np.float64


def test_random_draws_differ_between_runs_and_seeded_nodes_repeat():
    rep = hl.onnx.prepare(_random_model("RandomUniform", shape=[8]))
    assert not np.array_equal(rep.run([])[0], rep.run([])[0])
    seeded = _random_model("RandomNormal", shape=[8], seed=3.0)
    a = hl.onnx.prepare(seeded).run([])[0]
    b = hl.onnx.prepare(seeded).run([])[0]
    np.testing.assert_array_equal(a, b)


def test_bernoulli_and_multinomial_frequencies():
    p = np.tile(np.array([0.0, 0.25, 0.9, 1.0]), (5000, 1))
    y = hl.onnx.prepare(_random_model("Bernoulli", [_vi("p", [5000, 4], TensorProto.DOUBLE)],
                                      2, TensorProto.INT32, dtype=TensorProto.INT32)
                        ).run([p])[0]
    assert y.dtype == np.int32 and set(np.unique(y)) <= {0, 1}
    np.testing.assert_allclose(y.mean(0), [0.0, 0.25, 0.9, 1.0], atol=0.03)
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]])
    logits = np.log(np.maximum(probs, 1e-30)).astype(np.float32)
    y = hl.onnx.prepare(_random_model("Multinomial", [_vi("l", [2, 3])], 2, TensorProto.INT64,
                                      sample_size=6000, dtype=TensorProto.INT64)
                        ).run([logits])[0]
    assert y.shape == (2, 6000) and y.dtype == np.int64
    freq = np.stack([np.bincount(row, minlength=3) / 6000 for row in y])
    np.testing.assert_allclose(freq, probs, atol=0.03)


def test_random_ops_bad_dtype():
    model = _random_model("RandomNormal", shape=[2], dtype=TensorProto.INT32,
                          out=TensorProto.INT32)
    with pytest.raises(errors.DTypeError, match="RandomNormal.*not a float type"):
        hl.onnx.prepare(model, check=False).run([])


# ---- DFT and STFT -----------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [17, 20])
def test_dft_matches_numpy(opset):
    rng = np.random.default_rng(4)
    x = rng.normal(size=(2, 6, 3)).astype(np.float64)

    def run(signal, length=None, **attrs):
        inputs = [_vi("x", list(signal.shape), TensorProto.DOUBLE)]
        names, feeds = ["x"], [signal]
        if length is not None:
            inputs.append(_vi("n", [], TensorProto.INT64))
            names.append("n")
            feeds.append(np.array(length))
        if opset >= 20:
            inputs.append(_vi("axis", [], TensorProto.INT64))
            names += [""] * (2 - len(names)) + ["axis"]
            feeds.append(np.array(1))
        else:
            attrs["axis"] = 1
        node = helper.make_node("DFT", names, ["y"], **attrs)
        model = _model([node], inputs, [_vi("y", 4, TensorProto.DOUBLE)], opset=opset)
        y = hl.onnx.prepare(model).run(feeds)[0]
        return y[..., 0] + 1j * y[..., 1] if y.shape[-1] == 2 else y[..., 0]

    real = x[..., None]
    np.testing.assert_allclose(run(real), np.fft.fft(x, axis=1), atol=1e-10)
    np.testing.assert_allclose(run(real, 8, onesided=1), np.fft.rfft(x, 8, axis=1), atol=1e-10)
    spec = np.fft.rfft(x, axis=1)
    packed = np.stack([spec.real, spec.imag], -1)
    np.testing.assert_allclose(run(packed, 6, inverse=1, onesided=1), x, atol=1e-10)
    z = np.stack([x, rng.normal(size=x.shape)], -1)
    np.testing.assert_allclose(run(z, 5, inverse=1),
                               np.fft.ifft(z[..., 0] + 1j * z[..., 1], 5, axis=1), atol=1e-10)


def test_stft_matches_torch_with_gradient():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(5)
    x = rng.normal(size=(2, 20)).astype(np.float32)
    window = np.hanning(8).astype(np.float32)
    node = helper.make_node("STFT", ["x", "step", "w"], ["y"])
    model = _model([node], [_vi("x", [2, 20, 1]), _vi("step", [], TensorProto.INT64),
                            _vi("w", [8])], [_vi("y", 4)], opset=17)

    def torch_stft(x, step, w):
        s = torch.stft(x[..., 0], 8, hop_length=3, window=w, center=False,
                       return_complex=True)
        return torch.view_as_real(s).transpose(1, 2)  # [batch, frames, bins, 2]
    _grad_check(torch, model, [x[..., None], np.array(3), window], torch_stft)


def test_dft_bad_signal():
    model = _model([helper.make_node("DFT", ["x"], ["y"])], [_vi("x", [2, 5, 3])],
                   [_vi("y", 3)], opset=17)
    with pytest.raises(errors.ShapeError, match="DFT.*1 \\(real\\) or 2 \\(complex\\)"):
        hl.onnx.prepare(model, check=False).run([np.zeros((2, 5, 3), np.float32)])


# ---- the newest cache and state ops ----------------------------------------------------------

def test_causal_conv_with_state_gradient():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    x = rng.normal(size=(2, 3, 5)).astype(np.float32)
    w = rng.normal(size=(3, 1, 4)).astype(np.float32)
    b = rng.normal(size=(3,)).astype(np.float32)
    past = rng.normal(size=(2, 3, 3)).astype(np.float32)
    node = helper.make_node("CausalConvWithState", ["x", "w", "b", "past"], ["y", "state"],
                            activation="silu")
    model = _model([node], [_vi("x", [2, 3, 5]), _vi("w", [3, 1, 4]), _vi("b", [3]),
                            _vi("past", [2, 3, 3])], [_vi("y", 3), _vi("state", 3)], opset=27)
    (state,) = hl.onnx.prepare(model).run([x, w, b, past])[1:]
    np.testing.assert_array_equal(state, np.concatenate([past, x], 2)[:, :, -3:])

    def conv(x, w, b, past):
        y = torch.nn.functional.conv1d(torch.cat([past, x], 2), w, b, groups=3)
        return y * torch.sigmoid(y)
    _grad_check(torch, model, [x, w, b, past], conv)


def test_linear_attention_gradient():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    b_, t_, hq, hkv, dk, dv = 2, 3, 4, 2, 3, 2
    q = rng.normal(size=(b_, t_, hq * dk)).astype(np.float32)
    k = rng.normal(size=(b_, t_, hkv * dk)).astype(np.float32) * 0.5
    v = rng.normal(size=(b_, t_, hkv * dv)).astype(np.float32)
    decay = -rng.uniform(0.1, 1.0, size=(b_, t_, hkv)).astype(np.float32)
    beta = rng.uniform(0.2, 0.9, size=(b_, t_, hkv)).astype(np.float32)
    node = helper.make_node("LinearAttention", ["q", "k", "v", "", "decay", "beta"],
                            ["y", "state"], q_num_heads=hq, kv_num_heads=hkv)
    model = _model([node], [_vi("q", list(q.shape)), _vi("k", list(k.shape)),
                            _vi("v", list(v.shape)), _vi("decay", list(decay.shape)),
                            _vi("beta", list(beta.shape))], [_vi("y", 3), _vi("state", 4)],
                   opset=27)

    def reference(q, k, v, decay, beta):
        heads = lambda a, h: a.reshape(b_, t_, h, -1).transpose(1, 2)  # noqa: E731
        q, k, v = heads(q, hq), heads(k, hkv), heads(v, hkv)
        g, bt = decay.transpose(1, 2), beta.transpose(1, 2)  # [b, hkv, t]
        s = torch.zeros(b_, hkv, dk, dv)
        ys = []
        for i in range(t_):
            s = s * torch.exp(g[:, :, i])[..., None, None]
            vt = bt[:, :, i, None] * (v[:, :, i] - torch.einsum("bhdm,bhd->bhm", s, k[:, :, i]))
            s = s + k[:, :, i, :, None] * vt[:, :, None, :]
            ys.append(torch.einsum("bhd,bhdm->bhm", q[:, :, i],
                                   s.repeat_interleave(hq // hkv, 1)) / np.sqrt(dk))
        return torch.stack(ys, 1).reshape(b_, t_, hq * dv)
    _grad_check(torch, model, [q, k, v, decay, beta], reference)


def test_tensor_scatter_overrun_and_circular():
    cache = np.zeros((2, 4, 2), np.float32)
    update = np.ones((2, 3, 2), np.float32)
    node = helper.make_node("TensorScatter", ["c", "u", "i"], ["y"], mode="linear")
    model = _model([node], [_vi("c", [2, 4, 2]), _vi("u", [2, 3, 2]),
                            _vi("i", [2], TensorProto.INT64)], [_vi("y", [2, 4, 2])], opset=24)
    with pytest.raises(errors.IndexError, match="TensorScatter.*overruns the cache of 4"):
        hl.onnx.prepare(model).run([cache, update, np.array([0, 2])])
    model.graph.node[0].attribute[0].s = b"circular"
    y = hl.onnx.prepare(model).run([cache, update, np.array([0, 2])])[0]
    np.testing.assert_array_equal(y[:, :, 0], [[1, 1, 1, 0], [1, 0, 1, 1]])
