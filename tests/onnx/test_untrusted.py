"""Untrusted ONNX files (issue 17): the byte-size limit on what a node creates, malformed
names and attributes, attribute validation. Each must give an ONNXError (or another hl
error), never a MemoryError, a UnicodeDecodeError or a ZeroDivisionError."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl.onnx
from hl import errors


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, shape, t=TensorProto.FLOAT):
    return helper.make_tensor_value_info(name, t, shape)


def _in_child(code, limit_gib=1):
    """Runs code in a fresh interpreter capped at limit_gib of address space (so an
    allocation the limit failed to stop shows as a MemoryError, not a dead machine)."""
    cap = limit_gib << 30
    head = "" if "libasan" in os.environ.get("LD_PRELOAD", "") else \
        f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))\n"
    # (under AddressSanitizer, whose shadow memory needs terabytes of address space, uncapped)
    out = subprocess.run([sys.executable, "-c", head + textwrap.dedent(code)],
                         capture_output=True, text=True, timeout=120)
    return out.returncode, out.stdout + out.stderr


def test_pad_counts_bytes_not_elements():
    """2 x 1e9 int64 is 16 GB: it passed the element limit (2**31)."""
    m = _model([helper.make_node("Pad", ["x", "pads"], ["y"])],
               [_vi("x", [2, 1], TensorProto.INT64)], [_vi("y", ["a", "b"], TensorProto.INT64)],
               [numpy_helper.from_array(np.array([0, 0, 0, 10 ** 9 - 1], np.int64), "pads")])
    rep = hl.onnx.prepare(m)
    with pytest.raises(errors.ShapeError, match="bytes"):
        rep.run([np.ones((2, 1), np.int64)])


def test_a_1kb_constant_of_shape_model_is_refused_in_bounded_memory():
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"],
                                 value=numpy_helper.from_array(np.ones(1, np.float32)))],
               [], [_vi("y", ["a", "b", "c"])],
               [numpy_helper.from_array(np.array([1200, 1000, 1000], np.int64), "s")])
    data = m.SerializeToString()
    assert len(data) < 1024
    code, out = _in_child(f"""
        import hl.onnx, hl.errors
        try:
            hl.onnx.prepare({data!r}).run([])
        except hl.errors.ShapeError as e:
            print("refused:", e)
    """)
    assert "refused:" in out and "bytes" in out, out


def test_the_limit_is_settable():
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [_vi("y", ["a", "b"])],
               [numpy_helper.from_array(np.array([1024, 1024], np.int64), "s")])
    previous = hl.onnx.set_max_tensor_bytes(1 << 20)
    try:
        with pytest.raises(errors.ShapeError, match="set_max_tensor_bytes"):
            hl.onnx.prepare(m).run([])
    finally:
        hl.onnx.set_max_tensor_bytes(previous)
    assert hl.onnx.prepare(m).run([])[0].shape == (1024, 1024)
    with pytest.raises(errors.ValueError):
        hl.onnx.set_max_tensor_bytes(0)


def _raw_replace(model, old, new):
    data = model.SerializeToString()
    assert data.count(old) >= 1 and len(old) == len(new)
    return data.replace(old, new)


def test_invalid_utf8_in_names_never_leaks_a_unicode_error(tmp_path):
    """Protobuf may keep a name's bytes as they are (then the model runs) or refuse them;
    either way hl answers with a result or an hl error, never a UnicodeDecodeError."""
    m = _model([helper.make_node("Relu", ["x"], ["yQQQ"], name="nodeQQQ"),
                helper.make_node("Identity", ["yQQQ"], ["y"])],
               [_vi("x", [2])], [_vi("y", [2])])
    x = np.array([-1.0, 2.0], np.float32)
    for bad in (b"\xff\xfe\xfd", b"\xc3\x28\x80"):
        data = _raw_replace(m, b"QQQ", bad)
        path = tmp_path / "bad.onnx"
        path.write_bytes(data)
        for source in (data, str(path)):
            try:
                out = hl.onnx.prepare(source).run([x])[0]
            except errors.HLError:
                continue
            np.testing.assert_array_equal(out, np.maximum(x, 0))


def test_invalid_utf8_in_a_string_attribute_gives_an_onnx_error():
    m = _model([helper.make_node("Pad", ["x", "pads"], ["y"], mode="QQQQQQ")],
               [_vi("x", [2])], [_vi("y", ["a"])],
               [numpy_helper.from_array(np.array([1, 1], np.int64), "pads")])
    data = _raw_replace(m, b"QQQQQQ", b"\xff" * 6)
    model = onnx.load_from_string(data)
    with pytest.raises(errors.HLError):
        hl.onnx.prepare(model, check=False)


@pytest.mark.parametrize("op", ["LpPool", "GlobalLpPool"])
@pytest.mark.parametrize("p", [0, -2])
def test_lp_pool_needs_a_positive_order(op, p):
    kw = {"kernel_shape": [2, 2]} if op == "LpPool" else {}
    m = _model([helper.make_node(op, ["x"], ["y"], p=p, **kw)],
               [_vi("x", [1, 1, 4, 4])], [_vi("y", ["a", "b", "c", "d"])])
    with pytest.raises(errors.ValueError, match="p must be a positive"):
        hl.onnx.prepare(m, check=False).run([np.ones((1, 1, 4, 4), np.float32)])


def test_a_tensor_attribute_whose_data_does_not_fit_its_dims():
    t = numpy_helper.from_array(np.ones(4, np.float32))
    t.dims[:] = [1000]
    m = _model([helper.make_node("Constant", [], ["y"], value=t)], [], [_vi("y", ["a"])])
    with pytest.raises(errors.HLError):
        hl.onnx.prepare(m, check=False).run([])

