"""Inference fusions of hl/onnx/fuse.py: convolution epilogues (Conv [+ BatchNormalization]
+ Add + Relu/Clip/LeakyRelu/HardSigmoid run as one conv_fused node), and constant weights
packed once at prepare() for the CPU's kernels.

Each graph runs three ways: prepare()'d (fused), with all_outputs (the graph as written,
node by node) and in onnxruntime. Tolerance against onnxruntime: rtol 1e-5, atol 1e-5
(float32 sums in another order); fused against the graph as written: equal up to the BN
folding's rounding (rtol 1e-5), and exactly equal where no BN is folded.
"""
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
import hl.onnx
from hl.onnx import fuse
from tests.ops.test_conv import ref_conv

from ._models import ort_run

pytest.importorskip("onnxruntime")

RNG = np.random.default_rng(0)


def _init(name, shape, scale=0.3):
    return numpy_helper.from_array((RNG.standard_normal(shape) * scale).astype(np.float32), name)


def _model(nodes, inits, outputs=("y",), channels=4, opset=17):
    graph = helper.make_graph(
        nodes, "fuse", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                      ["n", channels, 9, 9])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, ["n", "c", "h", "w"])
         for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _fused_kinds(rep):
    """(activation, whether a residual) of each FusedConv that absorbed nodes (a lone Conv
    becomes one too, for its packed weight: see test_constant_weights_are_packed_once)."""
    nodes = rep.model.program.fused_nodes or []
    return sorted((n.epilogue[0], bool(n.inputs[3])) for n in nodes
                  if n.op_type == "FusedConv" and len(n.fused_chain) > 1)


def _check(model, batches=(1, 3)):
    rep = hl.onnx.prepare(model)
    for n in batches:
        x = RNG.standard_normal((n, 4, 9, 9)).astype(np.float32)
        got = rep.run([x])
        written = rep.run([x], all_outputs=True)
        want = ort_run(model, {"x": x})
        for g, o, w in zip(got, model.graph.output, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
            np.testing.assert_allclose(g, written[o.name], rtol=1e-5, atol=1e-6)
    return rep


def _bn(prefix, x, y, c=4):
    inits = [_init(f"{prefix}_s", (c,)), _init(f"{prefix}_b", (c,)), _init(f"{prefix}_m", (c,)),
             numpy_helper.from_array(RNG.uniform(0.5, 2, c).astype(np.float32), f"{prefix}_v")]
    node = helper.make_node("BatchNormalization", [x] + [i.name for i in inits], [y])
    return node, inits


def test_resnet_block_two_convs_one_add_relu():
    """conv-bn-relu-conv-bn, plus a 1x1 shortcut conv-bn, added, then Relu: one of the two
    convolutions takes the Add and the Relu (the other keeps its BN folding only)."""
    bn1, i1 = _bn("bn1", "c1", "b1")
    bn2, i2 = _bn("bn2", "c2", "b2")
    bn3, i3 = _bn("bn3", "c3", "b3")
    nodes = [helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]), bn1,
             helper.make_node("Relu", ["b1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1]), bn2,
             helper.make_node("Conv", ["x", "w3"], ["c3"]), bn3,
             helper.make_node("Add", ["b2", "b3"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    inits = [_init("w1", (4, 4, 3, 3)), _init("w2", (4, 4, 3, 3)), _init("w3", (4, 4, 1, 1))]
    rep = _check(_model(nodes, inits + i1 + i2 + i3))
    assert _fused_kinds(rep) == [("relu", False), ("relu", True)]


@pytest.mark.parametrize("opset", [9, 17])
def test_mobilenet_clip_and_a_residual_add_without_activation(opset):
    if opset >= 11:
        clip = helper.make_node("Clip", ["c1", "lo", "hi"], ["r1"])
        consts = [numpy_helper.from_array(np.array(0, np.float32), "lo"),
                  numpy_helper.from_array(np.array(6, np.float32), "hi")]
    else:
        clip = helper.make_node("Clip", ["c1"], ["r1"], min=0.0, max=6.0)
        consts = []
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1], group=4),
             clip,
             helper.make_node("Conv", ["r1", "w2"], ["c2"]),
             helper.make_node("Add", ["x", "c2"], ["y"])]
    inits = [_init("w1", (4, 1, 3, 3), 3), _init("b1", (4,)), _init("w2", (4, 4, 1, 1))]
    rep = _check(_model(nodes, inits + consts, opset=opset))
    assert _fused_kinds(rep) == [("clip", False), ("none", True)]


@pytest.mark.parametrize("op,attrs,act", [("LeakyRelu", {"alpha": 0.2}, "leaky_relu"),
                                          ("HardSigmoid", {"alpha": 0.3, "beta": 0.4},
                                           "hard_sigmoid"),
                                          ("Relu", {}, "relu")])
def test_activations(op, attrs, act):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node(op, ["c"], ["y"], **attrs)]
    rep = _check(_model(nodes, [_init("w", (4, 4, 3, 3), 2)]))
    assert _fused_kinds(rep) == [(act, False)]


