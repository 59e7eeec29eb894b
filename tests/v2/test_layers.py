"""Reference tests of hl.v2's layers against PaddlePaddle's own definitions.

Each test builds a small v2 graph, gives its parameters random values, feeds random samples
(variable-length sequences included) and compares the outputs with an independent
reimplementation written here from the definitions of the legacy PaddlePaddle sources
(paddle/gserver/layers, paddle/function, paddle/cuda, python/paddle/trainer*): numpy in
float64 for the forward values, torch in float64 where gradients are compared. Sequences
are processed one at a time, with no padding, so the padding hl uses internally never
enters a reference.

Tolerances: a float32 forward against a float64 reference, rtol 1e-5 / atol 1e-6 (1e-5
absolute through recurrences); gradients, rtol 1e-4 / atol 1e-5.

Where hl.v2 differed from Paddle (biased moving variance, use_global_stats at training time,
coeff on reported costs, even context lengths, lstmemory's weight dims, four default names,
sigmoid's input clipping), hl.v2 was changed to Paddle's behaviour; these tests keep it so.
"""
import re
import types

import numpy as np
import pytest

import hl
from hl.layers.layer import Layer
from hl.v2 import activation as A
from hl.v2 import attr as paddle_attr
from hl.v2 import data_type as T
from hl.v2 import layer as L
from hl.v2 import networks as N
from hl.v2 import parameters as P
from hl.v2 import pooling as POOL
from hl.v2.feeder import Feeder
from hl.v2.network import Network
from hl.v2.operators.values import Seq

RTOL, ATOL = 1e-5, 1e-6          # float32 forward vs float64 reference
REC_ATOL = 1e-5                  # through recurrences
G_RTOL, G_ATOL = 1e-4, 1e-5      # gradients


# ---- running a graph ---------------------------------------------------------------------

def run(targets, params, samples, names, train=False):
    """The targets' values for one batch of v2 samples, fields in the order `names`. A
    sequence output comes back as a list of (steps, size) arrays, one per sample."""
    net = Network(targets, params)
    net.train() if train else net.eval()
    feeder = Feeder(net.data_layers, list(names), "test")
    outs = Layer.__call__(net, feeder.values(feeder.arrays(samples, 0)))
    return [to_numpy(v) for v in outs]


def to_numpy(v):
    if isinstance(v, Seq):
        data = np.asarray(v.data.numpy())
        return [data[i, :n] for i, n in enumerate(v.lengths)]
    return np.asarray(v.numpy())


def cost_and_grads(cost, params, samples, names):
    """(per-sample costs, {parameter name: gradient of the summed cost}) in training mode."""
    net = Network([cost], params)
    net.train()
    feeder = Feeder(net.data_layers, list(names), "test")
    out, = Layer.__call__(net, feeder.values(feeder.arrays(samples, 0)))
    total = hl.sum(out)
    by_id = {id(t): name for name, t in net.get_params().items()}
    grads = {by_id[id(p)]: np.asarray(g.numpy()) for p, g in hl.autograd.backward(total)}
    return np.asarray(out.numpy()), grads


def randomize(params, rng, scale=0.5):
    """Every parameter set to normal(0, scale) values (v2's shapes, via Parameters.set)."""
    values = {}
    for name in params.names():
        v = rng.normal(0.0, scale, params.get_shape(name))
        params.set(name, v)
        values[name] = params.get(name).astype(np.float64)
    return values


def seq_lengths(rng, n, low=1, high=6):
    lens = rng.integers(low, high + 1, n)
    lens[0] = high          # the longest sets the padding; a length-1 one tests the edge
    lens[-1] = 1
    return [int(x) for x in lens]


def assert_close(got, want, rtol=RTOL, atol=ATOL, what=""):
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=rtol, atol=atol,
                               err_msg=what)


def default_index(name, prefix):
    m = re.fullmatch(rf"__{re.escape(prefix)}_(\d+)__", name)
    assert m, f"{name!r} is not a default name with prefix {prefix!r}"
    return int(m.group(1))


# ---- references (math from Paddle's definitions; numpy or torch through `ops`) ----------

def _np_sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


NP = types.SimpleNamespace(tanh=np.tanh, sigmoid=_np_sigmoid, zeros=np.zeros, stack=np.stack)


def torch_ops():
    torch = pytest.importorskip("torch")
    return torch, types.SimpleNamespace(
        tanh=torch.tanh, sigmoid=torch.sigmoid, stack=torch.stack,
        zeros=lambda n: torch.zeros(n, dtype=torch.float64))


def lstm_ref(x, w, b, reverse, ops=NP):
    """Paddle's lstmemory over ONE sequence x (steps, 4s) (LstmLayer + hl_lstm_ops.cuh):
    each step's 4s values are [input node, input gate, forget gate, output gate], plus
    h_prev @ w (w: (s, 4s)) and the first 4s values of the bias (7s); the last 3s values of
    the bias are the peephole ("check") weights of the input, forget and output gates:
        a = tanh(in), i = sig(ig + c_prev*ci), f = sig(fg + c_prev*cf)
        c = a*i + c_prev*f, o = sig(og + c*co), h = o*tanh(c).
    The state starts at zero; reverse runs from the last step to the first."""
    s = w.shape[0]
    steps = x.shape[0]
    h = c = ops.zeros(s)
    out = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        g = x[t] + h @ w
        if b is not None:
            g = g + b[:4 * s]
        node, ig, fg, og = g[:s], g[s:2 * s], g[2 * s:3 * s], g[3 * s:]
        if b is not None:
            ig = ig + c * b[4 * s:5 * s]
            fg = fg + c * b[5 * s:6 * s]
        c = ops.tanh(node) * ops.sigmoid(ig) + c * ops.sigmoid(fg)
        if b is not None:
            og = og + c * b[6 * s:]
        h = ops.sigmoid(og) * ops.tanh(c)
        out[t] = h
    return ops.stack(out)


