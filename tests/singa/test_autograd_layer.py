"""hl.singa.autograd and layer against SINGA's documented behaviour (python/singa/autograd.py
and layer.py): values from numpy formulas, gradients by finite differences (float64 central
differences on the float32 ops, tolerance 2e-3 relative)."""
import numpy as np
import pytest

import hl
from hl import errors
from hl.singa import autograd, layer, singa_wrap, tensor


def t(a, requires_grad=True, stores_grad=False):
    x = tensor.from_numpy(np.asarray(a, np.float32))
    x.requires_grad, x.stores_grad = requires_grad, stores_grad
    return x


def num_grad(f, a, eps=1e-3):
    """d(sum(f(a)))/da by central differences, on float64 copies fed as float32."""
    g = np.zeros_like(a, dtype=np.float64)
    for i in np.ndindex(a.shape):
        d = np.zeros_like(a)
        d[i] = eps
        g[i] = (np.sum(f(a + d), dtype=np.float64) - np.sum(f(a - d), dtype=np.float64)) / (2 * eps)
    return g


def grads_of(loss, *params):
    got = {id(p): g for p, g in autograd.backward(loss)}
    return [tensor.to_numpy(got[id(p)]) for p in params]


# ---- functions: values ------------------------------------------------------------------------

def test_elementwise_functions_match_numpy(rng):
    a = rng.uniform(-0.9, 0.9, (3, 4)).astype(np.float32)
    b = rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    x, y = t(a), t(b)
    close = np.testing.assert_allclose
    cases = {autograd.relu: np.maximum(a, 0), autograd.tanh: np.tanh(a),
             autograd.sigmoid: 1 / (1 + np.exp(-a)), autograd.exp: np.exp(a),
             autograd.abs: np.abs(a), autograd.sign: np.sign(a), autograd.cos: np.cos(a),
             autograd.sin: np.sin(a), autograd.tan: np.tan(a), autograd.asin: np.arcsin(a),
             autograd.acos: np.arccos(a), autograd.atan: np.arctan(a),
             autograd.atanh: np.arctanh(a), autograd.sinh: np.sinh(a),
             autograd.cosh: np.cosh(a), autograd.asinh: np.arcsinh(a),
             autograd.softsign: a / (1 + np.abs(a)), autograd.softplus: np.log1p(np.exp(a)),
             autograd.negative: -a, autograd.identity: a, autograd.ceil: np.ceil(a),
             autograd.floor: np.floor(a),
             autograd.round: np.sign(a) * np.floor(np.abs(a) + 0.5)}   # SINGA: half away
    for f, want in cases.items():
        close(tensor.to_numpy(f(x)), want, rtol=1e-5, atol=1e-6, err_msg=f.__name__)
    close(tensor.to_numpy(autograd.acosh(y + 1.0)), np.arccosh(b + 1), rtol=1e-5)
    close(tensor.to_numpy(autograd.sqrt(y)), np.sqrt(b), rtol=1e-6)
    close(tensor.to_numpy(autograd.log(y)), np.log(b), rtol=1e-5, atol=1e-6)
    close(tensor.to_numpy(autograd.reciprocal(y)), 1 / b, rtol=1e-6)
    close(tensor.to_numpy(autograd.rounde(t([0.5, 1.5, 2.5, -0.5]))), [0, 2, 2, -0.0])
    close(tensor.to_numpy(autograd.leakyrelu(x, 0.1)), np.where(a > 0, a, 0.1 * a), rtol=1e-6)
    close(tensor.to_numpy(autograd.elu(x, 2.0)), np.where(a > 0, a, 2 * (np.exp(a) - 1)),
          rtol=1e-5, atol=1e-6)
    close(tensor.to_numpy(autograd.selu(x)),
          1.0507 * np.where(a > 0, a, 1.67326 * (np.exp(a) - 1)), rtol=1e-4, atol=1e-6)
    close(tensor.to_numpy(autograd.hardsigmoid(x, 0.2, 0.5)), np.clip(0.2 * a + 0.5, 0, 1))
    close(tensor.to_numpy(autograd.clip(x, -0.3, 0.4)), np.clip(a, -0.3, 0.4))
    close(tensor.to_numpy(autograd.prelu(x, t(np.full((3, 4), 0.25)))),
          np.where(a < 0, 0.25 * a, a), rtol=1e-6)
    for f, g in ((autograd.add, np.add), (autograd.sub, np.subtract),
                 (autograd.mul, np.multiply), (autograd.div, np.divide)):
        close(tensor.to_numpy(f(x, y)), g(a, b), rtol=1e-6)
    close(tensor.to_numpy(autograd.pow(y, x)), b ** a, rtol=1e-5)
    close(tensor.to_numpy(autograd.sum(x, y, x)), 2 * a + b, rtol=1e-6)
    close(tensor.to_numpy(autograd.mean(x, y)), (a + b) / 2, rtol=1e-6)
    close(tensor.to_numpy(autograd.max(x, y, t(-b))), np.maximum(np.maximum(a, b), -b))
    close(tensor.to_numpy(autograd.min(x, y)), np.minimum(a, b))
    for f, g in ((autograd.less, np.less), (autograd.greater, np.greater),
                 (autograd.equal, np.equal)):
        r = f(x, y)
        assert r.dtype is tensor.float32                    # SINGA: 0/1 floats
        np.testing.assert_array_equal(tensor.to_numpy(r), g(a, b).astype(np.float32))
    p, q = t([[1, 0], [0, 1]]), t([[1, 1], [0, 0]])
    np.testing.assert_array_equal(tensor.to_numpy(autograd._and(p, q)), [[1, 0], [0, 0]])
    np.testing.assert_array_equal(tensor.to_numpy(autograd._or(p, q)), [[1, 1], [0, 1]])
    np.testing.assert_array_equal(tensor.to_numpy(autograd._xor(p, q)), [[0, 1], [0, 1]])
    np.testing.assert_array_equal(tensor.to_numpy(autograd._not(p)), [[0, 1], [1, 0]])
    cond = [[True, False, True, False]] * 3
    close(tensor.to_numpy(autograd.where(x, y, cond)), np.where(cond, a, b))
    close(tensor.to_numpy(autograd.erf(x)),
          np.vectorize(__import__("math").erf)(a).astype(np.float32), rtol=1e-5, atol=1e-6)


