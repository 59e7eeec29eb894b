"""depth_to_space / space_to_depth (and PyTorch's pixel_shuffle / pixel_unshuffle names):
values against PyTorch CPU and onnxruntime, float64 finite-difference gradients, export round
trip through onnxruntime, and the errors."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn

# (N, C, H, W) shapes with a blocksize that fits them
CASES = [((2, 8, 3, 5), 2), ((1, 27, 2, 2), 3), ((3, 4, 1, 1), 1)]


def _onnx_model(op, shape, out_shape, **attrs):
    import onnx
    from onnx import TensorProto, helper
    node = helper.make_node(op, ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _ort(model, x):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"x": x})[0]


@pytest.mark.parametrize("shape,b", CASES)
def test_pixel_shuffle_and_unshuffle_match_torch_with_gradients(shape, b):
    check_torch(lambda x: hl.pixel_shuffle(x, b),
                lambda x: __import__("torch").nn.functional.pixel_shuffle(x, b), [randn(*shape)])
    n, c, h, w = shape
    y_shape = (n, c // (b * b), h * b, w * b)
    check_torch(lambda x: hl.pixel_unshuffle(x, b),
                lambda x: __import__("torch").nn.functional.pixel_unshuffle(x, b),
                [randn(*y_shape)])


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
@pytest.mark.parametrize("shape,b", CASES)
def test_both_modes_match_onnxruntime_and_invert_each_other(shape, b, mode):
    x = randn(*shape).astype(np.float32)
    n, c, h, w = shape
    out_shape = [n, c // (b * b), h * b, w * b]
    want = _ort(_onnx_model("DepthToSpace", list(shape), out_shape, blocksize=b, mode=mode), x)
    y = hl.depth_to_space(hl.tensor(x), b, mode)
    np.testing.assert_array_equal(y.numpy(), want)  # a permutation: exact
    np.testing.assert_array_equal(hl.space_to_depth(y, b, mode).numpy(), x)
    if mode == "DCR":  # ONNX's SpaceToDepth has DCR only
        back = _ort(_onnx_model("SpaceToDepth", out_shape, list(shape), blocksize=b), want)
        np.testing.assert_array_equal(back, x)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_gradients_against_finite_differences(mode):
    check_grad(lambda x: hl.depth_to_space(x, 2, mode), [randn(2, 8, 2, 3)])
    check_grad(lambda x: hl.space_to_depth(x, 2, mode), [randn(2, 2, 4, 6)])


def test_the_imported_node_and_the_exported_model_agree_with_onnxruntime():
    x = randn(2, 12, 3, 3).astype(np.float32)
    model = _onnx_model("DepthToSpace", [2, 12, 3, 3], [2, 3, 6, 6], blocksize=2, mode="CRD")
    (y,) = hl.onnx.ONNXModel(model, trainable=False).forward(hl.tensor(x))
    np.testing.assert_array_equal(y.numpy(), _ort(model, x))

    class Up(hl.Module):
        def forward(self, t):
            return hl.pixel_shuffle(t, 2)

    exported = hl.onnx.to_onnx(Up(), [hl.tensor(x)])
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(exported.SerializeToString(), providers=["CPUExecutionProvider"])
    (got,) = sess.run(None, {sess.get_inputs()[0].name: x})
    np.testing.assert_array_equal(got, hl.pixel_shuffle(hl.tensor(x), 2).numpy())


@pytest.mark.parametrize("call,err,match", [
    (lambda: hl.depth_to_space(hl.zeros((2, 6, 3, 3)), 2), hl.errors.ShapeError,
     r"depth_to_space: channels 6 of \(2, 6, 3, 3\) are not divisible by blocksize\^2 \(4\)"),
    (lambda: hl.space_to_depth(hl.zeros((1, 1, 3, 4)), 2), hl.errors.ShapeError,
     r"space_to_depth: spatial size \(3, 4\) .* not divisible by blocksize 2"),
    (lambda: hl.depth_to_space(hl.zeros((4, 4, 4)), 2), hl.errors.ShapeError,
     r"depth_to_space: input must be 4-D"),
    (lambda: hl.depth_to_space(hl.zeros((1, 4, 1, 1)), 0), hl.errors.ValueError,
     r"blocksize must be a positive integer, got 0"),
    (lambda: hl.depth_to_space(hl.zeros((1, 4, 1, 1)), 2, "RDC"), hl.errors.ValueError,
     r"mode must be 'DCR' or 'CRD'"),
])
def test_bad_arguments_name_the_op_and_the_shapes(call, err, match):
    with pytest.raises(err, match=match):
        call()


def test_on_placeholders_the_shape_comes_from_the_same_code():
    p = hl.Placeholder((4, 8, 3, 5))
    assert tuple(hl.pixel_shuffle(p, 2).shape) == (4, 2, 6, 10)
    assert tuple(hl.space_to_depth(p, 1).shape) == (4, 8, 3, 5)
