"""resize, interpolate and resize_grad: against PyTorch's F.interpolate (forward and autograd),
against onnxruntime's Resize for the ONNX modes (skipped where onnxruntime is missing), the
adjoint identity <resize(x), y> == <x, resize_grad(y)> in float64, thread-count determinism,
any-dtype nearest, odd sizes (0, 1, 0-d), and the error of each bad argument.

Tolerances: float32 forward rtol 1e-5 / atol 1e-6 (values in [0, 1), at most 8 weights of
products); float64 rtol/atol 1e-12; the adjoint identity rtol 1e-12."""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import hl
from hl import errors
from hl.ops.resize import _interpolate_args
from tests.ops.harness import assert_close, check_op

TOL = {np.float32: dict(rtol=1e-5, atol=1e-6), np.float64: dict(rtol=1e-12, atol=1e-12)}
COORDS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]

# (input shape, F.interpolate keyword arguments)
TORCH_CASES = [
    ((2, 3, 7), dict(size=11, mode="nearest")),
    ((2, 3, 7), dict(size=4, mode="linear", align_corners=False)),
    ((2, 3, 7), dict(size=11, mode="linear", align_corners=True)),
    ((2, 3, 7), dict(scale_factor=2.5, mode="linear", align_corners=False)),
    ((2, 2, 5, 7), dict(size=(9, 4), mode="nearest")),
    ((2, 2, 5, 7), dict(scale_factor=2, mode="nearest")),
    ((2, 2, 6, 7), dict(scale_factor=(0.5, 1.5), mode="nearest")),
    ((2, 2, 5, 7), dict(size=(9, 4), mode="bilinear", align_corners=False)),
    ((2, 2, 5, 7), dict(size=(3, 13), mode="bilinear", align_corners=True)),
    ((2, 2, 5, 7), dict(size=(1, 1), mode="bilinear", align_corners=False)),
    ((2, 2, 5, 7), dict(size=(1, 2), mode="bilinear", align_corners=True)),
    ((2, 2, 1, 3), dict(size=(4, 3), mode="bilinear", align_corners=False)),
    ((2, 2, 5, 7), dict(scale_factor=(1.7, 0.6), mode="bilinear", align_corners=False)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 8), mode="trilinear", align_corners=False)),
    ((1, 2, 3, 4, 5), dict(size=(5, 3, 8), mode="trilinear", align_corners=True)),
    ((1, 2, 3, 4, 5), dict(size=(6, 2, 5), mode="nearest")),
]


def _hl_interpolate(kw):
    return lambda t: hl.interpolate(t, **kw)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,kw", TORCH_CASES)
def test_interpolate_matches_torch(rng, shape, kw, dtype):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = rng.random(shape).astype(dtype)
    check_op(_hl_interpolate(kw), lambda a: F.interpolate(torch.from_numpy(a), **kw).numpy(),
             [x], **TOL[dtype])


@pytest.mark.parametrize("shape,kw", TORCH_CASES)
def test_resize_grad_matches_torch(rng, shape, kw):
    torch = pytest.importorskip("torch")
    x = torch.tensor(rng.random(shape), requires_grad=True)
    y = torch.nn.functional.interpolate(x, **kw)
    dy = rng.standard_normal(tuple(y.shape))
    y.backward(torch.from_numpy(dy))
    out, scales, rkw = _interpolate_args(shape, kw.get("size"), kw.get("scale_factor"),
                                         kw["mode"], kw.get("align_corners"))
    assert list(out) == list(y.shape)
    got = hl.ops.resize_grad(hl.tensor(dy), shape, scales, **rkw)
    assert_close(got, x.grad.numpy(), rtol=1e-12, atol=1e-12)
    # float32 gradients agree with the float64 ones
    got32 = hl.ops.resize_grad(hl.tensor(dy.astype(np.float32)), shape, scales, **rkw)
    assert_close(got32, x.grad.numpy().astype(np.float32), rtol=1e-5, atol=1e-5)


def _ort_resize(x, sizes, scales, mode, coord, nearest):
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper
    if scales is not None:
        names, init = ["X", "", "scales"], helper.make_tensor(
            "scales", TensorProto.FLOAT, [len(scales)], list(scales))
    else:
        names, init = ["X", "", "", "sizes"], helper.make_tensor(
            "sizes", TensorProto.INT64, [len(sizes)], list(sizes))
    node = helper.make_node("Resize", names, ["Y"], mode=mode,
                            coordinate_transformation_mode=coord, nearest_mode=nearest)
    graph = helper.make_graph(
        [node], "resize", [helper.make_tensor_value_info("X", TensorProto.FLOAT, x.shape)],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], initializer=[init])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    model.ir_version = 9  # what onnxruntime builds of this era read
    del onnx
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {"X": x})[0]


ORT_SIZES = [(2, 3, 12, 10), (2, 3, 3, 2), (2, 3, 8, 9), (2, 3, 1, 1), (2, 3, 6, 5),
             (2, 3, 6, 7)]
ORT_SCALES = [(1, 1, 2, 2), (1, 1, 0.5, 0.6), (1, 1, 1.5, 2.5)]


