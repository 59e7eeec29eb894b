"""A pointwise expansion whose output only a depthwise 3x3 convolution reads runs, in a plan, as
one call that never writes the expanded tensor (libcore cpu/conv_expand_dw.c, plan/fuse.c's
fuse_expand_dw): on CPUs with the AVX2 or AVX-512 kernels, where one sample's expanded tensor
takes at least 1 MiB (MobileNetV2's 112x112 and 56x56 blocks), and where the depthwise layer
takes the blocked kernel on all its channels (small planes: MobileNetV2's 14x14 and 7x7 blocks;
a channel count that is a multiple of 8). The replay must equal the unfused one
(HL_CONV_EXPAND_DW=0) bit for bit, NaN and infinities included, at any thread count;
onnxruntime on the same ONNX model is the reference for the values (rtol = atol = 1e-4, as
the other planned-inference tests: float32 sums of up to 9 + K terms in other orders)."""
import os
import threading

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import hl
from hl import _core
from hl import onnx as hl_onnx

# the fused kernel runs the AVX2 or AVX-512 kernels (HL_CONV_AVX2=0 turns both off)
FUSES_HERE = _core.cpu_kernels() != "portable" and os.environ.get("HL_CONV_AVX2", "") != "0"


def _block(rng, cin, cexp, stride, expand_act="Clip", dw_act="Clip", dw_bias=True,
           expand_bias=True, project=False, pad=1):
    """Conv 1x1 (cin -> cexp) [+ act], depthwise 3x3 Conv (pads `pad`, stride) [+ act] [+ a
    1x1 projection back to cin], as ONNX."""
    def init(name, *shape):
        a = rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]) if len(shape) > 1 else 4)
        return numpy_helper.from_array(a.astype(np.float32), name)
    inits = [init("w1", cexp, cin, 1, 1), init("wd", cexp, 1, 3, 3),
             numpy_helper.from_array(np.array(0.0, np.float32), "lo"),
             numpy_helper.from_array(np.array(6.0, np.float32), "hi")]
    inits += [init("b1", cexp)] if expand_bias else []
    inits += [init("bd", cexp)] if dw_bias else []
    nodes = [helper.make_node("Conv", ["x", "w1"] + (["b1"] if expand_bias else []), ["e"])]
    e = "e"
    if expand_act == "Clip":
        nodes.append(helper.make_node("Clip", ["e", "lo", "hi"], ["e6"]))
        e = "e6"
    elif expand_act == "Relu":
        nodes.append(helper.make_node("Relu", ["e"], ["e6"]))
        e = "e6"
    nodes.append(helper.make_node("Conv", [e, "wd"] + (["bd"] if dw_bias else []), ["d"],
                                  group=cexp, kernel_shape=[3, 3], pads=[pad] * 4,
                                  strides=[stride, stride]))
    out = "d"
    if dw_act == "Clip":
        nodes.append(helper.make_node("Clip", ["d", "lo", "hi"], ["d6"]))
        out = "d6"
    if project:
        inits.append(init("w2", cin, cexp, 1, 1))
        nodes.append(helper.make_node("Conv", [out, "w2"], ["p"]))
        out = "p"
    graph = helper.make_graph(
        nodes, "block", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", cin, "H", "W"])],
        [helper.make_tensor_value_info(out, TensorProto.FLOAT, ["N", None, None, None])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _last_stats(rep):
    plans = [e for e in rep.model.program.plans.entries.values() if e is not None]
    return _core.plan_stats(plans[-1].plan)


def _runs(model, xs, threads, monkeypatch, fuse):
    """Each input's output from the plan (the third run of a signature replays it), and the
    last plan's statistics."""
    monkeypatch.setenv("HL_CONV_EXPAND_DW", "1" if fuse else "0")
    prev = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        rep = hl_onnx.prepare(model)
        outs = []
        for x in xs:
            for _ in range(3):
                y = rep.run([x])[0]
            outs.append(np.array(y))
        return outs, _last_stats(rep), rep
    finally:
        hl.set_num_threads(prev)


CASES = {  # name: (cin, cexp, H, W, stride, block options)
    "mobilenet_56x56": (24, 144, 56, 56, 1, {}),
    "mobilenet_112x112_s2": (16, 96, 112, 112, 2, {}),
    # odd sizes, channels not a multiple of the 12 a task takes (the last group 4), K odd,
    # no expansion bias, the depthwise layer without bias or activation (a plain conv)
    "odd_s2": (7, 100, 57, 57, 2, dict(expand_bias=False, dw_bias=False, dw_act=None)),
    "odd_s1_relu": (5, 100, 53, 51, 1, dict(expand_act="Relu", project=True)),
    "no_expand_act": (3, 64, 60, 70, 1, dict(expand_act=None)),
    "wide_rows": (8, 96, 8, 600, 2, {}),
    # one sample at two threads on large planes (AVX-512): each plane in two bands of rows,
    # each band's expansion also computing the input rows its band's border reads; odd sizes
    "bands_odd": (5, 64, 65, 67, 1, dict(project=True)),
    "bands_odd_s2": (6, 36, 119, 113, 2, dict(expand_act="Relu")),
    # bands whose expansions would end on a strip of 2 positions (the tail kernel, other
    # sums): whole planes instead
    "bands_refused": (4, 96, 56, 58, 1, {}),
    # no padding at stride 2 on an even plane: the last input row is read by no output (the
    # expansion computes only the rows the outputs read, whole planes or bands)
    "valid_s2_even": (8, 96, 58, 58, 2, dict(pad=0)),
    "valid_s2_even_small": (8, 64, 14, 14, 2, dict(pad=0)),
    "valid_s2_even_bands": (8, 64, 114, 114, 2, dict(pad=0)),
    # small planes, the blocked depthwise kernel (groups of 48 channels a task)
    "mobilenet_14x14": (64, 384, 14, 14, 1, dict(project=True)),
    "mobilenet_14x14_s2": (96, 576, 14, 14, 2, {}),
    "mobilenet_7x7": (160, 960, 7, 7, 1, {}),
    # 104 channels: two groups of 48, then one of 8 (the eight-lane cells); odd planes, K odd
    "blocked_odd": (11, 104, 9, 11, 1, dict(expand_act="Relu", dw_bias=False)),
    "blocked_8_s2": (3, 8, 5, 6, 2, dict(dw_act=None, expand_bias=False)),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", list(CASES))
def test_fused_expansion_equals_the_unfused_calls_and_onnxruntime(rng, monkeypatch, case,
                                                                   threads):
    cin, cexp, h, w, stride, opts = CASES[case]
    model = _block(rng, cin, cexp, stride, **opts)
    xs = [rng.standard_normal((n, cin, h, w)).astype(np.float32) for n in (1, 3)]
    fused, stats, _ = _runs(model, xs, threads, monkeypatch, fuse=True)
    plain, plain_stats, _ = _runs(model, xs, threads, monkeypatch, fuse=False)
    assert stats["expand_dw"] == (1 if FUSES_HERE else 0), stats
    assert plain_stats["expand_dw"] == 0
    assert stats["calls"] == plain_stats["calls"] - stats["expand_dw"]
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    for x, f, p in zip(xs, fused, plain):
        np.testing.assert_array_equal(f, p)
        np.testing.assert_allclose(f, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("cin, cexp, h, w", [(7, 100, 57, 57), (7, 112, 13, 13)])
def test_nan_and_infinities_take_the_unfused_bits(rng, monkeypatch, cin, cexp, h, w):
    # no activations, which would clip the infinities; the planes kernel, then the blocked one
    model = _block(rng, cin, cexp, 2, expand_act=None, dw_act=None)
    x = rng.standard_normal((2, cin, h, w)).astype(np.float32)
    x[0, 0, 3, :5] = np.nan
    x[0, 1, 10, 7] = np.inf
    x[1, 2, 0, 0] = -np.inf
    x[1, 3] *= 1e30  # large values: inf after the expansion's sums
    (fused,), stats, _ = _runs(model, [x], 2, monkeypatch, fuse=True)
    (plain,), _, _ = _runs(model, [x], 2, monkeypatch, fuse=False)
    assert stats["expand_dw"] == (1 if FUSES_HERE else 0)
    assert np.isnan(fused).any() and np.isinf(fused).any()
    np.testing.assert_array_equal(fused, plain)


def test_nothing_fuses_where_the_kernel_does_not_take_the_pair(rng, monkeypatch):
    # rows of 1100 outputs (more than the fused depthwise kernel's 64 vectors); a block whose
    # expanded tensor (36 x 28 x 28, 110 KB) stays in cache anyway, on planes too large for the
    # blocked kernel with AVX-512 and, with AVX2 alone, of channels not a multiple of 8 (the
    # blocked kernel's groups); and 100 channels on small planes
    for cin, cexp, h, w in ((8, 64, 4, 1100), (8, 36, 28, 28), (8, 100, 14, 14)):
        model = _block(rng, cin, cexp, 1)
        x = rng.standard_normal((1, cin, h, w)).astype(np.float32)
        (y,), stats, _ = _runs(model, [x], 2, monkeypatch, fuse=True)
        assert stats["expand_dw"] == 0, (h, w)
        sess = ort.InferenceSession(model.SerializeToString(),
                                    providers=["CPUExecutionProvider"])
        np.testing.assert_allclose(y, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)


def test_threads_sharing_a_fused_model_get_one_thread_answers(rng, monkeypatch):
    cin, cexp, h, w, stride, opts = CASES["mobilenet_56x56"]
    model = _block(rng, cin, cexp, stride, **opts)
    xs = [rng.standard_normal((1, cin, h, w)).astype(np.float32) for _ in range(2)]
    want, stats, rep = _runs(model, xs, 2, monkeypatch, fuse=True)
    assert stats["expand_dw"] == (1 if FUSES_HERE else 0)
    got, errors = {}, []

    def work(k):
        try:
            for _ in range(5):
                got[k] = np.array(rep.run([xs[k]])[0])
                np.testing.assert_array_equal(got[k], want[k])
        except Exception as e:  # noqa: BLE001  reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(k,)) for k in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_fused_blocks_are_sliced_as_the_unfused_ones(rng, monkeypatch):
    # batch 4 at 96x96: the block's tensors outgrow the cache, so the plan replays it a sample
    # at a time (plan/slice.c), the fused call among the sliced ones
    model = _block(rng, 16, 96, 1, project=True)
    x = rng.standard_normal((4, 16, 96, 96)).astype(np.float32)
    (fused,), stats, _ = _runs(model, [x], 2, monkeypatch, fuse=True)
    (plain,), plain_stats, _ = _runs(model, [x], 2, monkeypatch, fuse=False)
    assert stats["sliced_runs"] == plain_stats["sliced_runs"] == 1, (stats, plain_stats)
    assert stats["sliced_calls"] == 3 - stats["expand_dw"], stats
    np.testing.assert_array_equal(fused, plain)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_allclose(fused, sess.run(None, {"x": x})[0], rtol=1e-4, atol=1e-4)
