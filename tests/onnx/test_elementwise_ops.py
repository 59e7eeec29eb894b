"""hl.onnx's element-wise handlers beyond ONNX's conformance cases: gradients in training
(against PyTorch's autograd), opset variants, integer semantics (truncating division,
bitwise ops built from arithmetic) against numpy, quantization against onnx's reference
evaluator, and bad input that must raise a clear hl error naming the node."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

import hl
import hl.onnx
from hl import errors

from ._models import check_grads

GRAD_RTOL, GRAD_ATOL = 1e-5, 1e-6  # float64 throughout: only summation order differs


def _model(op, inputs, inits=None, order=None, opset=21, out_type=None, out_rank=None,
           n_out=1, **attrs):
    """A one-node model. ``inputs``: {name: array} fed at run time; ``inits``: {name: array}
    stored as initializers; ``order``: the node's input names ("" for an omitted optional
    one), by default the inputs then the initializers."""
    inits = inits or {}
    arrays = {**inputs, **inits}
    order = list(inputs) + list(inits) if order is None else order
    if out_type is None:
        out_type = helper.np_dtype_to_tensor_dtype(np.asarray(next(iter(arrays.values()))).dtype)
    if out_rank is None:
        out_rank = max(np.ndim(a) for a in arrays.values())
    outs = [f"y{i}" for i in range(n_out)]
    graph = helper.make_graph(
        [helper.make_node(op, order, outs, name=f"my_{op.lower()}", **attrs)], "g",
        [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype),
                                       np.shape(v)) for k, v in inputs.items()],
        [helper.make_tensor_value_info(o, out_type, [f"d{i}" for i in range(out_rank)])
         for o in outs],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _run(op, inputs, **kw):
    model = _model(op, inputs, **kw)
    return hl.onnx.prepare(model).run(list(inputs.values()))[0]


def _reference(op, inputs, **kw):
    from onnx.reference import ReferenceEvaluator
    return ReferenceEvaluator(_model(op, inputs, **kw)).run(None, inputs)[0]


def _rng(seed=0):
    return np.random.default_rng(seed)


# ---- gradients through the handlers (ONNXModel.forward) against torch ---------------------

def _check(model, feeds, params, torch_fn, train=False):
    return check_grads(model, feeds, params, torch_fn, GRAD_RTOL, GRAD_ATOL, train)


def test_prelu_gradients_per_channel_slope():
    torch = pytest.importorskip("torch")
    x = _rng(1).normal(size=(2, 3, 4, 5))
    slope = np.array([0.1, 0.25, -0.5]).reshape(3, 1, 1)  # a trainable initializer
    model = _model("PRelu", {"x": x}, {"slope": slope}, opset=16)
    _check(model, {"x": x}, {"slope": slope},
           lambda x, slope: torch.where(x < 0, slope * x, x))


def test_prelu_opset_6_takes_a_1d_slope_per_channel():
    x = _rng(2).normal(size=(2, 3, 4, 4)).astype(np.float32)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    old = _run("PRelu", {"x": x}, inits={"s": slope}, opset=6)
    new = _run("PRelu", {"x": x}, inits={"s": slope.reshape(3, 1, 1)}, opset=16)
    np.testing.assert_array_equal(old, new)
    np.testing.assert_allclose(new, np.where(x < 0, x * slope.reshape(3, 1, 1), x))


def test_det_gradient():
    torch = pytest.importorskip("torch")
    a = _rng(4).normal(size=(2, 4, 4))
    a[1, 0, 0] = 0.0  # the first pivot of the second matrix needs a row swap
    _check(_model("Det", {"a": a}, opset=22, out_rank=1), {"a": a}, {},
           lambda a: torch.linalg.det(a))


# The activations hl has as ops (Elu, Selu, Gelu, ...) are checked by their OpCases
# (tests/opcases: import against onnxruntime, gradient through the handler against finite
# differences); these are the ones the importer composes from other ops.
ACTIVATIONS = {
    # op: (attributes, torch function of x)
    "Swish": ({"alpha": 1.0}, lambda F, x: F.silu(x)),
    "ThresholdedRelu": ({"alpha": 0.5}, lambda F, x: F.threshold(x, 0.5, 0.0)),
    "Shrink": ({"lambd": 0.4, "bias": 0.1},
               lambda F, x: (x - 0.1) * (x > 0.4) + (x + 0.1) * (x < -0.4)),
}


@pytest.mark.parametrize("op", sorted(ACTIVATIONS))
def test_activation_gradients(op):
    torch = pytest.importorskip("torch")
    attrs, fn = ACTIVATIONS[op]
    x = np.linspace(-3, 3, 24).reshape(4, 6) + 0.01  # away from kinks (0, +-lambd, alpha)
    opset = 24 if op == "Swish" else 22
    _check(_model(op, {"x": x}, opset=opset, **attrs), {"x": x}, {},
           lambda x: fn(torch.nn.functional, x))


def test_variadic_mean_and_max_gradients():
    torch = pytest.importorskip("torch")
    rng = _rng(5)
    a, b, c = rng.normal(size=(2, 3)), rng.normal(size=(3,)), rng.normal(size=(1, 3))
    feeds = {"a": a, "b": b, "c": c}
    _check(_model("Mean", feeds, opset=13), feeds, {}, lambda a, b, c: (a + b + c) / 3)
    _check(_model("Max", feeds, opset=13), feeds, {},
           lambda a, b, c: torch.maximum(torch.maximum(a, b), c))


def test_half_precision_on_the_cpu_keeps_its_dtype():
    x = np.array([[0.5, -1.25], [2.0, 3.5]], np.float16)
    y = _run("Add", {"x": x, "z": x})
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, x + x)
    g = _run("Gelu", {"x": x}, opset=20)
    assert g.dtype == np.float16
    p = _run("Pow", {"x": x, "e": np.array([2.0, 3.0], np.float32)}, opset=15)
    assert p.dtype == np.float16  # the base's dtype
    np.testing.assert_allclose(p, x.astype(np.float32) ** [2.0, 3.0], rtol=1e-3)


# ---- integer semantics --------------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_truncates(dtype):
    a = np.array([7, -7, 7, -7, 6, -6, 0, 2**30 + 3], dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 5, -7], dtype)
    y = _run("Div", {"a": a, "b": b}, opset=14)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, (np.trunc(a / b)).astype(dtype))


def test_int64_division_is_exact_past_2_to_53():
    a = np.array([2**62 + 1, -(2**62) - 3], np.int64)
    b = np.array([3, 7], np.int64)
    want = np.array([abs(x) // abs(y) * (1 if (x < 0) == (y < 0) else -1)
                     for x, y in zip(a.tolist(), b.tolist())], np.int64)
    np.testing.assert_array_equal(_run("Div", {"a": a, "b": b}), want)


def test_mod_both_conventions():
    a = np.array([5, -5, 5, -5], np.int32)
    b = np.array([3, 3, -3, -3], np.int32)
    np.testing.assert_array_equal(_run("Mod", {"a": a, "b": b}), np.mod(a, b))
    np.testing.assert_array_equal(_run("Mod", {"a": a, "b": b}, fmod=1), np.fmod(a, b))


def test_pow_output_has_the_base_dtype():
    x = np.array([1.5, 2.0, 3.0], np.float32)
    e = np.array([2, 3, -1], np.int64)
    y = _run("Pow", {"x": x, "e": e}, opset=15)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, x ** e.astype(np.float32))
    i = np.array([2, 3, 4], np.int32)
    f = np.array([0.5, 2.0, 1.5], np.float32)
    y = _run("Pow", {"i": i, "f": f}, opset=15)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.power(i, f).astype(np.int32))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_bitwise_ops_match_numpy(dtype):
    info = np.iinfo(dtype)
    rng = _rng(6)
    a = rng.integers(info.min, info.max, (3, 5), dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, (5,), dtype=dtype, endpoint=True)
    a[0, :2] = [info.min, info.max]
    for op, fn in (("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or),
                   ("BitwiseXor", np.bitwise_xor)):
        y = _run(op, {"a": a, "b": b}, opset=18)
        assert y.dtype == dtype
        np.testing.assert_array_equal(y, fn(a, b), err_msg=op)
    np.testing.assert_array_equal(_run("BitwiseNot", {"a": a}, opset=18), np.invert(a))


@pytest.mark.parametrize("dtype", [np.uint8, np.int32, np.int64])
def test_bit_shift_including_out_of_range_amounts(dtype):
    bits = np.iinfo(dtype).bits
    x = np.array([1, 5, 127, 3, 200 % np.iinfo(dtype).max, 9, 1, 6], dtype)
    if np.iinfo(dtype).min < 0:
        x[[3, 5]] = [-3, -9]
    s = np.array([0, 1, 3, bits - 1, bits, bits + 5, 2, 1], dtype)
    for direction in ("LEFT", "RIGHT"):
        want = []
        for xi, si in zip(x.tolist(), s.tolist()):
            if si >= bits:
                want.append(-1 if direction == "RIGHT" and xi < 0 else 0)
            elif direction == "LEFT":
                want.append(np.array(xi << si & ((1 << bits) - 1), np.uint64).astype(dtype))
            else:
                want.append(xi >> si)
        y = _run("BitShift", {"x": x, "s": s}, opset=28, direction=direction)
        assert y.dtype == dtype
        np.testing.assert_array_equal(y, np.array(want).astype(dtype), err_msg=direction)


# ---- opset variants -----------------------------------------------------------------------

def test_clip_attributes_before_opset_11_and_inputs_after():
    x = np.array([-3.0, -0.5, 0.5, 3.0], np.float32)
    old = _run("Clip", {"x": x}, opset=6, min=-1.0, max=1.0)
    new = _run("Clip", {"x": x}, inits={"lo": np.float32(-1), "hi": np.float32(1)}, opset=13)
    np.testing.assert_array_equal(old, np.clip(x, -1, 1))
    np.testing.assert_array_equal(new, old)
    only_max = _run("Clip", {"x": x}, inits={"hi": np.float32(0)}, order=["x", "", "hi"])
    np.testing.assert_array_equal(only_max, np.minimum(x, 0))


def test_clip_integers_and_min_above_max():
    x = np.array([-5, 0, 5, 300], np.int32)
    y = _run("Clip", {"x": x}, inits={"lo": np.int32(0), "hi": np.int32(255)}, opset=13)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.clip(x, 0, 255))
    y = _run("Clip", {"x": x}, inits={"lo": np.int32(9), "hi": np.int32(2)}, opset=13)
    np.testing.assert_array_equal(y, np.full(4, 2))  # ONNX: everything becomes max


def test_cast_opset_1_named_type_and_integer_wrap():
    x = np.array([1.5, -2.5, 0.0], np.float64)
    m = _model("Cast", {"x": x}, opset=1, out_type=T.FLOAT, to="FLOAT")
    m.ir_version = 3
    np.testing.assert_array_equal(hl.onnx.prepare(m).run([x])[0], x.astype(np.float32))
    big = np.array([300, -1, 2**40 + 5], np.int64)
    y8 = _run("Cast", {"x": big}, opset=21, out_type=T.UINT8, to=T.UINT8)
    np.testing.assert_array_equal(y8, big.astype(np.uint8))  # wraps, as ONNX says
    b = _run("Cast", {"x": np.array([0.0, -0.0, np.nan, 2.0], np.float32)}, to=T.BOOL,
             out_type=T.BOOL)
    np.testing.assert_array_equal(b, [False, False, True, True])


def test_isinf_detect_flags():
    x = np.array([np.inf, -np.inf, 1.0, np.nan], np.float32)
    for pos, neg in ((1, 1), (1, 0), (0, 1), (0, 0)):
        y = _run("IsInf", {"x": x}, opset=20, out_type=T.BOOL, detect_positive=pos,
                 detect_negative=neg)
        np.testing.assert_array_equal(y, [bool(pos), bool(neg), False, False])


def test_scalar_inputs_stay_scalars():
    model = _model("ThresholdedRelu", {"x": np.array(2.0, np.float32)}, opset=22)
    (y,) = hl.onnx.ONNXModel(model, trainable=False).forward(hl.tensor(np.float32(2.0)))
    assert y.shape == () and y.numpy() == 2.0


# ---- quantization against onnx's reference ------------------------------------------------

def test_quantize_dequantize_per_axis():
    rng = _rng(8)
    x = rng.normal(0, 3, (2, 3, 4)).astype(np.float32)
    scale = np.array([0.02, 0.05, 0.1], np.float32)
    zp = np.array([0, 128, 255], np.uint8)
    kw = dict(inits={"s": scale, "z": zp}, opset=21, axis=1, out_type=T.UINT8)
    q = _run("QuantizeLinear", {"x": x}, **kw)
    np.testing.assert_array_equal(q, _reference("QuantizeLinear", {"x": x}, **kw))
    kw = dict(inits={"s": scale, "z": zp}, opset=21, axis=1, out_type=T.FLOAT)
    np.testing.assert_allclose(_run("DequantizeLinear", {"q": q}, **kw),
                               _reference("DequantizeLinear", {"q": q}, **kw), rtol=1e-6)


def test_quantize_dequantize_blocked_with_a_remainder_block():
    rng = _rng(9)
    x = rng.normal(0, 2, (3, 7)).astype(np.float32)
    scale = rng.uniform(0.01, 0.05, (3, 3)).astype(np.float32)  # blocks of 3 along axis 1
    zp = rng.integers(0, 255, (3, 3)).astype(np.uint8)
    kw = dict(inits={"s": scale, "z": zp}, opset=21, axis=1, block_size=3, out_type=T.UINT8)
    q = _run("QuantizeLinear", {"x": x}, **kw)
    np.testing.assert_array_equal(q, _reference("QuantizeLinear", {"x": x}, **kw))
    kw["out_type"] = T.FLOAT
    np.testing.assert_allclose(_run("DequantizeLinear", {"q": q}, **kw),
                               _reference("DequantizeLinear", {"q": q}, **kw), rtol=1e-6)


@pytest.mark.parametrize("precision", [T.FLOAT16, T.DOUBLE])
def test_quantize_precision_attribute(precision):
    x = _rng(10).normal(0, 3, (4, 5)).astype(np.float32)
    kw = dict(inits={"s": np.float32(0.037), "z": np.uint8(100)}, opset=23,
              out_type=T.UINT8, precision=precision)
    np.testing.assert_array_equal(_run("QuantizeLinear", {"x": x}, **kw),
                                  _reference("QuantizeLinear", {"x": x}, **kw))


def test_dequantize_int32_without_zero_point():
    x = np.array([-1000, 0, 123456], np.int32)
    y = _run("DequantizeLinear", {"x": x}, inits={"s": np.float32(0.5)}, opset=13,
             out_type=T.FLOAT)
    np.testing.assert_array_equal(y, x.astype(np.float32) * 0.5)


# ---- bad input: clear hl errors naming the node -------------------------------------------

def _raises(kind, match, op, inputs, **kw):
    rep = hl.onnx.prepare(_model(op, inputs, **kw))
    with pytest.raises(kind, match=match) as info:
        rep.run(list(inputs.values()))
    assert f"my_{op.lower()}" in str(info.value)


def test_bad_broadcast_in_add():
    _raises(errors.ShapeError, r"\(2, 3\) and \(4,\)", "Add",
            {"a": np.ones((2, 3), np.float32), "b": np.ones(4, np.float32)})


def test_mixed_dtypes_are_a_dtype_error():
    _raises(errors.DTypeError, "float32.*int64", "Add",
            {"a": np.ones(3, np.float32), "b": np.ones(3, np.int64)})
    _raises(errors.DTypeError, "float16.*float32", "Mul",  # not hidden by float32 copies
            {"a": np.ones(3, np.float16), "b": np.ones(3, np.float32)})
    _raises(errors.DTypeError, "floating-point", "Sqrt", {"a": np.ones(3, np.int32)})
    _raises(errors.DTypeError, "bool", "Not", {"a": np.ones(3, np.float32)})


def test_prelu_slope_must_broadcast_to_x():
    _raises(errors.ShapeError, r"slope of shape \(3,\) .* \(2, 3, 4, 4\)", "PRelu",
            {"x": np.ones((2, 3, 4, 4), np.float32)}, inits={"s": np.ones(3, np.float32)},
            opset=16)


def test_clip_bound_must_be_a_scalar():
    _raises(errors.ShapeError, "min must be a scalar", "Clip", {"x": np.ones(3, np.float32)},
            inits={"lo": np.zeros(2, np.float32)}, opset=13)


def test_det_needs_square_matrices():
    _raises(errors.ShapeError, r"square .* \(2, 3\)", "Det",
            {"a": np.ones((2, 3), np.float32)}, opset=22, out_rank=0)


def test_quantize_scale_of_the_wrong_length():
    _raises(errors.ShapeError, "per-axis", "QuantizeLinear",
            {"x": np.ones((2, 3), np.float32)},
            inits={"s": np.ones(4, np.float32), "z": np.zeros(4, np.uint8)}, opset=21,
            out_type=T.UINT8)


def test_cast_to_a_dtype_hl_lacks():
    _raises(errors.UnsupportedError, "INT8", "Cast", {"x": np.ones(3, np.float32)},
            to=T.INT8, out_type=T.INT8)