def test_shape_functions_match_numpy(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    x = t(a)
    close = np.testing.assert_array_equal
    close(tensor.to_numpy(autograd.reshape(x, [0, -1])), a.reshape(2, 12))  # 0 keeps a size
    close(tensor.to_numpy(autograd.flatten(x, 2)), a.reshape(6, 4))
    close(tensor.to_numpy(autograd.flatten(x)), a.reshape(2, 12))
    close(tensor.to_numpy(autograd.transpose(x, (2, 0, 1))), a.transpose(2, 0, 1))
    assert autograd.unsqueeze(x, [0, 4]).shape == (1, 2, 3, 4, 1)
    assert autograd.squeeze(t(a[:1, :, :1])).shape == (3,)
    assert autograd.squeeze(t(a[:1, :, :1]), [0]).shape == (3, 1)
    close(tensor.to_numpy(autograd.cat([x, x], 1)), np.concatenate([a, a], 1))
    parts = autograd.split(x, 2, [1, 3])
    close(tensor.to_numpy(parts[1]), a[:, :, 1:])
    close(tensor.to_numpy(autograd.slice(x, [0, 1], [2, 3], [1, 2], [1, 1])), a[:, 0:2, 1:3])
    close(tensor.to_numpy(autograd.gather(x, 1, [0, 2, -1])), np.take(a, [0, 2, 2], 1))
    close(tensor.to_numpy(autograd.gather(x, 1, [3])), np.take(a, [0], 1))  # SINGA: modulo
    close(tensor.to_numpy(autograd.tile(x, [1, 2, 1])), np.tile(a, [1, 2, 1]))
    close(tensor.to_numpy(autograd.expand(t(a[:, :1]), [2, 3, 4])),
          np.broadcast_to(a[:, :1], (2, 3, 4)))
    close(tensor.to_numpy(autograd.pad(x, "constant", [0, 1, 0, 0, 0, 2], 5.0)),
          np.pad(a, [(0, 0), (1, 0), (0, 2)], constant_values=5))
    close(tensor.to_numpy(autograd.shape(x)), [2, 3, 4])
    close(tensor.to_numpy(autograd.constant_of_shape(t([2, 3]), 1.5)), np.full((2, 3), 1.5))
    m = [[1, 0], [0, 2]]
    close(tensor.to_numpy(autograd.nonzero(t(m))), np.array(np.nonzero(m)))
    close(tensor.to_numpy(autograd.cast(x, tensor.int32)), a.astype(np.int32))
    oh = autograd.onehot(-1, t([1, 3]), 4, [0.5, 2.0])     # ONNX OneHot: [off, on]
    close(tensor.to_numpy(oh), [[0.5, 2, 0.5, 0.5], [0.5, 0.5, 0.5, 2]])
    img = rng.standard_normal((1, 8, 2, 3)).astype(np.float32)
    d2s = tensor.to_numpy(autograd.depth_to_space(t(img), 2, "DCR"))  # ONNX DepthToSpace DCR
    ref = img.reshape(1, 2, 2, 2, 2, 3).transpose(0, 3, 4, 1, 5, 2).reshape(1, 2, 4, 6)
    close(d2s, ref)
    close(tensor.to_numpy(autograd.space_to_depth(t(ref), 2, "DCR")), img)
    up = autograd.upsample(t(img[:, :1]), "nearest", [1, 1, 2, 3])
    close(tensor.to_numpy(up), img[:, :1].repeat(2, 2).repeat(3, 3))
    np.testing.assert_allclose(tensor.to_numpy(autograd.globalaveragepool(t(img))),
                               img.mean((2, 3), keepdims=True), rtol=1e-5, atol=1e-7)
    data = t(np.zeros((3, 3)))
    out = autograd.scatter_elements(data, [[1, 0, 2], [0, 2, 1]],
                                    [[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]])
    np.testing.assert_allclose(tensor.to_numpy(out),
                               [[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]])
    w = rng.standard_normal((5, 3)).astype(np.float32)
    close(tensor.to_numpy(autograd.embedding(t([[0, 4], [2, 2]]), t(w))), w[[[0, 4], [2, 2]]])


def test_matrix_functions(rng):
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((3, 4), (4, 5), (3, 5)))
    np.testing.assert_allclose(tensor.to_numpy(autograd.matmul(t(a), t(b))), a @ b, rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(
        tensor.to_numpy(autograd.gemm(t(a.T), t(b), t(c), 0.5, 2.0, transA=1)),
        0.5 * a @ b + 2 * c, rtol=1e-5, atol=1e-5)
    bias = rng.standard_normal(4).astype(np.float32)
    np.testing.assert_allclose(tensor.to_numpy(autograd.add_bias(t(a), t(bias), 0)), a + bias)
    np.testing.assert_allclose(tensor.to_numpy(autograd.add_bias(t(a), t(bias[:3]), 1)),
                               a + bias[:3, None])
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(tensor.to_numpy(autograd.softmax(t(a))),
                               e / e.sum(1, keepdims=True), rtol=1e-5)
    na = a / np.linalg.norm(a, axis=1, keepdims=True)
    nb = c[:, :4] / np.linalg.norm(c[:, :4], axis=1, keepdims=True)
    np.testing.assert_allclose(tensor.to_numpy(autograd.cossim(t(a), t(c[:, :4]))),
                               (na * nb).sum(1), rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(autograd.reduce_sum(t(a), [1], 0)), a.sum(1),
                               rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(autograd.reduce_mean(t(a), [0])),
                               a.mean(0, keepdims=True), rtol=1e-5, atol=1e-6)


# ---- losses: SINGA's formulas, (1,)-shaped ------------------------------------------------

def test_losses_follow_singas_formulas(rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    labels = np.array([0, 2, 1, 2])
    onehot = np.eye(3, dtype=np.float32)[labels]
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    want = -(onehot * logp).sum() / 4                      # summed, over the batch
    int_onehot = tensor.from_numpy(onehot.astype(np.int32))
    for target in (t(labels.astype(np.int32)), t(onehot), int_onehot):
        loss = autograd.softmax_cross_entropy(t(x), target)
        assert loss.shape == (1,)                          # SINGA's losses are (1,) tensors
        assert tensor.to_numpy(loss)[0] == pytest.approx(want, rel=1e-5)
    p = 1 / (1 + np.exp(-x))
    ce = autograd.cross_entropy(t(p), t(onehot))
    assert tensor.to_numpy(ce)[0] == pytest.approx(-(onehot * np.log(p)).sum() / 4, rel=1e-5)
    bce = autograd.binary_cross_entropy(t(p), t(onehot))   # SINGA's 1e-4 guards
    want = -(onehot * np.log(p + 1e-4) + (1 - onehot) * np.log(1.0001 - p)).sum() / 4
    assert tensor.to_numpy(bce)[0] == pytest.approx(want, rel=1e-5)
    y = rng.standard_normal((4, 3)).astype(np.float32)
    assert tensor.to_numpy(autograd.mse_loss(t(x), t(y)))[0] == \
        pytest.approx(((x - y) ** 2).mean(), rel=1e-5)
    with pytest.raises(errors.ShapeError):
        autograd.mse_loss(t(x), t(y[:, :2]))
    pos, neg = rng.standard_normal(5).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    rl = autograd.ranking_loss(t(pos), t(neg), 0.3)
    assert tensor.to_numpy(rl)[0] == pytest.approx(np.maximum(0, 0.3 - pos + neg).sum() / 5,
                                                   rel=1e-5)


# ---- gradients ----------------------------------------------------------------------------------

def test_gradients_by_finite_differences(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 2)).astype(np.float32)
    labels = np.array([1, 0, 1], np.int32)

    def loss_of(wv):
        x = t(a, requires_grad=False)
        p = t(wv, True, True)
        out = autograd.tanh(autograd.matmul(x, p))
        return autograd.softmax_cross_entropy(out, t(labels, False)), p

    loss, p = loss_of(w)
    (g,) = grads_of(loss, p)
    want = num_grad(lambda v: tensor.to_numpy(loss_of(v)[0]), w)
    np.testing.assert_allclose(g, want, rtol=2e-3, atol=2e-4)
    assert set(autograd.gradients(loss_of(w)[0])) and len(autograd.gradients(loss_of(w)[0])) == 1


def test_creator_backward_takes_and_gives_raw_tensors(rng):
    """SINGA's Operator.backward: raw tensors (CTensor) in and out, one per input that needs a
    gradient, and a gradient of ones when called without one."""
    a, b = (rng.standard_normal((3, 2)).astype(np.float32) for _ in range(2))
    y = autograd.add(t(a), t(b))
    dy = tensor.from_numpy(np.full((3, 2), 2.0, np.float32))
    dx0, dx1 = y.creator.backward(dy.data)
    assert isinstance(dx0, singa_wrap.Tensor) and dx0.shape() == (3, 2)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_raw_tensor(dx1)), np.full((3, 2), 2))
    r = autograd.relu(t(a))
    dx = r.creator.backward()
    np.testing.assert_array_equal(tensor.to_numpy(tensor.from_raw_tensor(dx)), (a > 0) * 1.0)
    conv = layer.Conv2d(2, 3, bias=False)                 # no bias: dx and dW only
    out = conv(tensor.Tensor((1, 1, 5, 5)).gaussian(0, 1))
    dx, dw = out.creator.backward(tensor.Tensor(out.shape).set_value(1).data)
    assert dx.shape() == (1, 1, 5, 5) and dw.shape() == (2, 1, 3, 3)


