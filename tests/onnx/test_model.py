"""hl.onnx.prepare / BackendRep.run and ONNXModel: the API around the importer (the operators
themselves are checked by the conformance cases and the per-family tests)."""
import warnings

import numpy as np
import pytest

import hl
import hl.onnx
from hl import errors

from ._models import ort_run, small_cnn

RTOL, ATOL = 1e-4, 1e-5  # float32 through the same ops in a different order


def _x(batch=2, seed=1):
    return np.random.default_rng(seed).normal(size=(batch, 3, 8, 8)).astype(np.float32)


# ---- prepare / run --------------------------------------------------------------------

def test_run_matches_onnxruntime_at_two_batch_sizes():
    pytest.importorskip("onnxruntime")
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    for batch in (2, 5):
        x = _x(batch)
        (want,) = ort_run(model, {"x": x})
        (got,) = rep.run([x])
        assert isinstance(got, np.ndarray) and got.shape == (batch, 5)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_run_takes_a_dict_or_hl_tensors():
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    x = _x()
    (a,) = rep.run([x])
    (b,) = rep.run({"x": x})
    (c,) = rep.run([hl.tensor(x)])
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a, c)


def test_prepare_reads_a_path(tmp_path):
    import onnx
    model, _ = small_cnn()
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    x = _x()
    np.testing.assert_array_equal(hl.onnx.prepare(str(path)).run([x])[0],
                                  hl.onnx.prepare(model).run([x])[0])