@pytest.mark.parametrize("coord", COORDS)
@pytest.mark.parametrize("mode,nearest", [("linear", "round_prefer_floor")] +
                         [("nearest", n) for n in NEAREST])
def test_resize_matches_onnxruntime(rng, mode, coord, nearest):
    x = rng.random((2, 3, 6, 5)).astype(np.float32)
    kw = dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest)
    for sizes in ORT_SIZES:
        want = _ort_resize(x, sizes, None, mode, coord, nearest)
        assert_close(hl.resize(hl.tensor(x), size=sizes, **kw), want, what=f"size {sizes}")
    for scales in ORT_SCALES:
        want = _ort_resize(x, None, scales, mode, coord, nearest)
        assert_close(hl.resize(hl.tensor(x), scales=scales, **kw), want, what=f"scales {scales}")


def _dot(a, b):
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("coord", COORDS)
def test_resize_grad_is_the_adjoint(rng, mode, coord):
    for nearest in (NEAREST if mode == "nearest" else NEAREST[:1]):
        for _ in range(3):
            ndim = int(rng.integers(1, 4))
            shape = tuple(int(s) for s in rng.integers(1, 6, size=ndim))
            if rng.random() < 0.5:
                size = tuple(int(s) for s in rng.integers(1, 11, size=ndim))
                scales = None
            else:
                scales = [float(s) for s in rng.uniform(0.3, 3.0, size=ndim)]
                size = tuple(int(np.floor(n * s)) for n, s in zip(shape, scales))
            kw = dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest)
            x, y = rng.standard_normal(shape), rng.standard_normal(size)
            fwd = (hl.resize(hl.tensor(x), scales=scales, **kw) if scales
                   else hl.resize(hl.tensor(x), size=size, **kw))
            back = hl.ops.resize_grad(hl.tensor(y), shape, scales, **kw)
            lhs, rhs = _dot(fwd.numpy(), y), _dot(x, back.numpy())
            assert abs(lhs - rhs) <= 1e-12 * max(1.0, abs(lhs)), (shape, size, scales, kw)


def test_resize_grad_same_for_any_thread_count(rng):
    dy = rng.standard_normal((4, 8, 64, 64)).astype(np.float32)
    before = hl.get_num_threads()
    try:
        results = []
        for n in (1, 2, 3):
            hl.set_num_threads(n)
            for mode in ("linear", "nearest"):
                results.append((n, mode, hl.ops.resize_grad(hl.tensor(dy), (4, 8, 21, 45),
                                                        mode=mode).numpy()))
    finally:
        hl.set_num_threads(before)
    for n, mode, r in results:
        ref = next(r0 for n0, m0, r0 in results if m0 == mode)
        assert np.array_equal(r, ref), f"{mode}, {n} threads"


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.bool_, np.float16])
def test_resize_nearest_moves_any_dtype(rng, dtype):
    shape = (3, 5, 4)
    flat = np.arange(np.prod(shape), dtype=np.float64).reshape(shape)  # each element's index
    if dtype is np.bool_:
        a = rng.random(shape) < 0.5
    elif dtype is np.int64:
        a = rng.integers(-2**62, 2**62, size=shape)  # not exact in float64: moved, not computed
    else:
        a = rng.integers(0, 100, size=shape).astype(dtype)
    for coord, nearest in itertools.product(COORDS, NEAREST):
        kw = dict(size=(4, 9, 3), coordinate_transformation_mode=coord, nearest_mode=nearest)
        idx = hl.resize(hl.tensor(flat), **kw).numpy().astype(np.int64)
        check_op(lambda t: hl.resize(t, **kw), lambda x: x.ravel()[idx], [a])


def test_resize_linear_leaves_unchanged_axes_alone(rng):
    x = rng.standard_normal((2, 3, 4, 5))
    for coord in COORDS:
        kw = dict(mode="linear", coordinate_transformation_mode=coord)
        assert_close(hl.resize(hl.tensor(x), size=x.shape, **kw), x, rtol=0, atol=0)
        # resizing one axis = 1-D interpolation of every line along it
        one = hl.resize(hl.tensor(x), size=(2, 3, 7, 5), **kw).numpy()
        lines = np.moveaxis(x, 2, -1).reshape(-1, 1, 4)
        want = hl.resize(hl.tensor(lines), size=(lines.shape[0], 1, 7), **kw).numpy()
        assert_close(one, np.moveaxis(want.reshape(2, 3, 5, 7), -1, 2), rtol=0, atol=0)