def test_a_broadcasting_add_runs_the_absorbed_nodes():
    """Add of a (1, C, 1, 1) constant is absorbed, but the kernel takes only a residual of
    the output's shape: that call runs conv, add and relu one after another."""
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "shift"], ["s"]),
             helper.make_node("Relu", ["s"], ["y"])]
    rep = _check(_model(nodes, [_init("w", (4, 4, 3, 3)), _init("shift", (1, 4, 1, 1))]))
    assert _fused_kinds(rep) == [("relu", True)]


def test_values_read_twice_or_returned_are_not_fused_away():
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["y"]),
             helper.make_node("Conv", ["x", "w"], ["d"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["d"], ["e"]),
             helper.make_node("Sigmoid", ["d"], ["f"]),
             helper.make_node("Add", ["e", "f"], ["z"])]
    model = _model(nodes, [_init("w", (4, 4, 3, 3))], outputs=("y", "c", "z"))
    rep = _check(model)
    assert _fused_kinds(rep) == []


def test_fused_results_equal_the_graph_as_written_exactly_without_batchnorm():
    # 8 input channels: a 3x3 weight that is not packed (too few channels for Winograd, too
    # many for the stem kernel), so the fused node's product is the graph's own
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Add", ["c", "x"], ["s"]),
             helper.make_node("Clip", ["s", "", "hi"], ["y"])]
    hi = numpy_helper.from_array(np.array(0.5, np.float32), "hi")
    rep = hl.onnx.prepare(_model(nodes, [_init("w", (8, 8, 3, 3)), hi], channels=8))
    assert _fused_kinds(rep) == [("clip", True)]
    x = RNG.standard_normal((2, 8, 9, 9)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    (got,) = rep.run([x])
    np.testing.assert_array_equal(got, rep.run([x], all_outputs=True)["y"])
    assert np.isnan(got).any()


def test_constant_weights_are_packed_once():
    """Float32 constant Conv weights are packed at prepare() (hl.ops.conv_pack): 3x3
    stride-1 ones in Winograd's layout, 1x1 ones and stride-2 3x3 ones (read by phases,
    libcore cpu/conv_phases.c) as the product's panels, depthwise ones not at all; a lone
    Conv becomes a FusedConv node for it. The runs agree with onnxruntime, at channel counts
    Winograd and the packed product both take."""
    c = 16
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2"], ["c2"], pads=[1, 1, 1, 1], group=c),
             helper.make_node("Conv", ["c2", "w3"], ["c3"]),
             helper.make_node("Conv", ["c3", "w4"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2])]
    inits = [_init("w1", (c, c, 3, 3)), _init("b1", (c,)), _init("w2", (c, 1, 3, 3)),
             _init("w3", (24, c, 1, 1)), _init("w4", (8, 24, 3, 3))]
    graph = helper.make_graph(
        nodes, "pack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, 19, 17])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 8, 10, 9])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl.onnx.prepare(model)
    fused = {n.fused_chain[0].inputs[1]: n for n in rep.model.program.fused_nodes
             if n.op_type == "FusedConv"}
    assert sorted(fused) == ["w1", "w3", "w4"]  # not the depthwise w2
    # Winograd's kernels wait for the first call that takes Winograd (enough tiles)
    assert fused["w1"].packed_weight is fuse.WINOGRAD_LATER
    assert tuple(fused["w3"].packed_weight.shape) == (4, c, 6)  # 24 channels in 4 panels
    assert tuple(fused["w4"].packed_weight.shape) == (2, 24 * 9, 6)  # 8 channels, 2 panels
    for n in (1, 4):
        x = RNG.standard_normal((n, c, 19, 17)).astype(np.float32)
        (got,) = rep.run([x])
        (want,) = ort_run(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
        # 10 x 9 2x2 tiles, 5 x 5 4x4 ones per sample: F(4x4, 3x3)'s kernels (fuse.winograd_layout)
        assert list(fused["w1"].winograd_packs) == ["winograd43"]
        assert tuple(fused["w1"].winograd_packs["winograd43"].shape) == (6, 6, c, c)


@pytest.mark.parametrize("stride", [2, 1])
def test_rgb_stem_weights_are_packed_as_panels(stride):
    """A 3x3 Conv on at most 7 input channels (an RGB stem: MobileNetV2's 3 -> 32, stride 2)
    gets the product's panels at prepare() for the stem kernel (libcore cpu/conv_stem.c),
    with its Clip fused; the runs agree with onnxruntime and with float64."""
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                              strides=[stride, stride]),
             helper.make_node("Clip", ["c", "lo", "hi"], ["y"])]
    inits = [_init("w", (20, 3, 3, 3)), _init("b", (20,)),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    graph = helper.make_graph(
        nodes, "stem", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 37, 45])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", 20, "h", "w"])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl.onnx.prepare(model)
    (node,) = [n for n in rep.model.program.fused_nodes if n.op_type == "FusedConv"]
    assert tuple(node.packed_weight.shape) == (4, 27, 6)   # 20 channels in 4 panels of 6
    w = numpy_helper.to_array(inits[0]).astype(np.float64)
    b = numpy_helper.to_array(inits[1]).astype(np.float64)
    for n in (1, 2):
        x = RNG.standard_normal((n, 3, 37, 45)).astype(np.float32)
        (got,) = rep.run([x])
        np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-5, atol=1e-5)
        ref = ref_conv(x.astype(np.float64), w, b, [stride] * 2, [1] * 4, None, 1)
        np.testing.assert_allclose(got, np.clip(ref, 0, 6), rtol=1e-5, atol=1e-5)