def test_last_layers_counts_as_singa_does():
    pytest.importorskip("onnxruntime")
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    names = [n.name for n in rep.nodes]
    assert names[-1] == "fc" and names[-2] == "flatten"
    x = _x()
    full, flat, relu1 = ort_run(model, {"x": x}, extra_outputs=["f", "r1"])
    # -2 is the last node (the whole graph), -3 the one before it (the features)
    np.testing.assert_allclose(rep.run([x], last_layers=-2)[0], full, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(rep.run([x], last_layers=-3)[0], flat, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(rep.run([x], last_layers=names.index("relu1"))[0], relu1,
                               rtol=RTOL, atol=ATOL)
    with pytest.raises(errors.IndexError, match="9 nodes"):
        rep.run([x], last_layers=9)


def test_aux_output_and_all_outputs():
    pytest.importorskip("onnxruntime")
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    x = _x()
    full, r1, g = ort_run(model, {"x": x}, extra_outputs=["r1", "g"])
    outs, aux = rep.run([x], aux_output=("r1", "g"))
    np.testing.assert_allclose(outs[0], full, rtol=RTOL, atol=ATOL)
    assert set(aux) == {"r1", "g"}
    np.testing.assert_allclose(aux["r1"], r1, rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(aux["g"], g, rtol=RTOL, atol=ATOL)
    every = rep.run([x], all_outputs=True)
    made = {o for n in rep.nodes for o in n.outputs}
    assert made <= set(every)
    np.testing.assert_allclose(every["g"], g, rtol=RTOL, atol=ATOL)
    with pytest.raises(errors.ValueError, match="nope"):
        rep.run([x], aux_output=("nope",))


def test_backend_api():
    model, _ = small_cnn()
    assert hl.onnx.Backend.supports_device("CPU")
    assert hl.onnx.Backend.is_compatible(model)
    x = _x()
    (a,) = hl.onnx.Backend.run_model(model, [x])
    np.testing.assert_array_equal(a, hl.onnx.prepare(model).run([x])[0])
    relu = model.graph.node[2]
    (y,) = hl.onnx.Backend.run_node(relu, [x - 0.5])
    np.testing.assert_array_equal(y, np.maximum(x - 0.5, 0))


def test_sonnx_names():
    from hl import sonnx
    model, _ = small_cnn()
    assert sonnx.SONNXModel is hl.onnx.ONNXModel
    x = _x()
    np.testing.assert_array_equal(sonnx.prepare(model, device=hl.cpu()).run([x])[0],
                                  hl.onnx.prepare(model).run([x])[0])
    relu = model.graph.node[2]
    np.testing.assert_array_equal(sonnx.run_node(relu, [x])[0], np.maximum(x, 0))


# ---- ONNXModel ------------------------------------------------------------------------

def test_initializers_become_named_params_and_bn_stats_states():
    model, w = small_cnn()
    m = hl.onnx.ONNXModel(model)
    params = m.get_params()
    states = m.get_states()
    assert set(params) == {"conv1_weight", "conv1_bias", "bn1_weight", "bn1_bias",
                           "conv2_weight", "conv2_bias", "fc_weight", "fc_bias"}
    assert {"bn1_running_mean", "bn1_running_var"} <= set(states) - set(params)
    assert m.onnx_names["conv1_weight"] == "conv1.weight"
    for local, onnx_name in m.onnx_names.items():
        np.testing.assert_array_equal(states[local].numpy(), w[onnx_name])


def test_forward_in_eval_mode_matches_prepare():
    model, _ = small_cnn()
    m = hl.onnx.ONNXModel(model)
    m.eval()
    x = _x()
    out = m.forward(hl.tensor(x))
    assert isinstance(out, list) and len(out) == 1
    np.testing.assert_allclose(out[0].numpy(), hl.onnx.prepare(model).run([x])[0],
                               rtol=1e-6, atol=1e-6)


def _torch_twin(w):
    torch = pytest.importorskip("torch")
    nn = torch.nn

    class Twin(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.bn1 = nn.BatchNorm2d(4, eps=1e-5, momentum=0.1)  # ONNX momentum 0.9
            self.conv2 = nn.Conv2d(4, 6, 3)
            self.fc = nn.Linear(6, 5)

        def forward(self, x):
            x = torch.max_pool2d(torch.relu(self.bn1(self.conv1(x))), 2, 2)
            x = torch.relu(self.conv2(x)).mean(dim=(2, 3))
            return self.fc(x)

    t = Twin()
    sd = {k: torch.from_numpy(v.copy()) for k, v in w.items()}
    t.load_state_dict(sd, strict=False)
    return t


@pytest.mark.parametrize("training", [False, True])
def test_gradients_match_pytorch(training):
    torch = pytest.importorskip("torch")
    model, w = small_cnn()
    twin = _torch_twin(w)
    twin.train(training)
    m = hl.onnx.ONNXModel(model)
    m.train(training)
    x = _x(4)
    r = np.random.default_rng(3).normal(size=(4, 5)).astype(np.float32)
    (y,) = m.forward(hl.tensor(x))
    loss = (y * hl.tensor(r)).sum()
    loss.backward()
    ty = twin(torch.from_numpy(x))
    (ty * torch.from_numpy(r)).sum().backward()
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    tparams = dict(twin.named_parameters())
    for local, onnx_name in m.onnx_names.items():
        if onnx_name in tparams:
            np.testing.assert_allclose(getattr(m, local).grad.numpy(),
                                       tparams[onnx_name].grad.numpy(), rtol=1e-3, atol=1e-5,
                                       err_msg=onnx_name)
    mean = m.get_states()["bn1_running_mean"].numpy()
    np.testing.assert_allclose(mean, twin.bn1.running_mean.numpy(), rtol=1e-5, atol=1e-6)


def _digits_like(n=96, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 5, n)
    x = rng.normal(0, 0.3, (n, 3, 8, 8)).astype(np.float32)
    x[np.arange(n), y % 3, y, y] += 3.0  # a learnable signal per class
    return x, y.astype(np.int64)


def test_fit_trains_an_imported_model_and_freeze_keeps_frozen_weights():
    model, _ = small_cnn()
    m = hl.onnx.ONNXModel(model)
    frozen = m.freeze("conv1", "bn1.")  # an hl prefix and an ONNX prefix
    assert set(frozen) == {"conv1_weight", "conv1_bias", "bn1_weight", "bn1_bias"}
    before = {k: v.numpy().copy() for k, v in m.get_states().items()}
    m.compile(optimizer=hl.opt.Adam(lr=0.01), loss="cross_entropy", metrics=["accuracy"])
    x, y = _digits_like()
    hl.manual_seed(0)
    hist = m.fit(x, y, epochs=4, batch_size=16, verbose=0)
    assert hist.history["loss"][-1] < hist.history["loss"][0]
    after = m.get_params()
    for k in frozen:
        np.testing.assert_array_equal(after[k].numpy(), before[k])
    assert not np.array_equal(after["fc_weight"].numpy(), before["fc_weight"])
    # a BatchNormalization with frozen scale and bias runs in inference mode (Keras's rule)
    for k in ("bn1_running_mean", "bn1_running_var"):
        np.testing.assert_array_equal(m.get_states()[k].numpy(), before[k])
    m.unfreeze()
    assert all(t.requires_grad for t in m.get_params().values())
    with pytest.raises(errors.ValueError, match="nosuch"):
        m.freeze("nosuch")


class _Transfer(hl.onnx.ONNXModel):
    def __init__(self, onnx_model):
        super().__init__(onnx_model)
        self.head = hl.layers.Linear(3)

    def forward(self, x):
        feats = super().forward(x, last_layers=-3)[0]  # before the classifier
        return self.head(feats)


def test_subclass_adds_a_head_and_trains_with_train_one_batch():
    model, _ = small_cnn()
    m = _Transfer(model)
    m.freeze()
    m.loss_fn = hl.losses.SoftmaxCrossEntropy()
    m.optim = hl.opt.SGD(lr=0.5)
    x, y = _digits_like(48)
    y = y % 3
    m.train()
    losses = []
    for _ in range(80):
        _, loss = m.train_one_batch(hl.tensor(x), hl.tensor(y))
        losses.append(float(loss.numpy()))
    assert losses[-1] < 0.9 * losses[0]  # only the head learns, from 6 random features
    assert set(m.get_params()) >= {"head.W", "head.b"}


def test_save_and_load_states_and_whole_model(tmp_path):
    model, _ = small_cnn()
    m = hl.onnx.ONNXModel(model)
    x, y = _digits_like(32)
    m.compile(optimizer="sgd", loss="cross_entropy")
    m.fit(x, y, epochs=1, batch_size=16, verbose=0)
    m.eval()
    want = m.forward(hl.tensor(x))[0].numpy()
    m.save_states(str(tmp_path / "s.zip"))
    fresh = hl.onnx.ONNXModel(model)
    fresh.eval()
    assert not np.allclose(fresh.forward(hl.tensor(x))[0].numpy(), want)
    fresh.load_states(str(tmp_path / "s.zip"))
    np.testing.assert_allclose(fresh.forward(hl.tensor(x))[0].numpy(), want, rtol=1e-6)
    hl.save(m, str(tmp_path / "m.hl"))
    back = hl.load(str(tmp_path / "m.hl"))
    assert isinstance(back, hl.onnx.ONNXModel)
    back.eval()
    np.testing.assert_allclose(back.forward(hl.tensor(x))[0].numpy(), want, rtol=1e-6)
    assert back.onnx_names == m.onnx_names


def test_inference_folds_batchnorm_into_the_conv_and_agrees_with_the_graph_as_written():
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    program = rep.model.program
    assert program.fused_nodes is not None and len(program.fused_skip) == 1  # conv1 + bn1
    x = _x(3)
    (fused,) = rep.run([x])
    exact = rep.run([x], all_outputs=True)["logits"]  # intermediates: runs unfused
    np.testing.assert_allclose(fused, exact, rtol=1e-5, atol=1e-6)
    assert hl.onnx.ONNXModel(model).program.fused_nodes is None  # weights train: no folding


def test_shape_arithmetic_is_computed_once_per_input_shape():
    from onnx import TensorProto, helper, numpy_helper
    # y = reshape(x, (shape(x)[0], -1)) + 1: the exporters' Shape/Gather/Unsqueeze/Concat chain
    nodes = [helper.make_node("Shape", ["x"], ["s"]),
             helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
             helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
             helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
             helper.make_node("Reshape", ["x", "shape"], ["r"]),
             helper.make_node("Add", ["r", "one"], ["y"])]
    inits = [numpy_helper.from_array(np.array(0, np.int64), "zero"),
             numpy_helper.from_array(np.array([0], np.int64), "axes"),
             numpy_helper.from_array(np.array([-1], np.int64), "minus1"),
             numpy_helper.from_array(np.array(1.0, np.float32), "one")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["N", 2, "L"])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["N", "M"])], inits)
    rep = hl.onnx.prepare(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    program = rep.model.program
    assert len(program.shape_nodes) == 4  # Shape, Gather, Unsqueeze, Concat
    for shape in [(2, 2, 3), (2, 2, 3), (5, 2, 1), (2, 2, 3)]:
        x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
        (y,) = rep.run([x])
        np.testing.assert_array_equal(y, x.reshape(shape[0], -1) + 1)
    assert len(program.shape_values) == 2  # one entry per input shape seen


@pytest.mark.parametrize("chain", ["nonzero", "computed_reshape"])
def test_shapes_set_by_data_are_not_cached_per_signature(chain):
    """A Shape downstream of an op whose output shape follows the data (NonZero; a
    ConstantOfShape sized by a ReduceMax of the input) is recomputed on each run: same input
    shape, different values, different answer (onnxruntime is the reference)."""
    pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    if chain == "nonzero":
        nodes = [helper.make_node("NonZero", ["x"], ["v"])]
    else:
        nodes = [helper.make_node("ReduceMax", ["x"], ["m"], keepdims=1),
                 helper.make_node("Cast", ["m"], ["n"], to=TensorProto.INT64),
                 helper.make_node("ConstantOfShape", ["n"], ["v"])]
    nodes.append(helper.make_node("Shape", ["v"], ["y"]))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [None])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl.onnx.prepare(model)
    for x in ([1, 0, 0, 0], [1, 1, 3, 0], [2, 0, 0, 0]):
        x = np.array(x, np.float32)
        (want,) = ort_run(model, {"x": x})
        with warnings.catch_warnings():  # "runs node by node, not as a plan": expected here
            warnings.simplefilter("ignore", RuntimeWarning)
            (got,) = rep.run([x])
        np.testing.assert_array_equal(got, want)


def test_compile_with_placeholders_builds_a_subclass_head():
    model, _ = small_cnn()
    m = _Transfer(model)
    out = m.forward(hl.Placeholder((4, 3, 8, 8)))
    assert tuple(out.shape) == (4, 3)
    m.compile([hl.Placeholder((4, 3, 8, 8))], is_train=False)
    assert tuple(m.get_params()["head.W"].shape) == (6, 3)  # created from the cut's width
