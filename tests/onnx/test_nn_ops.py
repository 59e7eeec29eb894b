"""hl.onnx's neural-network and reduction handlers beyond ONNX's conformance cases: gradients
in training against PyTorch's autograd (the core's 1-D/2-D kernels and the generic strided-
slice path hl takes for 3-D and dilated pools), BatchNormalization's running statistics as
ONNX defines momentum, Dropout only in training, opset variants, the generic Resize path
against the fast one and onnxruntime, and bad input that must raise a clear hl error."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import hl
import hl.onnx
from hl import errors

from ._models import check_grads

GRAD_RTOL, GRAD_ATOL = 1e-6, 1e-8  # float64 throughout: only summation order differs
F = hl.autograd.functional


def _model(op, inputs, inits=None, order=None, opset=21, n_out=1, out_types=None,
           out_rank=None, **attrs):
    """A one-node model: ``inputs`` ({name: array}) fed at run time, ``inits`` stored as
    initializers (trainable in ONNXModel when floating), ``order`` the node's input names
    ("" for an omitted optional one)."""
    inits = inits or {}
    arrays = {**inputs, **inits}
    order = list(inputs) + list(inits) if order is None else order
    first = helper.np_dtype_to_tensor_dtype(np.asarray(next(iter(arrays.values()))).dtype)
    out_types = out_types or [first] * n_out
    if out_rank is None:
        out_rank = np.ndim(next(iter(arrays.values())))
    outs = [f"y{i}" for i in range(n_out)]
    graph = helper.make_graph(
        [helper.make_node(op, order, outs, name=f"my_{op.lower()}", **attrs)], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                       np.shape(v)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, t, [f"d{i}" for i in range(out_rank)])
         for o, t in zip(outs, out_types)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(op, inputs, **kw):
    return hl.onnx.prepare(_model(op, inputs, **kw)).run(list(inputs.values()))


def _rng(seed=0):
    return np.random.default_rng(seed)


def _check_grads(model, feeds, params, torch_fn, train=False):
    return check_grads(model, feeds, params, torch_fn, GRAD_RTOL, GRAD_ATOL, train)


# ---- convolutions ------------------------------------------------------------------------

@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_gradients_with_asymmetric_pads_and_groups(nd):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    r = _rng(nd)
    x = r.normal(size=(2, 4) + (6,) * nd)
    w = r.normal(size=(6, 2) + (3,) * nd)
    b = r.normal(size=6)
    begins, ends = [1, 0, 2][:nd], [0, 2, 1][:nd]
    strides, dil = [2, 1, 1][:nd], [1, 2, 1][:nd]
    model = _model("Conv", {"x": x}, {"w": w, "b": b}, pads=begins + ends, strides=strides,
                   dilations=dil, group=2)
    conv = [tf.conv1d, tf.conv2d, tf.conv3d][nd - 1]
    torch_pads = [p for a in reversed(range(nd)) for p in (begins[a], ends[a])]
    _check_grads(model, {"x": x}, {"w": w, "b": b},
                 lambda x, w, b: conv(tf.pad(x, torch_pads), w, b, stride=strides,
                                      dilation=dil, groups=2))


@pytest.mark.parametrize("nd", [2, 3])
def test_conv_transpose_gradients_with_output_padding(nd):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    r = _rng(10 + nd)
    x = r.normal(size=(2, 4) + (4,) * nd)
    w = r.normal(size=(4, 3) + (3,) * nd)
    b = r.normal(size=6)
    model = _model("ConvTranspose", {"x": x}, {"w": w, "b": b}, strides=[2] * nd,
                   pads=[1] * (2 * nd), output_padding=[1] * nd, group=2)
    conv_t = tf.conv_transpose2d if nd == 2 else tf.conv_transpose3d
    _check_grads(model, {"x": x}, {"w": w, "b": b},
                 lambda x, w, b: conv_t(x, w, b, stride=2, padding=1, output_padding=1,
                                        groups=2))


def test_conv_transpose_output_shape_and_same_pads_follow_the_spec():
    # SAME gives input * stride, the odd padding at the end for SAME_UPPER; onnx's reference
    # evaluator is the judge
    from onnx.reference import ReferenceEvaluator
    r = _rng(3)
    x = r.normal(size=(1, 2, 3, 4)).astype(np.float32)
    w = r.normal(size=(2, 3, 3, 3)).astype(np.float32)
    for attrs in (dict(strides=[2, 1], auto_pad="SAME_UPPER"),
                  dict(strides=[2, 1], auto_pad="SAME_LOWER"),
                  dict(strides=[3, 2], dilations=[2, 1], pads=[0, 1, 2, 0])):
        model = _model("ConvTranspose", {"x": x, "w": w}, opset=11, **attrs)
        want = ReferenceEvaluator(model).run(None, {"x": x, "w": w})[0]
        got = hl.onnx.prepare(model).run([x, w])[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=str(attrs))
    # output_shape: the pads follow from it, the odd one at the start (not SAME_UPPER);
    # here the full 7 x 9 result loses its first row
    torch = pytest.importorskip("torch")
    full = torch.nn.functional.conv_transpose2d(torch.tensor(x), torch.tensor(w), stride=2)
    (got,) = _run("ConvTranspose", {"x": x, "w": w}, opset=11, strides=[2, 2],
                  output_shape=[6, 9])
    np.testing.assert_allclose(got, full.numpy()[:, :, 1:, :], rtol=1e-5, atol=1e-5)


# ---- pooling -----------------------------------------------------------------------------

@pytest.mark.parametrize("nd", [2, 3])
def test_max_pool_gradients_and_indices(nd):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _rng(20).normal(size=(2, 3) + (5,) * nd)
    pool = tf.max_pool2d if nd == 2 else tf.max_pool3d
    model = _model("MaxPool", {"x": x}, kernel_shape=[3] * nd, strides=[2] * nd,
                   pads=[1] * (2 * nd), ceil_mode=1)
    _check_grads(model, {"x": x}, {},
                 lambda x: pool(x, 3, stride=2, padding=1, ceil_mode=True))
    # Indices: positions in the flattened input, as torch's per-plane ones plus the plane
    model = _model("MaxPool", {"x": x}, n_out=2, out_types=[T.DOUBLE, T.INT64],
                   kernel_shape=[3] * nd, strides=[2] * nd, pads=[1] * (2 * nd))
    y, idx = hl.onnx.prepare(model).run([x])
    ty, tidx = pool(torch.tensor(x), 3, stride=2, padding=1, return_indices=True)
    planes = np.arange(6).reshape((2, 3) + (1,) * nd) * 5 ** nd
    np.testing.assert_array_equal(idx, tidx.numpy() + planes)
    np.testing.assert_array_equal(np.take(x, idx), y)


def test_max_pool_column_major_indices_and_uint8():
    x = _rng(21).normal(size=(1, 2, 4, 5)).astype(np.float32)
    y, idx = _run("MaxPool", {"x": x}, n_out=2, out_types=[T.FLOAT, T.INT64], opset=12,
                  kernel_shape=[2, 2], strides=[2, 2], storage_order=1)
    plane = idx % 20
    h, w = plane % 4, plane // 4  # column-major: h + w * H
    np.testing.assert_array_equal(x.reshape(2, 4, 5)[np.arange(2)[:, None, None], h[0], w[0]],
                                  y[0])
    u = _rng(22).integers(0, 255, (1, 1, 5, 5)).astype(np.uint8)
    (yu,) = _run("MaxPool", {"u": u}, kernel_shape=[2, 2], pads=[1, 1, 0, 0])
    padded = np.pad(u[0, 0], ((1, 0), (1, 0)))
    want = np.max([padded[i:i + 5, j:j + 5] for i in (0, 1) for j in (0, 1)], axis=0)
    np.testing.assert_array_equal(yu[0, 0], want)


def test_average_pool_gradients_3d_and_dilated():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _rng(30).normal(size=(2, 2, 5, 6, 4))
    model = _model("AveragePool", {"x": x}, kernel_shape=[3, 2, 2], strides=[2, 2, 1],
                   pads=[1, 1, 0, 1, 1, 0], count_include_pad=0)
    _check_grads(model, {"x": x}, {},
                 lambda x: tf.avg_pool3d(x, (3, 2, 2), (2, 2, 1), (1, 1, 0),
                                         count_include_pad=False))
    # dilations (opset 19) have no core kernel: against the mean of the dilated windows
    x2 = _rng(31).normal(size=(1, 1, 6, 7))
    (y,) = _run("AveragePool", {"x": x2}, opset=19, kernel_shape=[2, 3], dilations=[2, 2],
                pads=[1, 0, 0, 1], count_include_pad=0)
    padded = np.pad(x2[0, 0], ((1, 0), (0, 1)), constant_values=np.nan)
    want = np.array([[np.nanmean(padded[i:i + 3:2, j:j + 5:2]) for j in range(4)]
                     for i in range(5)])
    np.testing.assert_allclose(y[0, 0], want, rtol=1e-12)



@pytest.mark.parametrize("op, attrs, torch_call", [
    ("MaxPool", dict(kernel_shape=[3, 2, 3], strides=[2, 1, 2], pads=[1, 0, 1, 1, 0, 1],
                     dilations=[1, 2, 1], ceil_mode=1),
     lambda tf, x: tf.max_pool3d(x, (3, 2, 3), (2, 1, 2), (1, 0, 1), dilation=(1, 2, 1),
                                 ceil_mode=True)),
    ("AveragePool", dict(kernel_shape=[2, 3, 2], strides=[2, 2, 1], pads=[1, 1, 0, 1, 1, 0],
                         count_include_pad=1, ceil_mode=1),
     lambda tf, x: tf.avg_pool3d(x, (2, 3, 2), (2, 2, 1), (1, 1, 0), ceil_mode=True,
                                 count_include_pad=True)),
    ("LpPool", dict(kernel_shape=[2, 2, 3], strides=[1, 2, 2], p=3),
     lambda tf, x: tf.lp_pool3d(x, 3, (2, 2, 3), stride=(1, 2, 2))),
])
def test_3d_pools_on_the_core_kernels_match_torch(op, attrs, torch_call):
    # 3-D pools run as separable passes of the core's 2-D and 1-D kernels (ops/pool.py,
    # _core_pool): values and float64 gradients against torch's own 3-D pools
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    x = _rng(33).normal(size=(2, 3, 6, 7, 5))
    if op == "LpPool":
        x = np.abs(x) + 0.1  # torch's lp_pool3d takes the sign of the window's sum: keep it >0
    model = _model(op, {"x": x}, opset=19, **attrs)
    _check_grads(model, {"x": x}, {}, lambda x: torch_call(tf, x))
    x32 = x.astype(np.float32)
    (y,) = hl.onnx.prepare(_model(op, {"x": x32}, opset=19, **attrs)).run([x32])
    np.testing.assert_allclose(y, torch_call(tf, torch.tensor(x32)).numpy(), rtol=1e-5,
                               atol=1e-6)

def test_lp_pool_gradients():
    torch = pytest.importorskip("torch")
    x = _rng(32).normal(size=(2, 3, 6, 6))
    model = _model("LpPool", {"x": x}, kernel_shape=[2, 3], strides=[2, 1], p=2)
    _check_grads(model, {"x": x}, {},
                 lambda x: torch.nn.functional.lp_pool2d(x, 2, (2, 3), stride=(2, 1)))


# ---- normalization -----------------------------------------------------------------------

def _bn_model(x, inits, **attrs):
    return _model("BatchNormalization", {"x": x}, inits, opset=15, **attrs)


def test_batch_norm_training_uses_batch_statistics_and_updates_running_ones():
    torch = pytest.importorskip("torch")
    r = _rng(40)
    x = r.normal(size=(4, 3, 5, 5))
    inits = {"s": r.normal(size=3), "b": r.normal(size=3), "mean": r.normal(size=3),
             "var": r.random(3) + 0.5}
    model = _bn_model(x, inits, momentum=0.8, epsilon=1e-3)
    m = _check_grads(model, {"x": x}, {"s": inits["s"], "b": inits["b"]},
                     lambda x, s, b: torch.nn.functional.batch_norm(
                         x, None, None, s, b, training=True, eps=1e-3), train=True)
    # ONNX: running = running * momentum + batch * (1 - momentum), biased batch variance
    mom = float(np.float32(0.8))  # attributes are float32
    np.testing.assert_allclose(m.mean.numpy(),
                               inits["mean"] * mom + x.mean((0, 2, 3)) * (1 - mom), rtol=1e-12)
    np.testing.assert_allclose(m.var.numpy(),
                               inits["var"] * mom + x.var((0, 2, 3)) * (1 - mom), rtol=1e-12)
    # evaluation normalizes with the updated running statistics and changes nothing
    m.eval()
    before = m.mean.numpy().copy()
    y = m.forward(hl.tensor(x))[0].numpy()
    eps = float(np.float32(1e-3))
    want = (x - before[:, None, None]) / np.sqrt(m.var.numpy()[:, None, None] + eps)
    np.testing.assert_allclose(y, want * inits["s"][:, None, None] + inits["b"][:, None, None],
                               rtol=1e-10)
    np.testing.assert_array_equal(m.mean.numpy(), before)


def test_batch_norm_training_mode_attribute_outputs_running_statistics():
    r = _rng(41)
    x = r.normal(size=(3, 2, 4)).astype(np.float32)
    inits = {"s": np.ones(2, np.float32), "b": np.zeros(2, np.float32),
             "mean": np.zeros(2, np.float32), "var": np.ones(2, np.float32)}
    model = _bn_model(x, inits, n_out=3, training_mode=1, momentum=0.9)
    rep = hl.onnx.prepare(model)
    for _ in range(2):  # inference: outputs, not in-place updates, so both runs agree
        y, mean, var = rep.run([x])
        np.testing.assert_allclose(mean, 0.1 * x.mean((0, 2)), rtol=1e-5, atol=1e-7)
        np.testing.assert_allclose(var, 0.9 + 0.1 * x.var((0, 2)), rtol=1e-5)
        np.testing.assert_allclose(y.mean((0, 2)), 0, atol=1e-5)


def test_batch_norm_opset7_spatial0_normalizes_per_activation():
    r = _rng(42)
    x = r.normal(size=(3, 2, 4)).astype(np.float32)
    p = {k: r.random((2, 4)).astype(np.float32) + 0.5 for k in ("s", "b", "mean", "var")}
    (y,) = hl.onnx.prepare(_model("BatchNormalization", {"x": x}, p, opset=7, spatial=0)).run(
        [x])
    want = (x - p["mean"]) / np.sqrt(p["var"] + 1e-5) * p["s"] + p["b"]
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)


def test_layer_norm_gradients_and_statistics():
    torch = pytest.importorskip("torch")
    r = _rng(43)
    x = r.normal(size=(2, 3, 4))
    s, b = r.normal(size=(3, 4)), r.normal(size=(3, 4))
    model = _model("LayerNormalization", {"x": x}, {"s": s, "b": b}, opset=17, axis=1,
                   epsilon=1e-3)
    _check_grads(model, {"x": x}, {"s": s, "b": b},
                 lambda x, s, b: torch.nn.functional.layer_norm(x, (3, 4), s, b, eps=1e-3))
    _, mean, invstd = _run("LayerNormalization", {"x": x}, inits={"s": s, "b": b}, opset=17,
                           n_out=3, axis=1, epsilon=1e-3)
    np.testing.assert_allclose(mean, x.mean((1, 2), keepdims=True), rtol=1e-12)
    np.testing.assert_allclose(invstd, 1 / np.sqrt(x.var((1, 2), keepdims=True) + 1e-3),
                               rtol=1e-10)


def test_group_norm_scales_per_group_at_opset_18_per_channel_at_21():
    r = _rng(44)
    x = r.normal(size=(2, 4, 3)).astype(np.float32)
    g = x.reshape(2, 2, 6)
    norm = ((g - g.mean(-1, keepdims=True)) / np.sqrt(g.var(-1, keepdims=True) + 1e-5))
    norm = norm.reshape(2, 4, 3)
    s18, b18 = np.float32([2, 3]), np.float32([1, -1])
    # onnx.checker refuses the deprecated opset-18 op, so this model skips the check
    model = _model("GroupNormalization", {"x": x}, {"s": s18, "b": b18}, opset=18,
                   num_groups=2)
    (y,) = hl.onnx.prepare(model, check=False).run([x])
    np.testing.assert_allclose(y, norm * np.repeat(s18, 2)[:, None] + np.repeat(b18, 2)[:, None],
                               rtol=1e-4, atol=1e-5)
    s21, b21 = np.float32([1, 2, 3, 4]), np.float32([0, 1, 0, 1])
    (y,) = _run("GroupNormalization", {"x": x}, inits={"s": s21, "b": b21}, opset=21,
                num_groups=2)
    np.testing.assert_allclose(y, norm * s21[:, None] + b21[:, None], rtol=1e-4, atol=1e-5)


# ---- Dropout ---------------------------------------------------------------------------

@pytest.mark.parametrize("opset", [7, 10, 13])
def test_dropout_is_identity_in_inference_and_drops_in_training(opset):
    x = _rng(50).normal(size=(40, 50)) + 3.0
    kw = dict(ratio=0.25) if opset < 12 else {}
    inits = {"ratio": np.array(0.25)} if opset >= 12 else {}
    model = _model("Dropout", {"x": x}, inits, opset=opset, n_out=2,
                   out_types=[T.DOUBLE, T.DOUBLE if opset < 10 else T.BOOL], **kw)
    y, mask = hl.onnx.prepare(model).run([x])
    np.testing.assert_array_equal(y, x)
    assert mask.all()
    m = hl.onnx.ONNXModel(model)
    m.train()
    xt = hl.tensor(x)
    xt.requires_grad = True
    y, mask = m.forward(xt)
    F.sum(y).backward()
    keep = mask.numpy().astype(bool)
    assert 0.2 < 1 - keep.mean() < 0.3
    np.testing.assert_allclose(y.numpy(), np.where(keep, x / 0.75, 0), rtol=1e-12)
    np.testing.assert_allclose(xt.grad.numpy(), keep / 0.75, rtol=1e-12)


def test_dropout_training_mode_input_activates_it_in_inference():
    x = np.ones((100, 100), np.float32)
    y, mask = _run("Dropout", {"x": x}, inits={"r": np.float32(0.5), "t": np.array(True)},
                   opset=13, n_out=2, out_types=[T.FLOAT, T.BOOL])
    assert 0.4 < 1 - mask.mean() < 0.6
    np.testing.assert_array_equal(y, np.where(mask, 2.0, 0.0))


# ---- Softmax family and reductions: opset variants ----------------------------------------

def test_softmax_flattens_before_opset_13_and_acts_on_one_axis_after():
    x = _rng(60).normal(size=(2, 3, 4)).astype(np.float32)
    (old,) = _run("Softmax", {"x": x}, opset=11, axis=1)
    flat = np.exp(x.reshape(2, 12))
    np.testing.assert_allclose(old, (flat / flat.sum(1, keepdims=True)).reshape(2, 3, 4),
                               rtol=1e-5)
    (new,) = _run("Softmax", {"x": x}, opset=13, axis=1)
    e = np.exp(x)
    np.testing.assert_allclose(new, e / e.sum(1, keepdims=True), rtol=1e-5)
    (hard,) = _run("Hardmax", {"x": x}, opset=11, axis=1)
    want = np.zeros((2, 12), np.float32)
    want[np.arange(2), x.reshape(2, 12).argmax(1)] = 1
    np.testing.assert_array_equal(hard, want.reshape(2, 3, 4))


def test_reduce_axes_attribute_before_the_input_and_noop():
    x = _rng(61).normal(size=(2, 3, 4)).astype(np.float32)
    (a,) = _run("ReduceSum", {"x": x}, opset=11, axes=[0, -1], keepdims=0)
    (b,) = _run("ReduceSum", {"x": x}, inits={"axes": np.int64([0, -1])}, opset=13,
                keepdims=0)
    np.testing.assert_allclose(a, x.sum((0, 2)), rtol=1e-5)
    np.testing.assert_allclose(b, x.sum((0, 2)), rtol=1e-5)
    (c,) = _run("ReduceL1", {"x": x}, inits={"axes": np.int64([])}, opset=18,
                noop_with_empty_axes=1)
    np.testing.assert_array_equal(c, np.abs(x))  # no axis reduced, |x| still taken
    (d,) = _run("ReduceMax", {"x": x}, opset=18, keepdims=1)
    np.testing.assert_array_equal(d, x.max(keepdims=True))
    (e,) = _run("ReduceLogSumExp", {"x": np.zeros((2, 0), np.float32)}, opset=18,
                inits={"axes": np.int64([1])}, keepdims=0)
    np.testing.assert_array_equal(e, [-np.inf, -np.inf])


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceLogSumExp", "ReduceL2", "ReduceProd"])
def test_reduce_gradients(op):
    torch = pytest.importorskip("torch")
    x = _rng(62).normal(size=(3, 4, 5))
    fns = {"ReduceMax": lambda x: torch.amax(x, (0, 2), keepdim=True),
           "ReduceLogSumExp": lambda x: torch.logsumexp(x, (0, 2), keepdim=True),
           "ReduceL2": lambda x: torch.sqrt((x * x).sum((0, 2), keepdim=True)),
           "ReduceProd": lambda x: torch.prod(torch.prod(x, 2, keepdim=True), 0, keepdim=True)}
    _check_grads(_model(op, {"x": x}, opset=11, axes=[0, 2]), {"x": x}, {}, fns[op])


# ---- Resize --------------------------------------------------------------------------------

@pytest.mark.parametrize("mode,coord,torch_mode,align", [
    ("linear", "half_pixel", "bilinear", False),
    ("linear", "align_corners", "bilinear", True),
    ("cubic", "half_pixel", "bicubic", False)])
def test_resize_gradients_match_interpolate(mode, coord, torch_mode, align):
    torch = pytest.importorskip("torch")
    x = _rng(70).normal(size=(2, 3, 5, 4))
    model = _model("Resize", {"x": x}, {"roi": np.zeros(0), "scales": np.zeros(0),
                                        "sizes": np.int64([2, 3, 8, 7])},
                   opset=13, mode=mode, coordinate_transformation_mode=coord)
    _check_grads(model, {"x": x}, {},
                 lambda x: torch.nn.functional.interpolate(x, size=(8, 7), mode=torch_mode,
                                                           align_corners=align))


def test_resize_generic_path_matches_the_core_and_onnxruntime():
    from hl.onnx.ops import resize as nn
    x = _rng(71).normal(size=(1, 2, 5, 6)).astype(np.float32)
    # the core only gets scales where input * scale is a whole size (with a fractional one
    # align_corners divides by it, which the core does not)
    for coord in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
        for sh, sw in ((0.4, 0.5), (1.6, 1.5), (3.0, 0.5), (0.2, 2.0)):
            src_h = nn._source_coords(coord, round(5 * sh), 5, sh, None)
            src_w = nn._source_coords(coord, round(6 * sw), 6, sw, None)
            mh = nn._interp_matrix(src_h, 5, "linear", sh, -0.75, False, False)
            mw = nn._interp_matrix(src_w, 6, "linear", sw, -0.75, False, False)
            generic = np.einsum("hi,ncij,wj->nchw", mh, x, mw)
            core = F.resize(hl.tensor(x), scales=[1, 1, sh, sw], mode="linear",
                            coordinate_transformation_mode=coord).numpy()
            np.testing.assert_allclose(generic, core, rtol=1e-5, atol=1e-5,
                                       err_msg=f"{coord} {sh} {sw}")
    ort = pytest.importorskip("onnxruntime")
    for opset, attrs in ((10, dict(mode="nearest")), (10, dict(mode="linear")),
                         (19, dict(mode="cubic", antialias=1)),
                         (19, dict(mode="nearest", nearest_mode="ceil",
                                   coordinate_transformation_mode="pytorch_half_pixel"))):
        inits = {"scales": np.float32([1, 1, 0.6, 2.5])} if opset == 10 else \
            {"roi": np.zeros(0, np.float32), "scales": np.float32([1, 1, 0.6, 2.5])}
        model = _model("Resize", {"x": x}, inits, opset=opset, **attrs)
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(hl.onnx.prepare(model).run([x])[0],
                                   sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-5,
                                   err_msg=f"opset {opset} {attrs}")


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint8])
def test_resize_nearest_runs_on_the_core_for_every_rule_and_dtype(dtype):
    # nearest Resize by whole factors goes to the core's gather (any dtype): against
    # onnxruntime for the four rounding rules and the coordinate modes, with scales or sizes.
    # (Fractional factors keep the importer's index maps: where a source coordinate lands on
    # a rounding boundary, onnxruntime's float32 and ONNX's float64 reference disagree, e.g.
    # half_pixel, floor, 5 -> 3.)
    ort = pytest.importorskip("onnxruntime")
    rng = _rng(72)
    for shape, scales in (((1, 2, 5, 6), [1, 1, 2, 3]), ((2, 1, 3, 4, 5), [1, 1, 1, 2, 4])):
        x = (rng.normal(size=shape) * 50).astype(dtype)
        for coord in ("half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"):
            for rule in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil"):
                attrs = dict(mode="nearest", coordinate_transformation_mode=coord,
                             nearest_mode=rule)
                for inits in ({"roi": np.zeros(0, np.float32), "scales": np.float32(scales)},
                              {"roi": np.zeros(0, np.float32), "scales": np.zeros(0, np.float32),
                               "sizes": np.int64([int(s * f) for s, f in zip(shape, scales)])}):
                    model = _model("Resize", {"x": x}, inits, opset=19, **attrs)
                    sess = ort.InferenceSession(model.SerializeToString(),
                                                providers=["CPUExecutionProvider"])
                    np.testing.assert_array_equal(hl.onnx.prepare(model).run([x])[0],
                                                  sess.run(None, {"x": x})[0],
                                                  err_msg=f"{shape} {attrs} {list(inits)}")


def test_resize_nearest_gradient_matches_torch():
    torch = pytest.importorskip("torch")
    x = _rng(73).normal(size=(2, 3, 4, 5))
    model = _model("Resize", {"x": x}, {"roi": np.zeros(0), "scales": np.float32([1, 1, 2.5, 0.6])},
                   order=["x", "roi", "scales"], opset=19, mode="nearest",
                   coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    _check_grads(model, {"x": x}, {},
                 lambda x: torch.nn.functional.interpolate(x, scale_factor=(2.5, 0.6),
                                                           mode="nearest"))

def test_upsample_opset7_attribute_and_opset9_input():
    x = np.arange(6, dtype=np.float32).reshape(1, 1, 2, 3)
    want = x.repeat(2, axis=2).repeat(3, axis=3)
    (a,) = _run("Upsample", {"x": x}, opset=7, scales=[1.0, 1.0, 2.0, 3.0])
    (b,) = _run("Upsample", {"x": x}, inits={"s": np.float32([1, 1, 2, 3])}, opset=9)
    np.testing.assert_array_equal(a, want)
    np.testing.assert_array_equal(b, want)


# ---- losses ------------------------------------------------------------------------------

def test_softmax_cross_entropy_gradients_with_weights_and_ignore_index():
    torch = pytest.importorskip("torch")
    r = _rng(80)
    x = r.normal(size=(4, 3, 2))
    t = np.int64([[0, 2], [1, -1], [2, 2], [-1, 0]])
    wt = r.random(3) + 0.5
    model = _model("SoftmaxCrossEntropyLoss", {"x": x}, {"w": wt}, order=["x", "t", "w"],
                   opset=13, ignore_index=-1, out_rank=0)
    model.graph.initializer.append(numpy_helper.from_array(t, "t"))
    tt = torch.tensor(t)

    def weighted_mean(x, w):  # torch's cross_entropy, written out: torch cannot
        keep = tt != -1       # differentiate it with respect to the weights
        safe = torch.where(keep, tt, 0)
        nll = -torch.log_softmax(x, 1).gather(1, safe[:, None]).squeeze(1)
        wt_ = w[safe] * keep
        want = torch.nn.functional.cross_entropy(x, tt, weight=w.detach(), ignore_index=-1)
        np.testing.assert_allclose(((nll * wt_).sum() / wt_.sum()).detach().numpy(),
                                   want.detach().numpy(), rtol=1e-12)
        return (nll * wt_).sum() / wt_.sum()
    _check_grads(model, {"x": x}, {"w": wt}, weighted_mean)


# ---- bad input -----------------------------------------------------------------------------

def _raises(kind, match, op, inputs, **kw):
    with pytest.raises(kind, match=match) as info:
        _run(op, inputs, **kw)
    assert f"my_{op.lower()}" in str(info.value)  # the error names the node


def test_bad_input_raises_clear_errors():
    x = np.zeros((1, 3, 5, 5), np.float32)
    _raises(errors.ShapeError, "do not fit input", "Conv", {"x": x},
            inits={"w": np.zeros((2, 2, 3, 3), np.float32)})
    _raises(errors.ShapeError, "kernel_shape", "MaxPool", {"x": x}, kernel_shape=[2])
    _raises(errors.ValueError, "exactly one of scales and sizes", "Resize", {"x": x},
            inits={"roi": np.zeros(0, np.float32), "s": np.float32([1, 1, 2, 2]),
                   "z": np.int64([1, 3, 4, 4])}, opset=13)
    _raises(errors.ShapeError, "4 entries", "Resize", {"x": x},
            inits={"roi": np.zeros(0, np.float32), "s": np.float32([2, 2])}, opset=13)
    _raises(errors.ValueError, "repeat", "ReduceSum", {"x": x}, opset=11, axes=[1, -3])
    _raises(errors.IndexError, "out of range", "ReduceMean", {"x": x}, opset=11, axes=[4])
    _raises(errors.ShapeError, "scale of shape", "BatchNormalization", {"x": x},
            inits={k: np.ones(2, np.float32) for k in "sbmv"}, opset=15)
    _raises(errors.ValueError, r"ratio must be in \[0, 1\)", "Dropout", {"x": x},
            inits={"r": np.float32(1.0), "t": np.array(True)}, opset=13)
    _raises(errors.ValueError, "num_groups", "GroupNormalization", {"x": x},
            inits={"s": np.ones(2, np.float32), "b": np.ones(2, np.float32)}, num_groups=2)
    scores = np.zeros((2, 3), np.float32)
    _raises(errors.IndexError, "outside", "NegativeLogLikelihoodLoss", {"x": scores},
            inits={"t": np.int64([0, 3])}, opset=13)
    _raises(errors.IndexError, "outside", "SoftmaxCrossEntropyLoss", {"x": scores},
            inits={"t": np.int64([-1, 0])}, opset=13, ignore_index=5)
    _raises(errors.IndexError, "indices must lie", "MaxUnpool", {"x": np.ones((1, 1, 2, 2))},
            inits={"i": np.int64([[[[0, 1], [2, 99]]]])}, opset=11, kernel_shape=[2, 2],
            strides=[2, 2])