def gru_ref(x, w_flat, b, reverse, ops=NP):
    """Paddle's grumemory over ONE sequence x (steps, 3s) (GatedRecurrentLayer, GruFunctor,
    hl_gru_ops.cuh): the 3s values are [update gate z, reset gate r, candidate]; the weight's
    first 2*s*s values are the (s, 2s) gate matrix, the last s*s the (s, s) candidate matrix:
        z, r = sig(x_zr + h_prev @ Wg), c = tanh(x_c + (r*h_prev) @ Wc)
        h = h_prev - z*h_prev + z*c."""
    s = x.shape[1] // 3
    wg = w_flat[:2 * s * s].reshape(s, 2 * s)
    wc = w_flat[2 * s * s:].reshape(s, s)
    steps = x.shape[0]
    h = ops.zeros(s)
    out = [None] * steps
    for t in (range(steps - 1, -1, -1) if reverse else range(steps)):
        g = x[t] if b is None else x[t] + b
        zr = ops.sigmoid(g[:2 * s] + h @ wg)
        z, r = zr[:s], zr[s:]
        cand = ops.tanh(g[2 * s:] + (r * h) @ wc)
        h = h - z * h + z * cand
        out[t] = h
    return ops.stack(out)


def context_ref(x, length, start):
    """ContextProjectionForward: step t holds steps t+start .. t+start+length-1 of its own
    sequence side by side, zeros outside the sequence."""
    steps, d = x.shape
    out = np.zeros((steps, d * length))
    for t in range(steps):
        for j in range(length):
            k = t + start + j
            if 0 <= k < steps:
                out[t, j * d:(j + 1) * d] = x[k]
    return out


def out_size(size, k, pad, stride, ceil):
    """config_parser.cnn_output_size: 1 + floor or ceil of (size + 2 pad - k) / stride."""
    q = (size + 2 * pad - k) / stride
    return 1 + int(np.ceil(q) if ceil else np.floor(q))


def pool_ref(x, kind, k, s, p, ceil=True):
    """CpuMatrix::maxPoolForward / avgPoolForward: window (ky, kx) at i*stride - padding,
    clipped to the image; max over it, or the mean over its part inside the image."""
    (ky, kx), (sy, sx), (py, px) = k, s, p
    n, c, h, w = x.shape
    oh, ow = out_size(h, ky, py, sy, ceil), out_size(w, kx, px, sx, ceil)
    out = np.zeros((n, c, oh, ow))
    for i in range(oh):
        h0 = i * sy - py
        h1, h0 = min(h0 + ky, h), max(h0, 0)
        for j in range(ow):
            w0 = j * sx - px
            w1, w0 = min(w0 + kx, w), max(w0, 0)
            win = x[:, :, h0:h1, w0:w1]
            out[:, :, i, j] = win.max(axis=(2, 3)) if kind == "max" else win.mean(axis=(2, 3))
    return out


def log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# ---- fc, embedding, concat, addto, dropout, max_id ---------------------------------------

def test_fc_sums_each_inputs_product_plus_bias(rng):
    a = L.data(name="a", type=T.dense_vector(4))
    b = L.data(name="b", type=T.dense_vector(3))
    fc = L.fc(input=[a, b], size=5, act=A.Tanh())
    params = P.create(fc)
    assert params.get_shape(f"_{fc.name}.w0") == (4, 5)
    assert params.get_shape(f"_{fc.name}.w1") == (3, 5)
    assert params.get_shape(f"_{fc.name}.wbias") == (1, 5)
    v = randomize(params, rng)
    xa, xb = rng.normal(size=(6, 4)), rng.normal(size=(6, 3))
    got, = run([fc], params, list(zip(xa, xb)), ["a", "b"])
    want = np.tanh(xa @ v[f"_{fc.name}.w0"] + xb @ v[f"_{fc.name}.w1"]
                   + v[f"_{fc.name}.wbias"])
    assert_close(got, want)


def test_fc_without_bias_and_over_a_sequence_acts_per_step(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(3))
    fc = L.fc(input=x, size=4, act=A.Sigmoid(), bias_attr=False)
    params = P.create(fc)
    assert params.names() == [f"_{fc.name}.w0"]
    v = randomize(params, rng)
    seqs = [rng.normal(size=(n, 3)) for n in seq_lengths(rng, 4)]
    got, = run([fc], params, [(s,) for s in seqs], ["x"])
    for g, s in zip(got, seqs):
        assert_close(g, _np_sigmoid(s @ v[f"_{fc.name}.w0"]))


def test_embedding_picks_rows_of_the_table(rng):
    ids = L.data(name="ids", type=T.integer_value(7))
    words = L.data(name="words", type=T.integer_value_sequence(7))
    e1 = L.embedding(input=ids, size=3)
    e2 = L.embedding(input=words, size=3, param_attr=paddle_attr.Param(name="shared"))
    params = P.create([e1, e2])
    assert params.get_shape(f"_{e1.name}.w0") == (7, 3)
    assert params.get_shape("shared") == (7, 3)
    v = randomize(params, rng)
    one = rng.integers(0, 7, 5)
    seqs = [rng.integers(0, 7, n) for n in seq_lengths(rng, 5)]
    g1, g2 = run([e1, e2], params, [(int(i), list(s)) for i, s in zip(one, seqs)],
                 ["ids", "words"])
    assert_close(g1, v[f"_{e1.name}.w0"][one])
    for g, s in zip(g2, seqs):
        assert_close(g, v["shared"][s])


def test_concat_puts_features_side_by_side(rng):
    a = L.data(name="a", type=T.dense_vector(2))
    b = L.data(name="b", type=T.dense_vector(3))
    sa = L.data(name="sa", type=T.dense_vector_sequence(2))
    sb = L.data(name="sb", type=T.dense_vector_sequence(4))
    c = L.concat(input=[a, b])
    cs = L.concat(input=[sa, sb])
    assert (c.size, cs.size) == (5, 6)
    params = P.create([c, cs])
    xa, xb = rng.normal(size=(3, 2)), rng.normal(size=(3, 3))
    lens = seq_lengths(rng, 3)
    qa = [rng.normal(size=(n, 2)) for n in lens]
    qb = [rng.normal(size=(n, 4)) for n in lens]
    got, got_s = run([c, cs], params, list(zip(xa, xb, qa, qb)), ["a", "b", "sa", "sb"])
    assert_close(got, np.concatenate([xa, xb], axis=1))
    for g, p, q in zip(got_s, qa, qb):
        assert_close(g, np.concatenate([p, q], axis=1))