def test_creator_backward_of_functions_hl_composes(rng):
    """SINGA has one operator where hl composes several ops (n-ary mean/max/min, mse_loss,
    tile, cossim, prelu, depth_to_space): creator.backward still gives that operator's
    gradients, one per input (SINGA's MeanSquareError: dx only). Expected: the derivatives
    written out with numpy (SINGA's autograd.py formulas), cossim and prelu by central
    differences; and the gradients through autograd.backward are unchanged."""
    raw = tensor.from_raw_tensor
    a, b, c = (rng.uniform(-1, 1, (3, 4)).astype(np.float32) for _ in range(3))
    dyv = rng.uniform(0.5, 1.5, (3, 4)).astype(np.float32)
    dy = tensor.from_numpy(dyv).data
    y = autograd.mean(t(a), t(b), t(c))           # the result is kept, as SINGA's tests do
    for d in y.creator.backward(dy):
        np.testing.assert_allclose(tensor.to_numpy(raw(d)), dyv / 3, rtol=1e-6)
    top = np.argmax(np.stack([a, b, c]), axis=0)
    y = autograd.max(t(a), t(b), t(c))
    for k, d in enumerate(y.creator.backward(dy)):
        np.testing.assert_array_equal(tensor.to_numpy(raw(d)), dyv * (top == k))
    low = np.argmin(np.stack([a, b, c]), axis=0)
    y = autograd.min(t(a), t(b), t(c))
    for k, d in enumerate(y.creator.backward(dy)):
        np.testing.assert_array_equal(tensor.to_numpy(raw(d)), dyv * (low == k))
    y = autograd.mse_loss(t(a), t(b))
    dx = y.creator.backward()
    np.testing.assert_allclose(tensor.to_numpy(raw(dx)), 2 * (a - b) / a.size, rtol=1e-5)
    tiled = autograd.tile(t(a[0]), [2, 3])                    # (4,) -> (2, 12)
    g = rng.uniform(size=(2, 12)).astype(np.float32)
    dx = tiled.creator.backward(tensor.from_numpy(g).data)
    np.testing.assert_allclose(tensor.to_numpy(raw(dx)), g.reshape(2, 3, 4).sum((0, 1)),
                               rtol=1e-6)
    s = rng.uniform(0.1, 0.5, (3, 4)).astype(np.float32)
    for fn, args in ((autograd.cossim, (a, b)), (autograd.prelu, (a, s))):
        y = fn(*map(t, args))
        grads = y.creator.backward()
        for k, d in enumerate(grads):
            def f(v, k=k):
                vals = list(args)
                vals[k] = v
                return tensor.to_numpy(fn(*map(t, vals)))
            np.testing.assert_allclose(tensor.to_numpy(raw(d)), num_grad(f, args[k]),
                                       rtol=2e-3, atol=2e-4)
    x = t(rng.standard_normal((1, 8, 2, 3)).astype(np.float32))
    y = autograd.depth_to_space(x, 2)
    dx = y.creator.backward(tensor.from_numpy(np.ones(y.shape, np.float32)).data)
    assert dx.shape() == (1, 8, 2, 3)
    p = t(a, stores_grad=True)                                 # the engine's walk unchanged
    (gp,) = grads_of(autograd.mse_loss(autograd.max(p, t(b), t(c)), t(c)), p)
    want = 2 * (np.maximum(np.maximum(a, b), c) - c) / a.size * (top == 0)
    np.testing.assert_allclose(gp, want, rtol=1e-5, atol=1e-7)


