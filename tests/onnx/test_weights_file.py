"""Large initializers read from the model file straight into hl tensors (weights_file.py):
the same values as onnx's own reader, the same answers as onnxruntime, and hostile or unusual
files either read correctly through onnx.load or refused with an ONNXError."""
import os
import threading

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl.onnx
from hl import errors
from hl.onnx import weights_file
from hl.onnx.load import load_model_and_weights

RNG = np.random.default_rng(21)


def _mlp_model(k=128, n=256, small=None):
    """x (2, k) @ W1 (k, n) + b1, relu, @ W2 (n, 3), with W1 and W2 past MIN_BYTES (64 KiB),
    b1 below it, and an int64 shape constant."""
    w1 = RNG.standard_normal((k, n)).astype(np.float32)
    w2 = RNG.standard_normal((n, 70)).astype(np.float64)
    b1 = RNG.standard_normal(n).astype(np.float32) if small is None else small
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Add", ["h", "b1"], ["a"]),
             helper.make_node("Relu", ["a"], ["r"]),
             helper.make_node("Cast", ["r"], ["r64"], to=TensorProto.DOUBLE),
             helper.make_node("MatMul", ["r64", "w2"], ["y"])]
    inits = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
             numpy_helper.from_array(w2, "w2")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", 1, [2, k])],
                              [helper.make_tensor_value_info("y", 11, [2, 70])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), (w1, b1, w2)


def _save(model, tmp_path, name="m.onnx"):
    path = tmp_path / name
    path.write_bytes(model.SerializeToString())
    return str(path)


def test_large_initializers_come_from_the_file_and_match_onnx(tmp_path):
    model, (w1, b1, w2) = _mlp_model()
    path = _save(model, tmp_path)
    proto, weights = weights_file.read(path)
    assert sorted(weights) == ["w1", "w2"]  # b1 (1 KiB) stays in the parsed message
    np.testing.assert_array_equal(weights["w1"].numpy(), w1)
    np.testing.assert_array_equal(weights["w2"].numpy(), w2)
    assert weights["w2"].dtype.name == "float64"
    by_name = {t.name: t for t in proto.graph.initializer}
    assert not by_name["w1"].raw_data and list(by_name["w1"].dims) == [128, 256]
    np.testing.assert_array_equal(numpy_helper.to_array(by_name["b1"]), b1)
    # the rest of the model is byte for byte what onnx parses
    for field in ("node", "input", "output"):
        assert list(getattr(proto.graph, field)) == list(getattr(model.graph, field))
    assert proto.opset_import == model.opset_import


def _vm_flags(address):
    """The VmFlags of the mapping that holds ``address`` (/proc/self/smaps)."""
    with open("/proc/self/smaps") as fh:
        inside = False
        for line in fh:
            head = line.split()[0]
            if "-" in head and not head.endswith(":"):
                lo, hi = (int(v, 16) for v in head.split("-"))
                inside = lo <= address < hi
            elif inside and head == "VmFlags:":
                return set(line.split()[1:])
    raise AssertionError(f"no mapping holds {address:#x}")


@pytest.mark.parametrize("for_training", [False, True])
def test_weights_read_for_inference_take_ordinary_pages(tmp_path, for_training):
    """Weights read once for inference are not given huge pages (hl_tensor_plain_pages:
    fresh huge pages are slow to come by on a VM); weights read to be trained keep the
    huge-page advice the CPU backend gives large blocks. Blocks from 4 MiB up get advice."""
    model, (w1, _, _) = _mlp_model(k=1024, n=2048)  # w1: 8 MiB
    path = _save(model, tmp_path)
    _, weights = weights_file.read(path, for_training=for_training)
    x = weights["w1"].numpy()
    np.testing.assert_array_equal(x, w1)
    flags = _vm_flags(x.ctypes.data)
    if not os.path.exists("/sys/kernel/mm/transparent_hugepage/enabled"):
        assert not flags & {"nh", "hg"}, flags  # a kernel without THP refuses both advices
        return
    assert ("nh" in flags) is not for_training and ("hg" in flags) is for_training, flags


def test_prepare_from_a_path_agrees_with_onnxruntime_and_with_a_modelproto(tmp_path):
    model, _ = _mlp_model()
    path = _save(model, tmp_path)
    x = RNG.standard_normal((2, 128)).astype(np.float32)
    want = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    got_path = hl.onnx.prepare(path).run([x])[0]
    got_proto = hl.onnx.prepare(model).run([x])[0]
    np.testing.assert_allclose(got_path, want, rtol=1e-5, atol=1e-4)  # float32 sums
    np.testing.assert_array_equal(got_path, got_proto)
    # trainable import from a path: the parameters hold the file's values
    m = hl.onnx.ONNXModel(path)
    vals = {k: v.numpy() for k, v in m.initializer_values().items()}
    np.testing.assert_array_equal(vals["w1"], numpy_helper.to_array(model.graph.initializer[0]))


