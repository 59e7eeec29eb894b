"""Crafted bad models and bad inputs: each must raise a clear hl error at import or before
any kernel runs (operator-specific cases, such as Gather indices out of range, are in the
per-family test modules)."""
import os

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl.onnx
from hl import errors

from ._models import small_cnn


def _model(nodes, inputs, outputs, inits=(), opset=17, domains=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=ops)


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def test_a_model_that_fails_the_checker():
    # Relu has no attribute 'alpha': the checker rejects the node
    m = _model([helper.make_node("Relu", ["x"], ["y"], alpha=0.1)], [_vi("x", [2])],
               [_vi("y", [2])])
    with pytest.raises(errors.ONNXError, match="fails onnx.checker"):
        hl.onnx.prepare(m)


def test_an_unreadable_file(tmp_path):
    path = tmp_path / "broken.onnx"
    model, _ = small_cnn()
    path.write_bytes(model.SerializeToString()[:100])
    with pytest.raises(errors.ONNXError, match="broken.onnx"):
        hl.onnx.prepare(str(path))
    with pytest.raises(errors.ONNXError, match="does not exist"):
        hl.onnx.prepare(str(tmp_path / "missing.onnx"))


def test_unsupported_operator_names_op_domain_opset_and_node():
    m = _model([helper.make_node("Frobnicate", ["x"], ["y"], name="frob1",
                                 domain="com.example")],
               [_vi("x", [2])], [_vi("y", [2])], domains=["com.example"])
    with pytest.raises(errors.UnsupportedError) as e:
        hl.onnx.prepare(m)
    msg = str(e.value)
    assert "Frobnicate" in msg and "com.example" in msg and "opset 1" in msg and "frob1" in msg


def test_a_cycle():
    nodes = [helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
             helper.make_node("Relu", ["a"], ["b"], name="n2")]
    m = _model(nodes, [_vi("x", [2])], [_vi("b", [2])])
    with pytest.raises(errors.ONNXError):
        hl.onnx.prepare(m)  # the checker's topological-order rule
    with pytest.raises(errors.ONNXError, match="cycle.*n1.*n2|cycle.*n2.*n1"):
        hl.onnx.prepare(m, check=False)  # hl's own sort, for unchecked models


def test_a_value_nobody_makes():
    m = _model([helper.make_node("Relu", ["ghost"], ["y"], name="r")], [_vi("x", [2])],
               [_vi("y", [2])])
    with pytest.raises(errors.ONNXError, match="ghost"):
        hl.onnx.prepare(m, check=False)


def _external_model(tmp_path, location):
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.data_location = TensorProto.EXTERNAL
    w.ClearField("raw_data")
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = w.external_data.add()
        e.key, e.value = k, v
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [4])],
               [_vi("y", [4])], inits=[w])
    path = tmp_path / "sub" / "m.onnx"
    path.parent.mkdir()
    with open(path, "wb") as f:
        f.write(m.SerializeToString())
    return str(path)


def test_external_data_beside_the_model_loads(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    np.arange(4, dtype=np.float32).tofile(os.path.join(os.path.dirname(path), "w.bin"))
    (y,) = hl.onnx.prepare(path).run([np.ones(4, np.float32)])
    np.testing.assert_array_equal(y, np.arange(4) + 1.0)


@pytest.mark.parametrize("where", ["../outside.bin", "/etc/passwd", "link.bin"])
def test_external_data_outside_the_models_folder(tmp_path, where):
    (tmp_path / "outside.bin").write_bytes(np.ones(4, np.float32).tobytes())
    path = _external_model(tmp_path, where)
    if where == "link.bin":  # a symlink out of the folder is outside too
        os.symlink(tmp_path / "outside.bin", os.path.join(os.path.dirname(path), "link.bin"))
    with pytest.raises(errors.ONNXError, match="outside the model's folder"):
        hl.onnx.prepare(path)


def test_external_data_shorter_than_claimed(tmp_path):
    path = _external_model(tmp_path, "w.bin")
    np.ones(2, np.float32).tofile(os.path.join(os.path.dirname(path), "w.bin"))
    with pytest.raises(errors.ONNXError, match="holds 8"):
        hl.onnx.prepare(path)


def test_inputs_of_the_wrong_shape_dtype_or_number():
    model, _ = small_cnn()
    rep = hl.onnx.prepare(model)
    x = np.zeros((2, 3, 8, 8), np.float32)
    with pytest.raises(errors.ShapeError, match=r"'x'.*\(N, 3, 8, 8\).*\(2, 4, 8, 8\)"):
        rep.run([np.zeros((2, 4, 8, 8), np.float32)])
    with pytest.raises(errors.ShapeError, match="4 dimensions"):
        rep.run([np.zeros((3, 8, 8), np.float32)])
    with pytest.raises(errors.DTypeError, match="float32.*float64"):
        rep.run([x.astype(np.float64)])
    with pytest.raises(errors.ValueError, match="takes 1 inputs"):
        rep.run([x, x])
    with pytest.raises(errors.ValueError, match="missing inputs"):
        rep.run({})
    with pytest.raises(errors.ValueError, match="not inputs"):
        rep.run({"x": x, "z": x})


def test_a_symbolic_dimension_must_agree_across_inputs():
    m = _model([helper.make_node("Add", ["a", "b"], ["y"])],
               [_vi("a", ["N", 2]), _vi("b", ["N", 2])], [_vi("y", ["N", 2])])
    rep = hl.onnx.prepare(m)
    rep.run([np.ones((3, 2), np.float32)] * 2)
    with pytest.raises(errors.ShapeError, match="'N' is 3 in input 'a' but 4 in input 'b'"):
        rep.run([np.ones((3, 2), np.float32), np.ones((4, 2), np.float32)])


def test_a_kernel_error_names_the_node():
    # inputs declared with free lengths: the broadcast fails inside Add
    m = _model([helper.make_node("Add", ["a", "b"], ["y"], name="the_add")],
               [_vi("a", ["A"]), _vi("b", ["B"])], [_vi("y", ["C"])])
    with pytest.raises(errors.ShapeError, match="the_add"):
        hl.onnx.prepare(m).run([np.ones(3, np.float32), np.ones(4, np.float32)])


def test_initializer_data_that_does_not_fit_its_dims():
    w = numpy_helper.from_array(np.ones(4, np.float32), "w")
    w.dims[:] = [5]  # claims 5 values, holds 4
    m = _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", [5])], [_vi("y", [5])],
               inits=[w])
    with pytest.raises(errors.ONNXError, match="'w'.*cannot be read"):
        hl.onnx.prepare(m)