def test_resize_odd_sizes(rng):
    x = rng.standard_normal((2, 1, 3)).astype(np.float32)
    assert hl.resize(hl.tensor(x), size=(2, 0, 3)).shape == (2, 0, 3)
    assert hl.resize(hl.tensor(np.zeros((0, 3))), size=(0, 5), mode="linear").shape == (0, 5)
    # a size-1 axis spreads its value
    for mode in ("nearest", "linear"):
        got = hl.resize(hl.tensor(x), size=(2, 4, 3), mode=mode)
        assert_close(got, np.repeat(x, 4, axis=1), rtol=0, atol=0)
    # a 0-d tensor resizes to itself
    assert_close(hl.resize(hl.tensor(np.float64(1.5)), size=(), mode="linear"), np.float64(1.5))
    # gradient with an empty dy is zero
    assert_close(hl.ops.resize_grad(hl.tensor(np.zeros((2, 0))), (2, 3), mode="linear"),
                 np.zeros((2, 3)))
    # NaN stays where it is read
    y = np.array([[0.0, np.nan, 1.0]])
    got = hl.resize(hl.tensor(y), size=(1, 6), mode="nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    assert_close(got, np.repeat(y, 2, axis=1))


def test_resize_bad_inputs():
    x = hl.zeros(1, 2, 4, 4)
    with pytest.raises(errors.DTypeError, match="linear mode needs a floating-point tensor"):
        hl.resize(hl.zeros(2, 2, dtype=hl.int32), size=(3, 3), mode="linear")
    with pytest.raises(errors.DTypeError, match="expected a float32 or float64 gradient"):
        hl.ops.resize_grad(hl.zeros(2, 2, dtype=hl.int64), (1, 1))
    with pytest.raises(errors.ValueError, match="mode must be one of"):
        hl.resize(x, size=(1, 2, 8, 8), mode="cubic")
    with pytest.raises(errors.ValueError, match="coordinate_transformation_mode"):
        hl.resize(x, size=(1, 2, 8, 8), coordinate_transformation_mode="tf_crop_and_resize")
    with pytest.raises(errors.ValueError, match="nearest_mode"):
        hl.resize(x, size=(1, 2, 8, 8), nearest_mode="round")
    with pytest.raises(errors.ValueError, match="negative size"):
        hl.resize(x, size=(1, 2, -1, 8))
    with pytest.raises(errors.ValueError, match="negative size"):
        hl.ops.resize_grad(x, (1, 2, -3, 4))
    with pytest.raises(errors.ShapeError, match="cannot resize empty axis"):
        hl.resize(hl.zeros(0, 3), size=(2, 3))
    with pytest.raises(errors.ShapeError, match="cannot resize empty axis"):
        hl.ops.resize_grad(hl.zeros(2, 3), (0, 3))
    with pytest.raises(errors.ShapeError, match="3 entries"):
        hl.resize(x, size=(2, 8, 8))
    with pytest.raises(errors.ValueError, match="finite and > 0"):
        hl.resize(x, scales=(1, 1, 0, 2))
    with pytest.raises(errors.ValueError, match="finite and > 0"):
        hl.ops.resize_grad(x, (1, 2, 2, 2), scales=(1, 1, float("inf"), 2))
    with pytest.raises(errors.ValueError, match="exactly one"):
        hl.resize(x)
    with pytest.raises(errors.ShapeError, match="spatial"):
        hl.interpolate(hl.zeros(4, 4), size=8)
    with pytest.raises(errors.ShapeError, match="needs 4-D"):
        hl.interpolate(hl.zeros(1, 2, 4), size=8, mode="bilinear")
    with pytest.raises(errors.ValueError, match="align_corners only"):
        hl.interpolate(x, size=8, align_corners=True)
    with pytest.raises(errors.ValueError, match="mode must be"):
        hl.interpolate(x, size=8, mode="area")
    with pytest.raises(errors.ValueError, match="exactly one"):
        hl.interpolate(x, size=8, scale_factor=2)
    with pytest.raises(errors.ShapeError, match="the output tensor given"):
        from hl import _core
        wrong = hl.zeros(1, 2, 3, 3)
        _core.call("resize", x._h, [1, 2, 8, 8], None, 0, 0, 0, _core.out(wrong._h))


# ---- properties: a result of the asked shape inside the input's range, or an hl error -----

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shape=st.lists(st.integers(0, 4), min_size=0, max_size=3), data=st.data(),
       mode=st.sampled_from(["nearest", "linear"]), coord=st.sampled_from(COORDS),
       nearest=st.sampled_from(NEAREST))
def test_resize_property(shape, data, mode, coord, nearest):
    size = data.draw(st.lists(st.integers(-1, 6), min_size=len(shape), max_size=len(shape)))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    kw = dict(mode=mode, coordinate_transformation_mode=coord, nearest_mode=nearest)
    valid = all(s >= 0 and (n > 0 or s == 0) for n, s in zip(shape, size))
    try:
        got = hl.resize(hl.tensor(x), size=size, **kw).numpy()
        back = hl.ops.resize_grad(hl.tensor(np.ones(size)), shape, **kw).numpy()
    except errors.HLError:
        assert not valid, f"{shape} -> {size} rejected"
        return
    assert valid, f"{shape} -> {size} accepted"
    assert got.shape == tuple(size) and back.shape == tuple(shape)
    if got.size:
        assert x.min() <= got.min() and got.max() <= x.max()  # convex combinations
    assert abs(back.sum() - got.size) <= 1e-9 * max(1, got.size)  # each output's weights sum to 1
