"""ONNX inference as libcore plans (hl/onnx/planned.py): from the second run of an input
signature, prepare().run() and ONNXModel inference replay a plan with the inputs bound to its
slots. References: onnxruntime on the same model and inputs, and the node-by-node run."""
import gc
import os
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
from hl import onnx as hl_onnx


def _cnn(rng):
    """Conv -> Relu -> MaxPool -> Flatten -> Gemm -> Sigmoid * 2 + 1 (a fused tail)."""
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "w")
    b = numpy_helper.from_array(rng.standard_normal(4).astype(np.float32) * 0.1, "b")
    fc = numpy_helper.from_array(rng.standard_normal((5, 4 * 4 * 4)).astype(np.float32) * 0.2,
                                 "fc")
    two = numpy_helper.from_array(np.array(2.0, np.float32), "two")
    one = numpy_helper.from_array(np.array(1.0, np.float32), "one")
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("Gemm", ["f", "fc"], ["g"], transB=1),
             helper.make_node("Sigmoid", ["g"], ["s"]),
             helper.make_node("Mul", ["s", "two"], ["m"]),
             helper.make_node("Add", ["m", "one"], ["y"])]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 5])], [w, b, fc, two, one])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _conv_relu(rng):
    """Conv -> Relu: an output as large as the input planes (N x 4 x H x W)."""
    w = numpy_helper.from_array(rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3, "w")
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"])]
    graph = helper.make_graph(
        nodes, "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4, "H", "W"])], [w])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_prepared_model_replays_a_plan_and_matches_onnxruntime():
    rng = np.random.default_rng(8)
    model = _cnn(rng)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = hl_onnx.prepare(model)
    program = rep.model.program
    results = []
    for k in range(4):
        x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
        (y,) = rep.run([x])
        results.append((y.copy(), y))
        np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-5, atol=1e-6)
    entries = [e for e in program.plans.entries.values() if e is not None]
    assert len(entries) == 1 and hl._core.plan_stats(entries[0].plan)["prepared"]
    for kept, returned in results:  # outputs are copies: later runs do not overwrite them
        np.testing.assert_array_equal(kept, returned)
    # another batch size is another signature: its own plan
    for _ in range(3):
        x = rng.standard_normal((5, 3, 8, 8)).astype(np.float32)
        np.testing.assert_allclose(rep.run([x])[0], sess.run(None, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6)
    assert len([e for e in program.plans.entries.values() if e is not None]) == 2


def test_threads_running_one_prepared_model_get_their_own_answers():
    rng = np.random.default_rng(9)
    model = _cnn(rng)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = hl_onnx.prepare(model)
    xs = [rng.standard_normal((3, 3, 8, 8)).astype(np.float32) for _ in range(8)]
    wants = [sess.run(None, {"x": x})[0] for x in xs]
    errors_seen = []

    def work(k):
        try:
            for _ in range(10):
                np.testing.assert_allclose(rep.run([xs[k]])[0], wants[k], rtol=1e-5, atol=1e-6)
        except Exception as e:  # noqa: BLE001 - reported below
            errors_seen.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(len(xs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors_seen, errors_seen[0]


def test_a_data_dependent_node_falls_back_once_with_a_warning():
    """NonZero's output shape depends on the values: the signature runs node by node."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]), helper.make_node("NonZero", ["r"], ["y"])]
    graph = helper.make_graph(
        nodes, "nz", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.INT64, [1, "n"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl_onnx.prepare(model)
    x = np.array([0, 1, 0, 2, 3, 0], np.float32)
    assert rep.run([x])[0].tolist() == [[1, 3, 4]]
    with pytest.warns(RuntimeWarning, match="runs node by node.*NonZero"):
        assert rep.run([x])[0].tolist() == [[1, 3, 4]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x[0] = 5
        assert rep.run([x])[0].tolist() == [[0, 1, 3, 4]]  # this run's values


@pytest.mark.parametrize("hw", [8, 72])
def test_replays_read_numpy_inputs_in_place_and_hand_over_their_outputs(hw):
    """From the third run the plan reads the caller's array itself (no copy) and gives each
    run's output its own memory: a copy made by the replay's call for small outputs (8x8),
    the plan's memory handed over for large ones (a 2 x 4 x 72 x 72 output: over 64 KiB);
    arrays that cannot be read in place (misaligned, strided) are copied. Every result
    against onnxruntime, every input left unchanged."""
    rng = np.random.default_rng(10)
    model = _cnn(rng) if hw == 8 else _conv_relu(rng)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = hl_onnx.prepare(model)
    raw = np.zeros(2 * 3 * hw * hw * 4 + 1, np.uint8)
    misaligned = np.frombuffer(raw.data, np.float32, 2 * 3 * hw * hw, 1).reshape(2, 3, hw, hw)
    wide = rng.standard_normal((2, 3, hw, 2 * hw)).astype(np.float32)
    kept = []
    for k in range(8):
        if k == 5:
            x = misaligned
            x[...] = rng.standard_normal(x.shape)
        elif k == 6:
            x = wide[..., ::2]  # strided: check_feeds makes it contiguous
        else:
            x = rng.standard_normal((2, 3, hw, hw)).astype(np.float32)
        before = x.copy()
        (y,) = rep.run([x])
        want = sess.run(None, {"x": before})[0]
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(x, before)
        assert all(not np.shares_memory(y, other) for other, _ in kept)
        kept.append((y, want))
        del x  # the plan's slot may still point at the array: nothing reads it until rebound
        gc.collect()
    for y, want in kept:
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    (entry,) = [e for e in rep.model.program.plans.entries.values() if e is not None]
    assert not entry.shared
    assert entry.arrays.copies == (hw == 8)


def test_outputs_sharing_memory_are_each_the_right_values():
    """Two outputs of one value (Identity) and an output also read by a later node: the
    replays give each output its values, in memory of its own."""
    nodes = [helper.make_node("Relu", ["x"], ["r"]),
             helper.make_node("Identity", ["r"], ["r2"]),
             helper.make_node("Neg", ["r"], ["n"])]
    graph = helper.make_graph(
        nodes, "shared", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3, 4]) for n in ("r", "r2", "n")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl_onnx.prepare(model)
    rng = np.random.default_rng(11)
    results = []
    for _ in range(5):
        x = rng.standard_normal((3, 4)).astype(np.float32)
        r, r2, n = rep.run([x])
        results.append((x, r, r2, n))
        assert not np.shares_memory(r, r2)
    for x, r, r2, n in results:
        np.testing.assert_array_equal(r, np.maximum(x, 0))
        np.testing.assert_array_equal(r2, np.maximum(x, 0))
        np.testing.assert_array_equal(n, -np.maximum(x, 0))


def test_bad_inputs_are_refused_after_the_plan_exists():
    """Replays of a known signature skip check_feeds (BackendRep.run's shortest path); any
    other input still meets its checks and their errors."""
    rng = np.random.default_rng(12)
    model = _cnn(rng)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rep = hl_onnx.prepare(model)
    x = rng.standard_normal((2, 3, 8, 8)).astype(np.float32)
    for _ in range(4):
        np.testing.assert_allclose(rep.run([x])[0], sess.run(None, {"x": x})[0], rtol=1e-5,
                                   atol=1e-6)
        np.testing.assert_allclose(rep.run({"x": x})[0], sess.run(None, {"x": x})[0],
                                   rtol=1e-5, atol=1e-6)
    with pytest.raises(hl.errors.DTypeError, match="must be float32, got float64"):
        rep.run([x.astype(np.float64)])
    with pytest.raises(hl.errors.ShapeError, match="dimension 1 is 4, not 3"):
        rep.run([np.zeros((2, 4, 8, 8), np.float32)])
    with pytest.raises(hl.errors.ValueError, match="are not inputs of the model"):
        rep.run({"x": x, "y": x})
    with pytest.raises(hl.errors.ValueError, match="takes 1 inputs"):
        rep.run([x, x])
    np.testing.assert_allclose(rep.run([hl.tensor(x)])[0], sess.run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)


def _inverted_residual(rng):
    """MobileNetV2's block at 96x96: 1x1 Conv + Clip (16 -> 96), depthwise 3x3 Conv + Clip,
    1x1 Conv (96 -> 16) + Add of the block's input."""
    def init(name, *shape):
        a = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 4)
        return numpy_helper.from_array(a.astype(np.float32), name)
    lo = numpy_helper.from_array(np.array(0.0, np.float32), "lo")
    hi = numpy_helper.from_array(np.array(6.0, np.float32), "hi")
    inits = [init("w1", 96, 16, 1, 1), init("b1", 96), init("wd", 96, 1, 3, 3), init("bd", 96),
             init("w2", 16, 96, 1, 1), init("b2", 16), lo, hi]
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["e"]),
             helper.make_node("Clip", ["e", "lo", "hi"], ["e6"]),
             helper.make_node("Conv", ["e6", "wd", "bd"], ["d"], group=96, pads=[1, 1, 1, 1]),
             helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]),
             helper.make_node("Conv", ["d6", "w2", "b2"], ["p"]),
             helper.make_node("Add", ["p", "x"], ["y"])]
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16, 96, 96])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 16, 96, 96])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("threads", [1, 2])
def test_large_convolutions_replayed_a_sample_at_a_time_match_onnxruntime(threads):
    # at batch 4 the block's tensors (3.5 MB a sample at 96 channels) outgrow the cache: the
    # plan runs its three convolutions one sample at a time (libcore/src/plan/slice.c); at
    # batch 1 layer by layer. Both agree with onnxruntime. Where the AVX2 or AVX-512 kernels
    # run, the expansion and the depthwise layer are one call (plan/fuse.c's fuse_expand_dw):
    # two calls sliced.
    fused = hl._core.cpu_kernels() != "portable" and os.environ.get("HL_CONV_AVX2", "") != "0"
    convs = 2 if fused else 3
    rng = np.random.default_rng(21)
    model = _inverted_residual(rng)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    prev = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        rep = hl_onnx.prepare(model)
        for batch, sliced in ((4, True), (1, False)):
            for _ in range(3):
                x = rng.standard_normal((batch, 16, 96, 96)).astype(np.float32)
                np.testing.assert_allclose(rep.run([x])[0], sess.run(None, {"x": x})[0],
                                           rtol=1e-4, atol=1e-4)
            plans = rep.model.program.plans.entries.values()
            stats = [hl._core.plan_stats(e.plan) for e in plans if e is not None]
            assert stats[-1]["sliced_runs"] == (1 if sliced else 0), stats[-1]
            assert stats[-1]["sliced_calls"] == (convs if sliced else 0), stats[-1]
            assert stats[-1]["expand_dw"] == 3 - convs, stats[-1]
    finally:
        hl.set_num_threads(prev)