def test_operator_classes_return_tuples(rng):
    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = t(a)
    assert isinstance(autograd.ReLU()(x), tuple)
    np.testing.assert_allclose(tensor.to_numpy(autograd.ReLU()(x)[0]), np.maximum(a, 0))
    np.testing.assert_allclose(tensor.to_numpy(autograd.Concat(1)(x, x)[0]),
                               np.concatenate([a, a], 1))
    np.testing.assert_allclose(tensor.to_numpy(autograd.Reshape((3, 2))(x)[0]), a.reshape(3, 2))
    c = t(np.ones((2, 2)))
    np.testing.assert_allclose(tensor.to_numpy(autograd.Gemm(1.0, 0.5, 0, 1)(x, x, c)[0]),
                               a @ a.T + 0.5, rtol=1e-5, atol=1e-6)
    y = rng.standard_normal((2, 1)).astype(np.float32)
    mse = autograd.MeanSquareError(t(y))(x)[0]             # the target broadcasts, as in SINGA
    assert tensor.to_numpy(mse)[0] == pytest.approx(((a - y) ** 2).mean(), rel=1e-5)
    assert len(autograd.Split(1, [1, 2])(x)) == 2
    assert issubclass(autograd.Operator, hl.autograd.Function)


def test_a_new_operator_written_the_singa_way(rng):
    class Cube(autograd.Operator):
        def forward(self, x):
            self.x = x
            return x * x * x

        def backward(self, dy):
            return dy * 3.0 * self.x * self.x

    a = rng.standard_normal((2, 3)).astype(np.float32)
    x = t(a, True, True)
    (y,) = Cube()(x)                                       # a tuple, as in SINGA
    assert isinstance(y, tensor.Tensor)
    np.testing.assert_allclose(tensor.to_numpy(y), a ** 3, rtol=1e-6)
    (g,) = grads_of(autograd.reduce_sum(y, None, 0), x)
    np.testing.assert_allclose(g, 3 * a ** 2, rtol=1e-5)