def test_prepare_from_two_threads_at_once(tmp_path):
    model, _ = _mlp_model()
    path = _save(model, tmp_path)
    x = RNG.standard_normal((2, 128)).astype(np.float32)
    want = hl.onnx.prepare(model).run([x])[0]
    got, errs = [], []

    def work():
        try:
            for _ in range(3):
                got.append(hl.onnx.prepare(path).run([x])[0])
        except Exception as e:  # noqa: BLE001 - reported below
            errs.append(e)
    threads = [threading.Thread(target=work) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs and len(got) == 6
    for g in got:
        np.testing.assert_array_equal(g, want)


@pytest.mark.parametrize("parallel", [False, True])
def test_weights_read_on_one_or_two_threads(tmp_path, monkeypatch, parallel):
    """Large models' weights are read on hl's threads (weights_file.PARALLEL_MIN_BYTES, here
    lowered to 0 so that this small model takes that path too): the same values, and a file
    that ends while it is read (preadv returning nothing) still names the initializer."""
    model, (w1, _, w2) = _mlp_model()
    path = _save(model, tmp_path)
    prev = hl.get_num_threads()
    hl.set_num_threads(2)
    try:
        if parallel:
            monkeypatch.setattr(weights_file, "PARALLEL_MIN_BYTES", 0)
        _, weights = weights_file.read(path)
        np.testing.assert_array_equal(weights["w1"].numpy(), w1)
        np.testing.assert_array_equal(weights["w2"].numpy(), w2)
        w2_offset = open(path, "rb").read().index(w2.tobytes()[:64])
        real = os.preadv

        def short(fd, buffers, offset):
            return 0 if offset >= w2_offset else real(fd, buffers, offset)
        monkeypatch.setattr(os, "preadv", short)
        with pytest.raises(errors.ONNXError, match="initializer 'w2' ends early"):
            weights_file.read(path)
    finally:
        hl.set_num_threads(prev)


def test_raw_data_that_does_not_fit_its_dims_is_an_onnx_error(tmp_path):
    model, _ = _mlp_model()
    model.graph.initializer[0].dims[1] = 255  # 128 x 255 floats, 128 x 256 stored
    path = _save(model, tmp_path)
    with pytest.raises(errors.ONNXError, match="w1.*raw_data holds 131072 bytes"):
        hl.onnx.prepare(path, check=False)


@pytest.mark.parametrize("cut", [7, 1000, 70000, 200000])
def test_a_truncated_file_is_an_onnx_error(tmp_path, cut):
    model, _ = _mlp_model()
    data = model.SerializeToString()
    path = tmp_path / "cut.onnx"
    path.write_bytes(data[:len(data) - cut])
    assert weights_file.read(str(path)) is None  # lengths past the end: left to onnx.load
    with pytest.raises(errors.ONNXError):
        hl.onnx.prepare(str(path))


def test_unusual_files_take_onnx_load_and_still_run(tmp_path):
    x = RNG.standard_normal((2, 128)).astype(np.float32)
    # repeated initializer names, a group field, uint16 data (converted on the way in),
    # external data: onnx.load's path, same answers
    model, _ = _mlp_model()
    want = hl.onnx.prepare(model).run([x])[0]

    dup = onnx.ModelProto()
    dup.CopyFrom(model)
    dup.graph.initializer.append(dup.graph.initializer[0])
    assert weights_file.read(_save(dup, tmp_path, "dup.onnx")) is None

    grouped = model.SerializeToString() + bytes([0x5B, 0x5C])  # field 11, start/end group
    path = tmp_path / "group.onnx"
    path.write_bytes(grouped)
    assert weights_file.read(str(path)) is None

    ext = onnx.ModelProto()
    ext.CopyFrom(model)
    onnx.save_model(ext, str(tmp_path / "ext.onnx"), save_as_external_data=True,
                    all_tensors_to_one_file=True, location="ext.bin", size_threshold=1024)
    assert weights_file.read(str(tmp_path / "ext.onnx")) is None
    np.testing.assert_array_equal(hl.onnx.prepare(str(tmp_path / "ext.onnx")).run([x])[0],
                                  want)

    small = np.arange(40000, dtype=np.uint16)  # 80 KB of uint16: hl keeps it as int64
    u16 = _mlp_model()[0]
    u16.graph.initializer.append(numpy_helper.from_array(small, "u16"))
    path = _save(u16, tmp_path, "u16.onnx")
    assert weights_file.read(path) is None
    hl.onnx.prepare(path)


def test_garbage_is_refused(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_bytes(bytes(range(256)) * 500)
    assert weights_file.read(str(path)) is None
    with pytest.raises(errors.ONNXError, match="not a readable ONNX model"):
        hl.onnx.prepare(str(path))


def test_no_large_initializer_means_the_usual_path(tmp_path):
    model, _ = _mlp_model(k=4, n=8)
    for t in list(model.graph.initializer):
        if t.name == "w2":
            model.graph.initializer.remove(t)
            model.graph.initializer.append(numpy_helper.from_array(
                RNG.standard_normal((8, 70)), "w2"))
    path = _save(model, tmp_path)
    assert weights_file.read(path) is None
    proto, weights, _ = load_model_and_weights(path)
    assert weights == {} and len(proto.graph.initializer[0].raw_data) == 4 * 8 * 4