def test_addto_sums_inputs_plus_bias_and_its_dropout_scales_by_keep_at_test(rng):
    a = L.data(name="a", type=T.dense_vector(4))
    b = L.data(name="b", type=T.dense_vector(4))
    plain = L.addto(input=[a, b])
    biased = L.addto(input=[a, b], bias_attr=True, act=A.Relu(),
                     layer_attr=paddle_attr.Extra(drop_rate=0.3))
    params = P.create([plain, biased])
    assert params.names() == [f"_{biased.name}.wbias"]      # addto has no bias by default
    v = randomize(params, rng)
    xa, xb = rng.normal(size=(5, 4)), rng.normal(size=(5, 4))
    got_plain, got_biased = run([plain, biased], params, list(zip(xa, xb)), ["a", "b"])
    assert_close(got_plain, xa + xb)
    # Layer::forwardDropOut at test time: the output times (1 - drop_rate)
    assert_close(got_biased, np.maximum(xa + xb + v[f"_{biased.name}.wbias"], 0) * 0.7)


def test_dropout_zeroes_without_rescaling_in_training_and_scales_at_test(rng):
    x = L.data(name="x", type=T.dense_vector(400))
    d = L.dropout(input=x, dropout_rate=0.5)
    params = P.create(d)
    xs = rng.uniform(0.5, 1.5, size=(5, 400))
    samples = [(r,) for r in xs]
    got_test, = run([d], params, samples, ["x"])
    assert_close(got_test, xs * 0.5)
    hl.manual_seed(3)
    got_train, = run([d], params, samples, ["x"], train=True)
    dropped = got_train == 0
    # Layer::forwardDropOut in training: out * mask, mask = (uniform > drop_rate); the kept
    # values are unchanged (no 1 / (1 - p) rescaling)
    assert_close(got_train[~dropped], xs[~dropped])
    assert 0.4 < dropped.mean() < 0.6


def test_max_id_is_the_index_of_the_largest_value(rng):
    x = L.data(name="x", type=T.dense_vector(6))
    m = L.max_id(input=x)
    params = P.create(m)
    xs = rng.normal(size=(7, 6))
    got, = run([m], params, [(r,) for r in xs], ["x"])
    np.testing.assert_array_equal(np.asarray(got).reshape(-1), xs.argmax(axis=1))


# ---- activations -------------------------------------------------------------------------

ACTIVATIONS = {  # ActivationFunction.cpp / BaseMatrix.cu / Matrix.cpp
    "Linear": lambda x: x,
    "Identity": lambda x: x,
    "Relu": lambda x: np.maximum(x, 0),
    "BRelu": lambda x: np.clip(x, 0, 24),                          # brelu: p1 = 0, p2 = 24
    "Sigmoid": _np_sigmoid,
    "Tanh": np.tanh,
    "STanh": lambda x: 1.7159 * np.tanh(2.0 / 3.0 * x),             # a = 1.7159, b = 2/3
    "Softmax": lambda x: np.exp(log_softmax(x)),
    "SoftRelu": lambda x: np.log1p(np.exp(np.clip(x, -40, 40))),    # THRESHOLD = 40
    "Abs": np.abs,
    "Square": np.square,
    "Exp": np.exp,
    "Log": np.log,
}


def test_every_v2_activation_has_a_reference():
    names = {n for n in A.__all__ if n != "BaseActivation"}
    assert names == set(ACTIVATIONS)


@pytest.mark.parametrize("name", sorted(ACTIVATIONS))
def test_activation_matches_paddles_formula(name, rng):
    x = L.data(name="x", type=T.dense_vector(8))
    fc = L.fc(input=x, size=8, act=getattr(A, name)(), bias_attr=False)
    params = P.create(fc)
    params.set(f"_{fc.name}.w0", np.eye(8))          # the layer's input reaches the act as is
    if name == "Log":
        xs = rng.uniform(0.1, 3.0, size=(4, 8))
    elif name == "Exp":
        xs = rng.uniform(-3.0, 3.0, size=(4, 8))
    else:                                           # beyond brelu's 24 and softrelu's 40
        xs = rng.normal(0, 2.0, size=(4, 8))
        xs[0, :4] = [30.0, -30.0, 50.0, -50.0]
    want = ACTIVATIONS[name](xs.astype(np.float32).astype(np.float64))
    got, = run([fc], params, [(r,) for r in xs], ["x"])
    assert_close(got, want, rtol=RTOL, atol=ATOL * max(1.0, np.abs(want).max()))


def test_sigmoid_clips_its_input_at_13():
    x = L.data(name="x", type=T.dense_vector(2))
    fc = L.fc(input=x, size=2, act=A.Sigmoid(), bias_attr=False)
    params = P.create(fc)
    params.set(f"_{fc.name}.w0", np.eye(2))
    got, = run([fc], params, [(np.array([20.0, 13.0]),)], ["x"])
    assert_close(got, np.full((1, 2), _np_sigmoid(13.0)), rtol=0, atol=1e-7)


# ---- images ------------------------------------------------------------------------------

CONV_CASES = [  # (channels, height, width, filter (y, x), filters, stride (y, x), padding, groups)
    (1, 6, 6, (3, 3), 2, (1, 1), (0, 0), 1),
    (3, 5, 6, (3, 3), 2, (1, 1), (1, 1), 1),
    (2, 5, 7, (3, 3), 4, (2, 2), (1, 1), 2),
    (3, 6, 5, (2, 3), 3, (1, 2), (1, 0), 3),
    (4, 7, 7, (5, 5), 6, (2, 1), (2, 1), 2),
]