def test_training_flag_is_hls(rng):
    prev = hl.autograd.training
    try:
        autograd.training = False
        assert hl.autograd.training is False and autograd.training is False
        drop = tensor.to_numpy(autograd.dropout(t(np.ones(1000)), ratio=0.5))
        assert (drop == 1).all()                           # evaluation: identity
        autograd.training = True
        drop = tensor.to_numpy(autograd.dropout(t(np.ones(1000)), ratio=0.5))
        assert set(np.unique(drop)) <= {0.0, 2.0}           # inverted dropout, 1 / (1 - ratio)
    finally:
        hl.autograd.training = prev


# ---- layers -------------------------------------------------------------------------------------

def test_conv2d_signatures_activation_and_padding(rng):
    x = tensor.Tensor((2, 3, 8, 8)).gaussian(0, 1)
    a = layer.Conv2d(4, 3)                               # (nb_kernels, kernel_size)
    b = layer.Conv2d(3, 4, 3, padding=1)                 # (in_channels, nb_kernels, kernel)
    c = layer.Conv2d(4, 3, activation="RELU")
    assert a(x).shape == (2, 4, 6, 6) and b(x).shape == (2, 4, 8, 8)
    assert sorted(a.get_params()) == ["W", "b"] and a.W.shape == (4, 3, 3, 3)
    assert (tensor.to_numpy(c(x)) >= 0).all()
    want = hl.relu(hl.conv2d(x, c.W, c.b))
    np.testing.assert_allclose(tensor.to_numpy(c(x)), want.numpy(), rtol=1e-5, atol=1e-6)
    with pytest.raises(errors.ShapeError):
        b(tensor.Tensor((2, 2, 8, 8)))                   # in_channels is checked
    with pytest.raises(errors.ValueError):
        layer.Conv2d(4, 3, activation="SWISHY")
    # (top, bottom, left, right), SINGA's order for 4 pads
    d = layer.Conv2d(1, 3, padding=(1, 0, 2, 0), bias=False)
    y = d(x)
    assert y.shape == (2, 1, 7, 8)
    ref = hl.conv2d(hl.pad(x, [0, 0, 1, 2, 0, 0, 0, 0]), d.W)
    np.testing.assert_allclose(tensor.to_numpy(y), ref.numpy(), rtol=1e-5, atol=1e-5)
    for mode, top in (("SAME_UPPER", 1), ("SAME_LOWER", 2)):   # ONNX auto_pad, kernel 4
        e = layer.Conv2d(2, 4, pad_mode=mode, bias=False)
        y = e(x)
        assert y.shape == (2, 2, 8, 8)
        ref = hl.conv2d(hl.pad(x, [0, 0, top, top, 0, 0, 3 - top, 3 - top]), e.W)
        np.testing.assert_allclose(tensor.to_numpy(y), ref.numpy(), rtol=1e-5, atol=1e-5)
    s = layer.SeparableConv2d(5, 3, padding=1)
    assert s(x).shape == (2, 5, 8, 8) and s.depthwise_conv.W.shape == (3, 1, 3, 3)


