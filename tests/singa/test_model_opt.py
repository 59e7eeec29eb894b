"""hl.singa.model, opt, initializer, utils, loss, metric and sonnx against SINGA's documented
behaviour (python/singa/model.py, opt.py, initializer.py, utils.py, sonnx.py): update rules
written out with numpy, SINGA's checkpoint layout read with zipfile/json/numpy."""
import json
import warnings
import zipfile

import numpy as np
import pytest

import hl
from hl import errors
from hl.singa import (autograd, device, initializer, layer, loss, metric, model, opt, sonnx,
                      tensor, utils)


class Net(model.Model):
    def __init__(self):
        super().__init__()
        self.conv = layer.Conv2d(1, 4, 3, padding=1, activation="RELU")
        self.bn = layer.BatchNorm2d(4)
        self.pool = layer.MaxPool2d(2, 2)
        self.flat = layer.Flatten()
        self.fc = layer.Linear(10)
        self.loss = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(self.flat(self.pool(self.bn(self.conv(x)))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        ls = self.loss(out, y)
        self.optimizer(ls)
        return out, ls

    def set_optimizer(self, o):
        self.optimizer = o


def digits(n=256):
    (x, y), (xt, yt) = hl.data.digits()
    return np.asarray(x[:n]), np.asarray(y[:n]).astype(np.int32), np.asarray(xt), np.asarray(yt)


def test_model_compile_call_and_train(tmp_path):
    device.get_default_device().SetRandSeed(0)
    x, y, xt, yt = digits(512)
    m = Net()
    m.set_optimizer(opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5))
    tx = tensor.Tensor((32, 1, 8, 8), device.get_default_device(), tensor.float32)
    ty = tensor.Tensor((32,), device.get_default_device(), tensor.int32)
    m.compile([tx], is_train=True, use_graph=False, sequential=False)
    assert sorted(m.get_params()) == ["bn.bias", "bn.scale", "conv.W", "conv.b", "fc.W", "fc.b"]
    first = None
    for epoch in range(4):
        for b in range(0, 512, 32):
            tx.copy_from_numpy(x[b:b + 32])
            ty.copy_from_numpy(y[b:b + 32])
            out, ls = m(tx, ty)                     # training mode: one step
            assert out.shape == (32, 10) and ls.shape == (1,)
            first = first if first is not None else tensor.to_numpy(ls)[0]
    assert tensor.to_numpy(ls)[0] < 0.5 * first
    m.eval()
    assert not autograd.training                     # SINGA's eval() clears the global flag
    out = m(tensor.from_numpy(xt))                   # evaluation mode: forward
    acc = (tensor.to_numpy(out).argmax(1) == yt).mean()
    assert acc > 0.85
    m.train()
    assert autograd.training


def test_save_states_writes_singas_checkpoint(tmp_path):
    m = Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    m.compile([tensor.Tensor((2, 1, 8, 8))], is_train=False)
    path = tmp_path / "ckpt.zip"
    m.save_states(str(path), aux_states={"epoch": tensor.from_numpy(np.array([3], np.int32))})
    with zipfile.ZipFile(path) as z:                 # SINGA's layout (model.py)
        assert sorted(z.namelist()) == ["states_attr.json", "tensor_dict.npz"]
        attrs = json.loads(z.read("states_attr.json"))
        npz = np.load(z.open("tensor_dict.npz"))
        arrays = {k: npz[k] for k in npz.files}
    assert attrs["conv.W"] == {"state_type": 0, "shape": [4, 1, 3, 3], "dtype": 0}
    assert attrs["epoch"]["state_type"] == 1 and attrs["bn.running_var"]["state_type"] == 0
    np.testing.assert_array_equal(arrays["fc.W"], tensor.to_numpy(m.fc.W))
    with pytest.raises(errors.HLError):              # SINGA refuses to overwrite a file
        m.save_states(str(path))
    m2 = Net()
    m2.compile([tensor.Tensor((2, 1, 8, 8))], is_train=False)
    aux = m2.load_states(str(path))
    assert tensor.to_numpy(aux["epoch"]).tolist() == [3]
    for k, v in m.get_states().items():
        np.testing.assert_array_equal(tensor.to_numpy(m2.get_states()[k]), tensor.to_numpy(v))
    m.save_states(str(tmp_path / "hl.zip"), format="hl")      # hl's own format, on request
    assert m2.load_states(str(tmp_path / "hl.zip")) == {}


def test_graph_mode_runs_eagerly_with_one_warning():
    device._state["warned"] = False
    m = Net()
    m.set_optimizer(opt.SGD(lr=0.1))
    with pytest.warns(UserWarning, match="eagerly"):
        m.compile([tensor.Tensor((2, 1, 8, 8))], is_train=True, use_graph=True, sequential=True)
    assert m.graph_mode and m.sequential
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m.graph(True, False)
        out, ls = m(tensor.Tensor((2, 1, 8, 8)).gaussian(0, 1),
                    tensor.from_numpy(np.array([1, 2], np.int32)))
    assert out.shape == (2, 10)


# ---- optimisers: SINGA's update rules --------------------------------------------------------

def w_and_g(w=0.1, g=0.1):
    return tensor.Tensor((2, 3)).set_value(w), tensor.Tensor((2, 3)).set_value(g)


def test_sgd_rules():
    w, g = w_and_g(0.1, 0.01)
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    sgd.apply("w", w, g)                      # buf = g; w -= lr * buf
    sgd.step()
    sgd.apply("w", w, g)                      # buf = 0.9 buf + g
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1 * 0.01 - 0.1 * 0.019, rtol=1e-6)
    w, g = w_and_g(0.1, 0.01)
    opt.SGD(lr=0.1, weight_decay=0.2).apply("w", w, g)        # g += wd * w
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1 * (0.01 + 0.2 * 0.1), rtol=1e-6)
    w, g = w_and_g(0.1, 0.1)
    nes = opt.SGD(lr=0.1, momentum=0.9, nesterov=True)
    nes.apply("w", w, g)                      # buf = g; g' = g + 0.9 buf
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1 * 0.19, rtol=1e-6)
    w, g = w_and_g(0.1, 0.1)
    opt.SGD(lr=0.1, momentum=0.5, dampening=0.5).apply("w", w, g)
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1 * 0.1, rtol=1e-6)