@pytest.mark.parametrize("case", CONV_CASES)
def test_img_conv_matches_conv2d_with_v2s_flat_weight(case, rng):
    torch = pytest.importorskip("torch")
    c, h, w, (fy, fx), nf, (sy, sx), (py, px), g = case
    img = L.data(name="img", type=T.dense_vector(c * h * w), height=h, width=w)
    conv = L.img_conv(input=img, filter_size=fx, filter_size_y=fy, num_filters=nf,
                      num_channels=c, stride=sx, stride_y=sy, padding=px, padding_y=py,
                      groups=g, act=A.Linear())
    oh = (h + 2 * py - fy) // sy + 1          # ExpandConvLayer: caffe mode (floor)
    ow = (w + 2 * px - fx) // sx + 1
    assert conv.size == nf * oh * ow
    params = P.create(conv)
    wname, bname = f"_{conv.name}.w0", f"_{conv.name}.wbias"
    assert params.get_shape(wname) == (1, nf * (c // g) * fy * fx)
    assert params.get_shape(bname) == (nf, 1)
    v = randomize(params, rng)
    xs = rng.normal(size=(3, c * h * w))
    got, = run([conv], params, [(r,) for r in xs], ["img"])
    # GemmConvFunction: group k's filters are the k-th consecutive block of the flat weight,
    # each (C/groups, fy, fx): together (F, C/groups, fy, fx)
    want = torch.nn.functional.conv2d(
        torch.tensor(xs.reshape(3, c, h, w)),
        torch.tensor(v[wname].reshape(nf, c // g, fy, fx)), torch.tensor(v[bname].reshape(-1)),
        stride=(sy, sx), padding=(py, px), groups=g).numpy()
    assert_close(np.asarray(got).reshape(want.shape), want)


POOL_CASES = [  # (channels, h, w, pool (y, x), stride (y, x), padding (y, x))
    (2, 5, 5, (2, 2), (2, 2), (0, 0)),      # ceil adds a partial window at the end
    (1, 7, 6, (3, 3), (2, 2), (1, 1)),
    (3, 6, 7, (3, 2), (2, 3), (1, 0)),
    (2, 4, 4, (3, 3), (1, 1), (0, 0)),
]


@pytest.mark.parametrize("kind", ["max", "avg"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_img_pool_ceil_mode_matches_paddles_windows(case, kind, rng):
    c, h, w, (ky, kx), (sy, sx), (py, px) = case
    img = L.data(name="img", type=T.dense_vector(c * h * w), height=h, width=w)
    pool = L.img_pool(input=img, pool_size=kx, pool_size_y=ky, stride=sx, stride_y=sy,
                      padding=px, padding_y=py, num_channels=c,
                      pool_type=POOL.Max() if kind == "max" else POOL.Avg())
    oh, ow = out_size(h, ky, py, sy, True), out_size(w, kx, px, sx, True)
    assert pool.size == c * oh * ow
    params = P.create(pool)
    xs = rng.normal(size=(3, c * h * w))
    got, = run([pool], params, [(r,) for r in xs], ["img"])
    want = pool_ref(xs.reshape(3, c, h, w), kind, (ky, kx), (sy, sx), (py, px))
    assert_close(np.asarray(got).reshape(want.shape), want)
    torch = pytest.importorskip("torch")     # and torch agrees on these windows
    t = torch.tensor(xs.reshape(3, c, h, w))
    ref = (torch.nn.functional.max_pool2d(t, (ky, kx), (sy, sx), (py, px), ceil_mode=True)
           if kind == "max" else
           torch.nn.functional.avg_pool2d(t, (ky, kx), (sy, sx), (py, px), ceil_mode=True,
                                          count_include_pad=False))
    assert_close(ref.numpy(), want, rtol=1e-12, atol=1e-12)


def test_img_pool_floor_mode(rng):
    img = L.data(name="img", type=T.dense_vector(2 * 5 * 5))
    pool = L.img_pool(input=img, pool_size=2, stride=2, num_channels=2, ceil_mode=False,
                      pool_type=POOL.Avg())
    assert pool.size == 2 * 2 * 2
    params = P.create(pool)
    xs = rng.normal(size=(2, 50))
    got, = run([pool], params, [(r,) for r in xs], ["img"])
    want = pool_ref(xs.reshape(2, 2, 5, 5), "avg", (2, 2), (2, 2), (0, 0), ceil=False)
    assert_close(np.asarray(got).reshape(want.shape), want)


def _bn_graph(image):
    if image:
        x = L.data(name="x", type=T.dense_vector(3 * 2 * 4), height=2, width=4)
        return x, L.batch_norm(input=x, num_channels=3, act=A.Linear(),
                               moving_average_fraction=0.8)
    x = L.data(name="x", type=T.dense_vector(5))
    h = L.fc(input=x, size=5, act=A.Linear(), bias_attr=False)
    return x, L.batch_norm(input=h, act=A.Linear(), moving_average_fraction=0.8)


def _bn_input(image, xs, v):
    """The batch norm's input as (N, C, pixels)."""
    if image:
        return xs.reshape(len(xs), 3, 8)
    w = [k for k in v if k.endswith(".w0") and "fc_layer" in k][0]
    return (xs @ v[w])[:, :, None]


@pytest.mark.parametrize("image", [True, False], ids=["image", "vector"])
def test_batch_norm_training_normalises_with_the_batch_statistics(image, rng):
    x, bn = _bn_graph(image)
    params = P.create(bn)
    name = bn.name
    assert [params.get_shape(f"_{name}.{k}") for k in ("w0", "wbias", "w1", "w2")] == \
        [(1, bn.size if not image else 3)] * 4
    v = randomize(params, rng)
    params.set(f"_{name}.w1", np.zeros((1, params.get_shape(f"_{name}.w1")[1])))
    params.set(f"_{name}.w2", np.ones((1, params.get_shape(f"_{name}.w2")[1])))
    xs = rng.normal(1.0, 2.0, size=(6, x.size))
    got, = run([bn], params, [(r,) for r in xs], ["x"], train=True)
    z = _bn_input(image, xs, v)
    mean = z.mean(axis=(0, 2))
    var = (z ** 2).mean(axis=(0, 2)) - mean ** 2         # calMeanAndStd: E[x^2] - E[x]^2
    y = (z - mean[:, None]) / np.sqrt(var[:, None] + 1e-5)
    y = y * v[f"_{name}.w0"].reshape(-1, 1) + v[f"_{name}.wbias"].reshape(-1, 1)
    assert_close(np.asarray(got).reshape(len(xs), -1), y.reshape(len(xs), -1), atol=1e-5)
    # calMovingMeanAndVar: moving = moving * fraction + batch * (1 - fraction)
    assert_close(params.get(f"_{name}.w1").reshape(-1), 0.8 * 0 + 0.2 * mean, atol=1e-6)


def test_batch_norm_moving_variance_is_the_biased_batch_variance(rng):
    x, bn = _bn_graph(True)
    params = P.create(bn)
    randomize(params, rng)
    params.set(f"_{bn.name}.w2", np.ones((1, 3)))
    xs = rng.normal(1.0, 2.0, size=(4, x.size))
    run([bn], params, [(r,) for r in xs], ["x"], train=True)
    z = xs.reshape(4, 3, 8)
    var = z.var(axis=(0, 2))
    assert_close(params.get(f"_{bn.name}.w2").reshape(-1), 0.8 * 1.0 + 0.2 * var, atol=1e-6)


def test_batch_norm_at_test_time_uses_the_moving_statistics(rng):
    x, bn = _bn_graph(True)
    params = P.create(bn)
    v = randomize(params, rng)
    mm = rng.normal(size=(1, 3))
    mv = rng.uniform(0.5, 2.0, size=(1, 3))
    params.set(f"_{bn.name}.w1", mm)
    params.set(f"_{bn.name}.w2", mv)
    xs = rng.normal(size=(3, x.size))
    got, = run([bn], params, [(r,) for r in xs], ["x"])
    z = xs.reshape(3, 3, 8)
    y = (z - mm.reshape(-1, 1)) / np.sqrt(mv.reshape(-1, 1) + 1e-5)
    y = y * v[f"_{bn.name}.w0"].reshape(-1, 1) + v[f"_{bn.name}.wbias"].reshape(-1, 1)
    assert_close(np.asarray(got).reshape(3, -1), y.reshape(3, -1), atol=1e-5)
    assert_close(params.get(f"_{bn.name}.w1"), mm, atol=1e-7)     # left unchanged


def test_batch_norm_use_global_stats_applies_only_at_test_time(rng):
    x = L.data(name="x", type=T.dense_vector(4))
    bn = L.batch_norm(input=x, num_channels=None, act=A.Linear(), use_global_stats=True)
    params = P.create(bn)
    params.set(f"_{bn.name}.w0", np.ones((1, 4)))
    params.set(f"_{bn.name}.wbias", np.zeros((1, 4)))
    xs = rng.normal(3.0, 2.0, size=(5, 4))
    got, = run([bn], params, [(r,) for r in xs], ["x"], train=True)
    want = (xs - xs.mean(0)) / np.sqrt(xs.var(0) + 1e-5)
    assert_close(got, want, atol=1e-5)


# ---- sequences ---------------------------------------------------------------------------

@pytest.mark.parametrize("kind", ["max", "avg", "sum"])
def test_sequence_pooling_reduces_each_sequences_steps(kind, rng):
    x = L.data(name="x", type=T.dense_vector_sequence(3))
    pool_type = {"max": POOL.Max(), "avg": POOL.Avg(), "sum": POOL.Sum()}[kind]
    p = L.pooling(input=x, pooling_type=pool_type)
    params = P.create(p)
    seqs = [rng.normal(-2.0, 1.0, size=(n, 3)) for n in seq_lengths(rng, 5)]  # all negative:
    got, = run([p], params, [(s,) for s in seqs], ["x"])                     # padding != 0
    fn = {"max": np.max, "avg": np.mean, "sum": np.sum}[kind]
    assert_close(got, np.stack([fn(s, axis=0) for s in seqs]))


def test_sequence_pooling_defaults_to_max(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    p = L.pooling(input=x)
    seqs = [rng.normal(-3.0, 1.0, size=(n, 2)) for n in seq_lengths(rng, 3)]
    got, = run([p], P.create(p), [(s,) for s in seqs], ["x"])
    assert_close(got, np.stack([s.max(axis=0) for s in seqs]))


def test_last_seq_and_first_seq_pick_each_sequences_end(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(3))
    last, first = L.last_seq(input=x), L.first_seq(input=x)
    params = P.create([last, first])
    seqs = [rng.normal(size=(n, 3)) for n in seq_lengths(rng, 5)]
    got_last, got_first = run([last, first], params, [(s,) for s in seqs], ["x"])
    assert_close(got_last, np.stack([s[-1] for s in seqs]))
    assert_close(got_first, np.stack([s[0] for s in seqs]))


@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstmemory_matches_paddles_lstm_cell(reverse, bias, rng):
    s = 3
    x = L.data(name="x", type=T.dense_vector_sequence(4 * s))
    lstm = L.lstmemory(input=x, reverse=reverse, bias_attr=None if bias else False)
    assert lstm.size == s
    params = P.create(lstm)
    assert sorted(params.names()) == sorted([f"_{lstm.name}.w0"]
                                            + ([f"_{lstm.name}.wbias"] if bias else []))
    v = randomize(params, rng)
    if bias:
        assert params.get_shape(f"_{lstm.name}.wbias") == (1, 7 * s)
    w = v[f"_{lstm.name}.w0"].reshape(s, 4 * s)
    b = v[f"_{lstm.name}.wbias"].reshape(-1) if bias else None
    seqs = [rng.normal(size=(n, 4 * s)) for n in seq_lengths(rng, 4)]
    got, = run([lstm], params, [(q,) for q in seqs], ["x"])
    for g, q in zip(got, seqs):
        assert_close(g, lstm_ref(q, w, b, reverse), atol=REC_ATOL)


def test_lstmemory_weight_has_v2s_dims():
    x = L.data(name="x", type=T.dense_vector_sequence(8))
    lstm = L.lstmemory(input=x)
    params = P.create(lstm)
    assert params.get_shape(f"_{lstm.name}.w0") == (2, 2, 4)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_grumemory_matches_paddles_gru_cell(reverse, rng):
    s = 3
    x = L.data(name="x", type=T.dense_vector_sequence(3 * s))
    gru = L.grumemory(input=x, reverse=reverse)
    assert gru.size == s
    params = P.create(gru)
    assert params.get_shape(f"_{gru.name}.w0") == (s, 3 * s)
    assert params.get_shape(f"_{gru.name}.wbias") == (1, 3 * s)
    v = randomize(params, rng)
    w = v[f"_{gru.name}.w0"].reshape(-1)
    b = v[f"_{gru.name}.wbias"].reshape(-1)
    seqs = [rng.normal(size=(n, 3 * s)) for n in seq_lengths(rng, 4)]
    got, = run([gru], params, [(q,) for q in seqs], ["x"])
    for g, q in zip(got, seqs):
        assert_close(g, gru_ref(q, w, b, reverse), atol=REC_ATOL)


@pytest.mark.parametrize("length,start", [(3, None), (3, -1), (2, 0), (4, -3), (5, 1)])
def test_context_projection_concatenates_neighbour_steps(length, start, rng):
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    ctx = L.context_projection(input=x, context_len=length, context_start=start)
    assert ctx.size == 2 * length
    params = P.create(ctx)
    assert params.names() == []
    seqs = [rng.normal(size=(n, 2)) for n in seq_lengths(rng, 4)]
    got, = run([ctx], params, [(q,) for q in seqs], ["x"])
    first = -((length - 1) // 2) if start is None else start      # odd lengths: no ambiguity
    for g, q in zip(got, seqs):
        assert_close(g, context_ref(q, length, first))


def test_context_projection_default_start_for_an_even_length(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    ctx = L.context_projection(input=x, context_len=4)
    params = P.create(ctx)
    seqs = [rng.normal(size=(n, 2)) for n in seq_lengths(rng, 3)]
    got, = run([ctx], params, [(q,) for q in seqs], ["x"])
    for g, q in zip(got, seqs):
        assert_close(g, context_ref(q, 4, -2))


def test_sequence_conv_pool_is_context_fc_and_max_pooling(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(3))
    out = N.sequence_conv_pool(input=x, context_len=3, hidden_size=4, name="scp")
    assert out.name == "scp"
    names = [op.name for op in L.parse_network(out)]
    assert names == ["x", "scp_conv_proj", "scp_conv_fc", "scp"]
    params = P.create(out)
    assert sorted(params.names()) == ["_scp_conv_fc.w0", "_scp_conv_fc.wbias"]
    v = randomize(params, rng)
    seqs = [rng.normal(size=(n, 3)) for n in seq_lengths(rng, 4)]
    got, = run([out], params, [(q,) for q in seqs], ["x"])
    want = [np.tanh(context_ref(q, 3, -1) @ v["_scp_conv_fc.w0"] + v["_scp_conv_fc.wbias"])
            .max(axis=0) for q in seqs]
    assert_close(got, np.stack(want))


# ---- costs -------------------------------------------------------------------------------

def _scores_graph(act):
    x = L.data(name="x", type=T.dense_vector(4))
    y = L.data(name="y", type=T.integer_value(5))
    return x, y, L.fc(input=x, size=5, act=act)


def test_classification_cost_is_minus_log_softmax_of_the_label(rng):
    x, y, out = _scores_graph(A.Softmax())
    cost = L.classification_cost(input=out, label=y)
    params = P.create(cost)
    v = randomize(params, rng, scale=1.5)
    xs, ys = rng.normal(size=(6, 4)), rng.integers(0, 5, 6)
    got, = run([cost], params, [(a, int(b)) for a, b in zip(xs, ys)], ["x", "y"])
    z = xs @ v[f"_{out.name}.w0"] + v[f"_{out.name}.wbias"]
    assert_close(got, -log_softmax(z)[np.arange(6), ys])


def test_cross_entropy_cost_of_probabilities_that_are_not_a_softmax(rng):
    x, y, out = _scores_graph(A.Sigmoid())
    cost = L.cross_entropy_cost(input=out, label=y)
    params = P.create(cost)
    v = randomize(params, rng)
    xs, ys = rng.normal(size=(6, 4)), rng.integers(0, 5, 6)
    got, = run([cost], params, [(a, int(b)) for a, b in zip(xs, ys)], ["x", "y"])
    p = _np_sigmoid(xs @ v[f"_{out.name}.w0"] + v[f"_{out.name}.wbias"])
    assert_close(got, -np.log(p[np.arange(6), ys]))       # oneHotCrossEntropy: -log(p[label])


def test_classification_cost_with_a_weight_scales_each_samples_cost(rng):
    x, y, out = _scores_graph(A.Softmax())
    wt = L.data(name="wt", type=T.dense_vector(1))
    cost = L.classification_cost(input=out, label=y, weight=wt)
    params = P.create(cost)
    v = randomize(params, rng)
    xs, ys, ws = rng.normal(size=(4, 4)), rng.integers(0, 5, 4), rng.uniform(0, 2, 4)
    got, = run([cost], params, [(a, int(b), [c]) for a, b, c in zip(xs, ys, ws)],
               ["x", "y", "wt"])
    z = xs @ v[f"_{out.name}.w0"] + v[f"_{out.name}.wbias"]
    assert_close(got, -log_softmax(z)[np.arange(4), ys] * ws)


def test_square_error_cost_is_the_plain_sum_of_squares(rng):
    x = L.data(name="x", type=T.dense_vector(3))
    y = L.data(name="y", type=T.dense_vector(3))
    cost = L.square_error_cost(input=x, label=y)
    xs, ys = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    got, = run([cost], P.create(cost), list(zip(xs, ys)), ["x", "y"])
    assert_close(got, ((xs - ys) ** 2).sum(axis=1))      # sumOfSquares: no factor 1/2


def test_cost_coeff_scales_the_gradient(rng):
    """CostLayer::backward adds coeff to the output gradient, so an SGD step on a cost with
    coeff 2.5 moves every parameter 2.5 times as far (the trainer applies coeff)."""
    import hl.v2 as paddle
    samples = [(a.astype(np.float32), b.astype(np.float32))
               for a, b in zip(rng.normal(size=(4, 3)), rng.normal(size=(4, 2)))]
    moves = []
    for coeff in (1.0, 2.5):
        x = L.data(name="x", type=T.dense_vector(3))
        y = L.data(name="y", type=T.dense_vector(2))
        h = L.fc(input=x, size=2, act=A.Linear(), name=f"h{coeff}")
        cost = L.square_error_cost(input=h, label=y, coeff=coeff)
        params = P.create(cost)
        randomize(params, np.random.default_rng(7))
        before = {n: params.get(n) for n in params}
        trainer = paddle.trainer.SGD(cost, params, paddle.optimizer.Momentum(
            momentum=0, learning_rate=0.01))
        trainer.train(paddle.batch(lambda: iter(samples), 4), num_passes=1)
        moves.append([params.get(n) - before[n] for n in params])
    for m1, m2 in zip(*moves):
        assert_close(m2, 2.5 * m1, rtol=1e-4, atol=1e-6)


def test_cost_coeff_leaves_the_reported_cost_unscaled(rng):
    x = L.data(name="x", type=T.dense_vector(3))
    y = L.data(name="y", type=T.dense_vector(3))
    cost = L.square_error_cost(input=x, label=y, coeff=2.5)
    xs, ys = rng.normal(size=(5, 3)), rng.normal(size=(5, 3))
    got, = run([cost], P.create(cost), list(zip(xs, ys)), ["x", "y"])
    assert_close(got, ((xs - ys) ** 2).sum(axis=1))


# ---- gradients against torch autograd ----------------------------------------------------

def _leaves(torch, values):
    return {k: torch.tensor(a, dtype=torch.float64, requires_grad=True)
            for k, a in values.items()}


def _compare_grads(torch_total, leaves, hl_grads):
    torch_total.backward()
    assert set(hl_grads) == set(leaves)
    for name, t in leaves.items():
        assert_close(hl_grads[name], t.grad.numpy(), rtol=G_RTOL, atol=G_ATOL, what=name)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_lstm_stack_gradients_match_torch(reverse, rng):
    torch, ops = torch_ops()
    s = 3
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    y = L.data(name="y", type=T.integer_value(3))
    proj = L.fc(input=x, size=4 * s, act=A.Linear())
    lstm = L.lstmemory(input=proj, reverse=reverse)
    pooled = L.first_seq(input=lstm) if reverse else L.last_seq(input=lstm)
    out = L.fc(input=pooled, size=3, act=A.Softmax())
    cost = L.classification_cost(input=out, label=y)
    params = P.create(cost)
    values = randomize(params, rng)
    seqs = [rng.normal(size=(n, 2)) for n in seq_lengths(rng, 4, high=5)]
    ys = rng.integers(0, 3, 4)
    got, grads = cost_and_grads(cost, params, [(q, int(c)) for q, c in zip(seqs, ys)],
                                ["x", "y"])
    p = _leaves(torch, values)
    costs = []
    for q, c in zip(seqs, ys):
        z = torch.tensor(q) @ p[f"_{proj.name}.w0"] + p[f"_{proj.name}.wbias"][0]
        h = lstm_ref(z, p[f"_{lstm.name}.w0"].reshape(s, 4 * s),
                     p[f"_{lstm.name}.wbias"].reshape(-1), reverse, ops)
        logits = h[0 if reverse else -1] @ p[f"_{out.name}.w0"] + p[f"_{out.name}.wbias"][0]
        costs.append(-torch.log_softmax(logits, dim=0)[int(c)])
    costs = torch.stack(costs)
    assert_close(got, costs.detach().numpy(), atol=REC_ATOL)
    _compare_grads(costs.sum(), p, grads)


@pytest.mark.parametrize("reverse", [False, True], ids=["forward", "reverse"])
def test_gru_stack_gradients_match_torch(reverse, rng):
    torch, ops = torch_ops()
    s = 3
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    y = L.data(name="y", type=T.integer_value(3))
    proj = L.fc(input=x, size=3 * s, act=A.Linear(), bias_attr=False)
    gru = L.grumemory(input=proj, reverse=reverse)
    pooled = L.pooling(input=gru, pooling_type=POOL.Avg())
    out = L.fc(input=pooled, size=3, act=A.Softmax())
    cost = L.classification_cost(input=out, label=y)
    params = P.create(cost)
    values = randomize(params, rng)
    seqs = [rng.normal(size=(n, 2)) for n in seq_lengths(rng, 4, high=5)]
    ys = rng.integers(0, 3, 4)
    got, grads = cost_and_grads(cost, params, [(q, int(c)) for q, c in zip(seqs, ys)],
                                ["x", "y"])
    p = _leaves(torch, values)
    costs = []
    for q, c in zip(seqs, ys):
        z = torch.tensor(q) @ p[f"_{proj.name}.w0"]
        h = gru_ref(z, p[f"_{gru.name}.w0"].reshape(-1), p[f"_{gru.name}.wbias"].reshape(-1),
                    reverse, ops)
        logits = h.mean(dim=0) @ p[f"_{out.name}.w0"] + p[f"_{out.name}.wbias"][0]
        costs.append(-torch.log_softmax(logits, dim=0)[int(c)])
    costs = torch.stack(costs)
    assert_close(got, costs.detach().numpy(), atol=REC_ATOL)
    _compare_grads(costs.sum(), p, grads)


@pytest.mark.parametrize("kind", ["max", "avg"])
def test_conv_pool_fc_cost_gradients_match_torch(kind, rng):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    c, h, w = 4, 5, 7
    img = L.data(name="img", type=T.dense_vector(c * h * w), height=h, width=w)
    y = L.data(name="y", type=T.integer_value(3))
    conv = L.img_conv(input=img, filter_size=3, num_filters=4, num_channels=c, padding=1,
                      groups=2, act=A.Relu())
    pool = L.img_pool(input=conv, pool_size=2, stride=2,
                      pool_type=POOL.Max() if kind == "max" else POOL.Avg())
    assert pool.size == 4 * 3 * 4                     # ceil mode: 5x7 -> 3x4
    out = L.fc(input=pool, size=3, act=A.Softmax())
    cost = L.classification_cost(input=out, label=y)
    params = P.create(cost)
    values = randomize(params, rng)
    xs, ys = rng.normal(size=(3, c * h * w)), rng.integers(0, 3, 3)
    got, grads = cost_and_grads(cost, params, [(a, int(b)) for a, b in zip(xs, ys)],
                                ["img", "y"])
    p = _leaves(torch, values)
    z = F.conv2d(torch.tensor(xs.reshape(3, c, h, w)),
                 p[f"_{conv.name}.w0"].reshape(4, 2, 3, 3), p[f"_{conv.name}.wbias"].reshape(-1),
                 padding=1, groups=2).relu()
    z = (F.max_pool2d(z, 2, 2, ceil_mode=True) if kind == "max" else
         F.avg_pool2d(z, 2, 2, ceil_mode=True, count_include_pad=False))
    logits = z.reshape(3, -1) @ p[f"_{out.name}.w0"] + p[f"_{out.name}.wbias"]
    costs = -torch.log_softmax(logits, dim=1)[torch.arange(3), torch.tensor(ys)]
    assert_close(got, costs.detach().numpy(), atol=1e-5)
    _compare_grads(costs.sum(), p, grads)


def test_batch_norm_gradients_match_torch(rng):
    torch = pytest.importorskip("torch")
    x = L.data(name="x", type=T.dense_vector(2 * 3 * 3), height=3, width=3)
    y = L.data(name="y", type=T.dense_vector(2))
    bn = L.batch_norm(input=x, num_channels=2, act=A.Relu())
    out = L.fc(input=bn, size=2, act=A.Linear())
    cost = L.square_error_cost(input=out, label=y)
    params = P.create(cost)
    values = randomize(params, rng)
    for k in (".w1", ".w2"):
        params.set(f"_{bn.name}{k}", np.ones((1, 2)))
        values.pop(f"_{bn.name}{k}")                   # static: no gradient
    xs, ys = rng.normal(size=(5, 18)), rng.normal(size=(5, 2))
    got, grads = cost_and_grads(cost, params, list(zip(xs, ys)), ["x", "y"])
    p = _leaves(torch, values)
    z = torch.tensor(xs.reshape(5, 2, 3, 3))
    mean = z.mean(dim=(0, 2, 3), keepdim=True)
    var = ((z - mean) ** 2).mean(dim=(0, 2, 3), keepdim=True)
    zn = (z - mean) / torch.sqrt(var + 1e-5)
    zn = zn * p[f"_{bn.name}.w0"].reshape(1, 2, 1, 1) + p[f"_{bn.name}.wbias"].reshape(1, 2, 1, 1)
    o = zn.relu().reshape(5, -1) @ p[f"_{out.name}.w0"] + p[f"_{out.name}.wbias"]
    costs = ((o - torch.tensor(ys)) ** 2).sum(dim=1)
    assert_close(got, costs.detach().numpy(), atol=1e-5)
    _compare_grads(costs.sum(), p, grads)


# ---- v2's default names ------------------------------------------------------------------

def _x():
    return L.data(name="x", type=T.dense_vector(4))


def _s():
    return L.data(name="s", type=T.dense_vector_sequence(4))


def _lbl():
    return L.data(name="lbl", type=T.integer_value(4))


NAMED = {  # builder, and the prefix trainer_config_helpers' wrap_name_default gives it
    "fc": (lambda: L.fc(input=_x(), size=2), "fc_layer"),
    "embedding": (lambda: L.embedding(input=_lbl(), size=2), "embedding"),
    "concat": (lambda: L.concat(input=[_x(), _x()]), "concat"),
    "addto": (lambda: L.addto(input=[_x(), _x()]), "addto"),
    "dropout": (lambda: L.dropout(input=_x(), dropout_rate=0.5), "dropout"),
    "max_id": (lambda: L.max_id(input=_x()), "maxid_layer"),
    "img_conv": (lambda: L.img_conv(input=_x(), filter_size=1, num_filters=1), "conv"),
    "img_pool": (lambda: L.img_pool(input=_x(), pool_size=1), "pool"),
    "batch_norm": (lambda: L.batch_norm(input=_x()), "batch_norm"),
    "pooling": (lambda: L.pooling(input=_s()), "seq_pooling"),
    "lstmemory": (lambda: L.lstmemory(input=_s()), "lstmemory"),
    "grumemory": (lambda: L.grumemory(input=L.data(name="g", type=T.dense_vector_sequence(6))),
                  "gru"),
    "classification_cost": (lambda: L.classification_cost(
        input=L.fc(input=_x(), size=4, act=A.Softmax()), label=_lbl()), "cost"),
    # wrap_name_default() without a prefix takes the v1 function's own name
    "last_seq": (lambda: L.last_seq(input=_s()), "last_seq"),
    "first_seq": (lambda: L.first_seq(input=_s()), "first_seq"),
    "cross_entropy_cost": (lambda: L.cross_entropy_cost(
        input=L.fc(input=_x(), size=4, act=A.Softmax()), label=_lbl()), "cross_entropy"),
    "square_error_cost": (lambda: L.square_error_cost(input=_x(), label=_x()),
                          "square_error_cost"),
}

@pytest.mark.parametrize("kind", list(NAMED))
def test_default_names_count_per_prefix(kind):
    build, prefix = NAMED[kind]
    first, second = build(), build()
    n = default_index(first.name, prefix)
    assert default_index(second.name, prefix) == n + 1


def test_default_name_counters_are_separate_per_prefix():
    a = L.fc(input=_x(), size=2)
    p = L.img_pool(input=_x(), pool_size=1)
    b = L.fc(input=_x(), size=2)
    q = L.img_pool(input=_x(), pool_size=1)
    assert default_index(b.name, "fc_layer") == default_index(a.name, "fc_layer") + 1
    assert default_index(q.name, "pool") == default_index(p.name, "pool") + 1


def test_parameter_names_follow_the_layer_names():
    x = _x()
    fc = L.fc(input=[x, x], size=3)
    named = L.fc(input=x, size=3, name="hidden")
    params = P.create([fc, named])
    assert params.names() == [f"_{fc.name}.w0", f"_{fc.name}.w1", f"_{fc.name}.wbias",
                              "_hidden.w0", "_hidden.wbias"]
    assert fc.name.startswith("__fc_layer_") and f"_{fc.name}.w0".startswith("___fc_layer_")
    custom = L.fc(input=x, size=3, param_attr=paddle_attr.Param(name="my_w"),
                  bias_attr=paddle_attr.Param(name="my_b"))
    assert P.create(custom).names() == ["my_w", "my_b"]


def test_simple_img_conv_pool_names_its_layers():
    img = L.data(name="img", type=T.dense_vector(1 * 6 * 6))
    out = N.simple_img_conv_pool(input=img, filter_size=3, num_filters=2, pool_size=2,
                                 pool_stride=2, name="cp")
    assert out.name == "cp_pool"
    assert [op.name for op in L.parse_network(out)] == ["img", "cp_conv", "cp_pool"]
    assert P.create(out).names() == ["_cp_conv.w0", "_cp_conv.wbias"]
    a = N.simple_img_conv_pool(input=img, filter_size=3, num_filters=2, pool_size=2)
    b = N.simple_img_conv_pool(input=img, filter_size=3, num_filters=2, pool_size=2)
    m = re.fullmatch(r"(__conv_pool_(\d+)__)_pool", a.name)
    assert m and b.name == f"__conv_pool_{int(m.group(2)) + 1}___pool"
    assert a.parents[0].name == f"{m.group(1)}_conv"


def test_simple_lstm_names_its_projection():
    x = _s()
    out = N.simple_lstm(input=x, size=3, name="enc")
    assert out.name == "enc"
    proj = out.parents[0]
    assert proj.name == "lstm_transform_enc" and proj.size == 12
    assert sorted(P.create(out).names()) == ["_enc.w0", "_enc.wbias", "_lstm_transform_enc.w0"]
    a, b = N.simple_lstm(input=x, size=2), N.simple_lstm(input=x, size=2)
    assert default_index(b.name, "lstm") == default_index(a.name, "lstm") + 1
    assert a.parents[0].name == f"lstm_transform_{a.name}"


def test_simple_lstm_is_a_projection_then_lstmemory(rng):
    x = L.data(name="x", type=T.dense_vector_sequence(2))
    out = N.simple_lstm(input=x, size=2, name="sl", reverse=True)
    params = P.create(out)
    v = randomize(params, rng)
    seqs = [rng.normal(size=(n, 2)) for n in seq_lengths(rng, 3)]
    got, = run([out], params, [(q,) for q in seqs], ["x"])
    for g, q in zip(got, seqs):
        want = lstm_ref(q @ v["_lstm_transform_sl.w0"], v["_sl.w0"].reshape(2, 8),
                        v["_sl.wbias"].reshape(-1), True)
        assert_close(g, want, atol=REC_ATOL)