def test_pooling_layers(rng):
    a = rng.standard_normal((1, 2, 6, 6)).astype(np.float32)
    x = t(a)
    mx = tensor.to_numpy(layer.MaxPool2d(2, 2)(x))
    np.testing.assert_array_equal(mx, a.reshape(1, 2, 3, 2, 3, 2).max((3, 5)))
    av = tensor.to_numpy(layer.AvgPool2d(3, 1, 2)(x))      # padding beyond half the window
    ref = np.pad(a, [(0, 0), (0, 0), (2, 2), (2, 2)])
    want = np.stack([[ref[..., i:i + 3, j:j + 3].mean((-1, -2)) for j in range(8)]
                     for i in range(8)]).transpose(2, 3, 0, 1)
    np.testing.assert_allclose(av, want, rtol=1e-5, atol=1e-6)
    assert layer.MaxPool2d(4, 1, pad_mode="SAME_UPPER")(x).shape == (1, 2, 6, 6)
    one_d = layer.MaxPool1d(2)(t(a[:, :, :1]))              # SINGA's 1-D: (N, C, 1, L)
    np.testing.assert_array_equal(tensor.to_numpy(one_d),
                                  a[:, :, :1].reshape(1, 2, 1, 3, 2).max(-1))
    assert layer.AvgPool1d(3, 1)(t(a[:, :, :1])).shape == (1, 2, 1, 4)
    assert layer.Pooling2d(2, is_max=False)(x).shape == (1, 2, 3, 3)