def test_winograd_kernels_are_not_made_for_a_call_with_few_tiles():
    c = 16
    nodes = [helper.make_node("Conv", ["x", "w1"], ["y"], pads=[1, 1, 1, 1])]
    graph = helper.make_graph(
        nodes, "few", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", c, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["n", c, 5, 5])],
        [_init("w1", (c, c, 3, 3))])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    rep = hl.onnx.prepare(model)
    (node,) = [n for n in rep.model.program.fused_nodes if n.op_type == "FusedConv"]
    # 9 tiles, then 18 (HL_WINOGRAD_PACKED_MIN_TILES = 16)
    assert fuse.WINOGRAD_MIN_TILES == 16
    for n, packed in ((1, False), (1, False), (1, False), (2, True)):
        x = RNG.standard_normal((n, c, 5, 5)).astype(np.float32)
        (got,) = rep.run([x])
        np.testing.assert_allclose(got, ort_run(model, {"x": x})[0], rtol=1e-4, atol=1e-4)
        assert node.packed_weight is fuse.WINOGRAD_LATER
        assert bool(node.winograd_packs) == packed


@pytest.mark.parametrize("shape", [(960, 320, 1, 1), (32, 3, 3, 3), (96, 1, 3, 3),
                                   (3, 70_000, 1, 1), (5, 0, 3, 3)])
def test_batchnorm_folded_weights_are_the_float64_products_rounded(shape):
    """prepare()'s Conv + BatchNormalization folding forms W * k block by block: each value
    must be the float64 product rounded to float32, as (W * k).astype(float32) gives (rows
    longer than a block included, and an empty kernel)."""
    rng = np.random.default_rng(len(shape) + shape[0])
    w = rng.standard_normal(shape).astype(np.float32)
    k = rng.standard_normal(shape[0]) * 3
    got = fuse._scaled_rows(hl.tensor(w), w, k).numpy()
    want = (w.astype(np.float64) * k.reshape(-1, 1, 1, 1)).astype(np.float32)
    assert got.shape == want.shape and np.array_equal(got, want)