def test_adaptive_rules():
    """SINGA's test_opt.py formulas (eps = 1e-8; see docs/singa.md on where it sits)."""
    w, g = w_and_g(0.1, 0.1)
    opt.RMSProp(lr=0.1).apply("w", w, g)      # s = 0.1 g^2; w -= lr g / sqrt(s + eps)
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1 * 0.1 / np.sqrt(0.1 * 0.01),
                               rtol=1e-5)
    w, g = w_and_g(0.1, 0.1)
    opt.AdaGrad(lr=0.1).apply("w", w, g)      # h = g^2; w -= lr g / sqrt(h + eps)
    np.testing.assert_allclose(tensor.to_numpy(w), 0.1 - 0.1, atol=1e-6)
    w, g = w_and_g(1.0, 0.1)
    adam = opt.Adam(lr=0.1)
    for _ in range(2):
        adam.apply("w", w, g)
        adam.step()
    # two steps with a constant gradient: m_hat = g, v_hat = g^2 each time
    np.testing.assert_allclose(tensor.to_numpy(w), 1.0 - 2 * 0.1 * 0.1 / (0.1 + 1e-8),
                               rtol=1e-5)


def test_schedulers_and_states():
    lr = opt.ExponentialDecay(0.1, 2, 0.5, staircase=True)
    sgd = opt.SGD(lr=lr)
    for i in range(5):
        np.testing.assert_allclose(tensor.to_numpy(sgd.lr_value), [0.1 * 0.5 ** (i // 2)],
                                   rtol=1e-6)
        sgd.step()
    smooth = opt.SGD(lr=opt.ExponentialDecay(0.1, 2, 0.5))
    smooth.step()
    np.testing.assert_allclose(tensor.to_numpy(smooth.lr_value), [0.1 * 0.5 ** 0.5], rtol=1e-6)
    c = opt.Constant(0.2)
    step = tensor.Tensor((1,)).set_value(7)
    np.testing.assert_allclose(tensor.to_numpy(c(step)), [0.2])
    o = opt.Optimizer(0.1)
    o.step()
    o.step()
    assert o.get_states()["step_counter"] == 2
    o.set_states({"step_counter": 5})
    np.testing.assert_array_equal(tensor.to_numpy(o.step_counter), [5])
    with pytest.raises(NotImplementedError):
        o.apply("w", *w_and_g())


def test_optimizer_called_on_a_loss_updates_every_parameter(rng):
    w = tensor.from_numpy(rng.standard_normal((3, 2)).astype(np.float32))
    w.stores_grad = True
    x = tensor.from_numpy(rng.standard_normal((4, 3)).astype(np.float32))
    x.requires_grad = False
    before = tensor.to_numpy(w).copy()
    ls = autograd.mse_loss(autograd.matmul(x, w), tensor.Tensor((4, 2)))
    (g,) = [tensor.to_numpy(d) for _, d in autograd.backward(ls)]
    sgd = opt.SGD(lr=0.5)
    ls = autograd.mse_loss(autograd.matmul(x, w), tensor.Tensor((4, 2)))
    sgd(ls)
    np.testing.assert_allclose(tensor.to_numpy(w), before - 0.5 * g, rtol=1e-5, atol=1e-6)
    assert sgd.step_count == 1


def test_parameters_of_unregistered_layers_keep_their_own_state(rng):
    """Layers kept in closures (SINGA's ResNet downsample) have parameters named just "W":
    each keeps its own momentum."""
    a, b = layer.Linear(2, bias=False), layer.Linear(2, bias=False)
    x = tensor.from_numpy(rng.standard_normal((3, 2)).astype(np.float32))
    a(x), b(x)
    assert a.W.name == b.W.name == "W"
    wa, wb = tensor.to_numpy(a.W).copy(), tensor.to_numpy(b.W).copy()
    sgd = opt.SGD(lr=0.1, momentum=0.9)
    for _ in range(2):
        ls = autograd.add(autograd.reduce_sum(a(x), None, 0), autograd.reduce_sum(b(x), None, 0))
        sgd(ls)
    g = tensor.to_numpy(x).sum(0)[:, None] * np.ones((1, 2))   # d sum(x W) / dW
    for w0, w in ((wa, a.W), (wb, b.W)):                       # buf: g, then 1.9 g
        np.testing.assert_allclose(tensor.to_numpy(w), w0 - 0.1 * g - 0.1 * 1.9 * g, rtol=1e-5,
                                   atol=1e-6)


def test_distopt_is_hls():
    # one class under SINGA's two spellings and hl's home for it
    assert opt.DistOpt is hl.opt.DistOpt is hl.distributed.DistOpt


# ---- initializer, utils, loss, metric ----------------------------------------------------------

@pytest.mark.parametrize("name, bound", [
    ("he_uniform", lambda fi, fo: np.sqrt(6 / fi)),
    ("lecun_uniform", lambda fi, fo: np.sqrt(3 / fi)),
    ("glorot_uniform", lambda fi, fo: np.sqrt(6 / (fi + fo)))])
def test_uniform_initializers(name, bound):
    for shape, (fi, fo) in (((40, 90), (40, 90)), ((30, 50, 4, 8), (50 * 32, 30 * 32))):
        v = tensor.to_numpy(getattr(initializer, name)(tensor.Tensor(shape)))
        limit = bound(fi, fo)
        assert v.max() <= limit and v.max() > 0.9 * limit and v.min() >= -limit


@pytest.mark.parametrize("name, std", [
    ("he_normal", lambda fi, fo: np.sqrt(2 / fi)), ("lecun_normal", lambda fi, fo: np.sqrt(1 / fi)),
    ("glorot_normal", lambda fi, fo: np.sqrt(2 / (fi + fo)))])
def test_normal_initializers(name, std):
    v = tensor.to_numpy(getattr(initializer, name)(tensor.Tensor((50, 30, 4, 8))))
    assert v.std() == pytest.approx(std(30 * 32, 50 * 32), rel=0.05)


def test_matrix_initializers():
    e = tensor.to_numpy(initializer.eye(tensor.Tensor((3, 4))))
    np.testing.assert_array_equal(e, np.eye(3, 4))
    q = tensor.to_numpy(initializer.orthogonal(tensor.Tensor((4, 6))))
    np.testing.assert_allclose(q @ q.T, np.eye(4), atol=1e-5)
    assert tensor.to_numpy(initializer.msra(tensor.Tensor((2000, 5)))).std() == \
        pytest.approx(np.sqrt(2 / 2000), rel=0.05)
    with pytest.raises(errors.ShapeError):
        initializer.eye(tensor.Tensor((2, 2, 2)))


def test_utils_padding_arithmetic():
    # ONNX auto_pad: output ceil(in / stride); an odd total puts the extra at the end (UPPER)
    assert utils.get_output_shape("SAME_UPPER", [32, 7], [4, 3], [1, 2]) == [32, 4]
    assert utils.get_output_shape("VALID", [32, 7], [4, 3], [1, 2]) == [29, 3]
    assert utils.get_padding_shape("SAME_UPPER", [32], [4], [1]) == ([1, 1], [0, 1])
    assert utils.get_padding_shape("SAME_LOWER", [32], [4], [1]) == ([1, 1], [1, 0])
    assert utils.onnx_same_pads("SAME_LOWER", [32, 32], [4, 3], [1, 1]) == (2, 1, 1, 1)
    assert utils.force_unicode(b"abc") == "abc"


def test_loss_and_metric_modules(rng):
    x = rng.standard_normal((5, 3)).astype(np.float32)
    y = np.array([0, 2, 1, 1, 0], np.int32)
    logp = x - np.log(np.exp(x).sum(1, keepdims=True))
    v = loss.SoftmaxCrossEntropy()(tensor.from_numpy(x), tensor.from_numpy(y))
    assert tensor.to_numpy(v)[0] == pytest.approx(-logp[np.arange(5), y].mean(), rel=1e-5)
    assert tensor.to_numpy(loss.SquaredError()(tensor.from_numpy(x), tensor.from_numpy(x)))[0] == 0
    acc = metric.Accuracy()
    want = (x.argmax(1) == y).mean()
    assert acc.evaluate(tensor.from_numpy(x), tensor.from_numpy(y)) == pytest.approx(want)
    onehot = np.eye(3, dtype=np.float32)[y]
    assert acc.evaluate(tensor.from_numpy(x), tensor.from_numpy(onehot)) == pytest.approx(want)


# ---- sonnx -----------------------------------------------------------------------------

def test_sonnx_round_trip_and_retraining(rng):
    x = tensor.from_numpy(rng.standard_normal((2, 3, 5, 5)).astype(np.float32))
    net = layer.Conv2d(2, 3)
    y = autograd.relu(autograd.flatten(net(x)))
    proto = sonnx.to_onnx([x], [y])
    rep = sonnx.prepare(proto, device=device.get_default_device())
    (out,) = rep.run([x])
    assert isinstance(out, tensor.Tensor)
    np.testing.assert_allclose(tensor.to_numpy(out), tensor.to_numpy(y), rtol=1e-5, atol=1e-6)
    target = tensor.Tensor(out.shape)
    ls = autograd.mse_loss(out, target)                       # the imported graph trains
    sgd = opt.SGD(lr=0.1)
    pairs = list(autograd.backward(ls))
    assert pairs
    for p, g in pairs:
        sgd.apply(p.name, p, g)
    assert tensor.to_numpy(autograd.mse_loss(rep.run([x])[0], target))[0] < tensor.to_numpy(ls)[0]
    m = sonnx.SONNXModel(proto)
    np.testing.assert_allclose(tensor.to_numpy(m.forward(x)[0]), tensor.to_numpy(out),
                               rtol=1e-5, atol=1e-6)
    with pytest.raises(errors.DeviceError):
        sonnx.prepare(proto, device="TPU")


# ---- every public name ----------------------------------------------------------------------

def test_every_public_name_exists():
    import hl.singa as singa
    for mod in singa._SUBMODULES:
        m = getattr(singa, mod)
        for name in getattr(m, "__all__", ()):
            if name == "DistOpt":
                continue
            assert hasattr(m, name), f"hl.singa.{mod}.{name}"


def test_runner_rewrites_only_imports():
    import importlib.util
    import os
    spec = importlib.util.spec_from_file_location(
        "run_singa_tests", os.path.join(os.path.dirname(__file__), "run_singa_tests.py"))
    r = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(r)
    src = ("from singa import tensor\nfrom singa import singa_wrap as singa\nimport singa\n"
           "from onnx import (defs, checker, mapping, helper)\nx = singa.tensor\n")
    assert r.rewrite(src) == ("from hl.singa import tensor\nfrom hl.singa import singa_wrap as "
                              "singa\nimport hl.singa as singa\n"
                              "from onnx import (defs, checker, helper)\nx = singa.tensor\n")