def test_batchnorm_momentum_is_singas(rng):
    """SINGA: running = momentum * running + (1 - momentum) * batch statistic."""
    a = rng.standard_normal((4, 3, 2, 2)).astype(np.float32) + 2
    bn = layer.BatchNorm2d(3, momentum=0.8)
    bn.train()
    bn(t(a))
    np.testing.assert_allclose(tensor.to_numpy(bn.running_mean), 0.2 * a.mean((0, 2, 3)),
                               rtol=1e-5)
    assert sorted(bn.get_states()) == ["bias", "running_mean", "running_var", "scale"]
    assert layer.BatchNorm2d()(t(a)).shape == a.shape      # channels learnt on first call


def test_linear_gemm_embedding_and_simple_layers(rng):
    a = rng.standard_normal((4, 6)).astype(np.float32)
    lin = layer.Linear(3)
    y = lin(t(a))
    assert lin.W.shape == (6, 3)                           # (in, out), as SINGA's
    np.testing.assert_allclose(tensor.to_numpy(y), a @ tensor.to_numpy(lin.W) +
                               tensor.to_numpy(lin.b), rtol=1e-5, atol=1e-6)
    assert layer.Linear(6, 3)(t(a)).shape == (4, 3)
    g = layer.Gemm(5, transB=True)
    assert g(t(a)).shape == (4, 5) and g.W.shape == (5, 6)
    emb = layer.Embedding(10, 4)
    assert emb(t(np.array([[1, 2], [3, 9]]))).shape == (2, 2, 4)
    np.testing.assert_allclose(tensor.to_numpy(layer.ReLU()(t(a))), np.maximum(a, 0))
    np.testing.assert_allclose(tensor.to_numpy(layer.Sigmoid()(t(a))), 1 / (1 + np.exp(-a)),
                               rtol=1e-5)
    np.testing.assert_allclose(tensor.to_numpy(layer.Add()(t(a), t(a))), 2 * a)
    assert layer.Flatten(2)(t(a.reshape(2, 2, 6))).shape == (4, 6)
    np.testing.assert_allclose(tensor.to_numpy(layer.Cat(1)([t(a), t(a)])),
                               np.concatenate([a, a], 1))
    assert layer.Reshape()(t(a), (3, 8)).shape == (3, 8)
    e = np.exp(a - a.max(1, keepdims=True))
    np.testing.assert_allclose(tensor.to_numpy(layer.SoftMax()(t(a))),
                               e / e.sum(1, keepdims=True), rtol=1e-5)
    labels = t(np.array([0, 1, 2, 0], np.int32))
    assert tensor.to_numpy(layer.SoftMaxCrossEntropy()(t(a), labels)).shape == (1,)
    assert layer.MeanSquareError()(t(a), t(a)).shape == (1,)
    assert layer.CrossEntropy()(t(np.full((4, 6), 0.5)), t(np.eye(4, 6))).shape == (1,)
    assert layer.BinaryCrossEntropy()(t(np.full((4, 6), 0.5)), t(np.eye(4, 6))).shape == (1,)
    d = layer.Dropout(0.25)
    assert d.ratio == 0.25
    with pytest.raises(errors.DeviceError):
        layer.CudnnRNN(4)


