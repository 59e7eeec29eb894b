"""Small ONNX models built with onnx.helper for the tests, with their weights as numpy."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper


def small_cnn(seed=0, classes=5, opset=17, batch="N"):
    """x (batch, 3, 8, 8) -> Conv 3x3 pad 1 -> BatchNormalization -> Relu -> MaxPool 2
    -> Conv 3x3 -> Relu -> GlobalAveragePool -> Flatten -> Gemm(transB) -> logits.
    Returns (model, weights {name: array})."""
    rng = np.random.default_rng(seed)
    w = {
        "conv1.weight": rng.normal(0, 0.3, (4, 3, 3, 3)).astype(np.float32),
        "conv1.bias": rng.normal(0, 0.1, 4).astype(np.float32),
        "bn1.weight": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "bn1.bias": rng.normal(0, 0.1, 4).astype(np.float32),
        "bn1.running_mean": rng.normal(0, 0.1, 4).astype(np.float32),
        "bn1.running_var": rng.uniform(0.5, 1.5, 4).astype(np.float32),
        "conv2.weight": rng.normal(0, 0.3, (6, 4, 3, 3)).astype(np.float32),
        "conv2.bias": rng.normal(0, 0.1, 6).astype(np.float32),
        "fc.weight": rng.normal(0, 0.3, (classes, 6)).astype(np.float32),
        "fc.bias": rng.normal(0, 0.1, classes).astype(np.float32),
    }
    nodes = [
        helper.make_node("Conv", ["x", "conv1.weight", "conv1.bias"], ["c1"], name="conv1",
                         kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c1", "bn1.weight", "bn1.bias",
                                                "bn1.running_mean", "bn1.running_var"],
                         ["b1"], name="bn1", epsilon=1e-5, momentum=0.9),
        helper.make_node("Relu", ["b1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2],
                         strides=[2, 2]),
        helper.make_node("Conv", ["p1", "conv2.weight", "conv2.bias"], ["c2"], name="conv2",
                         kernel_shape=[3, 3]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
        helper.make_node("Gemm", ["f", "fc.weight", "fc.bias"], ["logits"], name="fc",
                         transB=1),
    ]
    graph = helper.make_graph(
        nodes, "small_cnn",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, classes])],
        [numpy_helper.from_array(v, k) for k, v in w.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return model, w


def ort_run(model, feeds, extra_outputs=()):
    """onnxruntime's outputs for ``model`` (with ``extra_outputs`` added as graph outputs)."""
    import onnxruntime as ort
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for name in extra_outputs:
        m.graph.output.append(helper.make_empty_tensor_value_info(name))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def check_grads(model, feeds, params, torch_fn, rtol, atol, train=False):
    """Runs ``model`` (float64) through ONNXModel.forward, backpropagates sum(y * w) for a
    random w, and compares the output and the gradients of the inputs ``feeds`` and of the
    trainable initializers ``params`` ({ONNX name: array}) with ``torch_fn``'s under torch
    autograd. Returns the ONNXModel."""
    torch = pytest.importorskip("torch")
    import hl
    import hl.onnx
    F = hl.autograd.functional
    m = hl.onnx.ONNXModel(model)
    m.train(train)
    xs = {k: hl.tensor(v) for k, v in feeds.items()}
    for t in xs.values():
        t.requires_grad = True
    y = m.forward(xs)[0]
    w = np.random.default_rng(7).normal(size=y.shape)
    F.sum(F.mul(y, hl.tensor(w))).backward()
    local = {onnx_name: name for name, onnx_name in m.onnx_names.items()}
    got = {k: xs[k].grad for k in feeds}
    got.update({k: getattr(m, local[k]).grad for k in params})
    ts = {k: torch.tensor(v, requires_grad=True) for k, v in {**feeds, **params}.items()}
    want_y = torch_fn(**ts)
    (want_y * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(y.numpy(), want_y.detach().numpy(), rtol=rtol, atol=atol)
    for k, t in ts.items():
        np.testing.assert_allclose(got[k].numpy(), t.grad.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"gradient of {k}")
    return m