def test_initialisation_is_singas():
    """layer.py: Conv2d W ~ N(0, 2 / (C_in * kh * kw + nb_kernels)), Linear W ~
    N(0, 2 / (in + out)), Embedding W ~ N(0, 1); biases 0."""
    conv = layer.Conv2d(64, 5)
    conv(tensor.Tensor((1, 32, 5, 5)))
    w = tensor.to_numpy(conv.W)
    assert w.std() == pytest.approx(np.sqrt(2 / (32 * 25 + 64)), rel=0.05)
    assert abs(w.mean()) < 0.01 and not tensor.to_numpy(conv.b).any()
    lin = layer.Linear(300)
    lin(tensor.Tensor((1, 500)))
    assert tensor.to_numpy(lin.W).std() == pytest.approx(np.sqrt(2 / 800), rel=0.05)
    emb = layer.Embedding(500, 40)
    emb(t(np.array([[0]])))
    assert tensor.to_numpy(emb.W).std() == pytest.approx(1.0, rel=0.05)


def test_rnn_and_lstm_over_lists_of_steps(rng):
    xs = [t(rng.standard_normal((2, 3))) for _ in range(4)]
    h0 = t(np.zeros((2, 5)))
    rnn = layer.RNN(3, 5)
    hs, h = rnn(xs, h0)
    assert len(hs) == 4 and hs[0].shape == (2, 5)
    np.testing.assert_array_equal(tensor.to_numpy(hs[-1]), tensor.to_numpy(h))
    lstm = layer.LSTM(3, 5)
    hs, h, c = lstm(xs, (h0, t(np.zeros((2, 5)))))
    assert len(hs) == 4 and h.shape == c.shape == (2, 5)
    loss = autograd.softmax_cross_entropy(hs[-1], t(np.array([0, 4], np.int32)))
    pairs = list(autograd.backward(loss))
    assert pairs and all(tuple(p.shape) == tuple(g.shape) for p, g in pairs)


def test_custom_layer_names_params_hierarchically(rng):
    class Block(layer.Layer):
        def __init__(self):
            super().__init__()
            self.conv = layer.Conv2d(2, 3)
            self.fc = layer.Linear(4)

        def forward(self, x):
            return self.fc(autograd.flatten(self.conv(x)))

    blk = Block()
    y = blk(tensor.Tensor((1, 1, 5, 5)).gaussian(0, 1))
    assert isinstance(y, tensor.Tensor) and y.shape == (1, 4)
    assert sorted(blk.get_params()) == ["conv.W", "conv.b", "fc.W", "fc.b"]
    blk.set_params({"fc.b": np.ones(4, np.float32)})
    np.testing.assert_array_equal(tensor.to_numpy(blk.fc.b), np.ones(4))
    blk.register_layers(layer.ReLU(), layer.ReLU())
    assert hasattr(blk, "ReLU_0") and hasattr(blk, "ReLU_1")


def test_singa_layer_conventions():
    """SINGA allows plain attributes before Layer.__init__ (ResNet sets self.inplanes first) and
    register_layers(*layers) or (OrderedDict) for layers kept in lists."""
    from collections import OrderedDict

    class Net(layer.Layer):
        def __init__(self):
            self.width = 3
            super().__init__()
            blocks = [layer.Linear(self.width), layer.Linear(2)]
            self.register_layers(*blocks)
            self.register_layers(OrderedDict(head=layer.ReLU()))
            self.blocks = blocks

        def forward(self, x):
            for b in self.blocks:
                x = b(x)
            return self.head(x)

    net = Net()
    assert net(t(np.ones((1, 4)))).shape == (1, 2)
    assert sorted(net.get_params()) == ["Linear_0.W", "Linear_0.b", "Linear_1.W", "Linear_1.b"]
