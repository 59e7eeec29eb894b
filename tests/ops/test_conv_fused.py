"""conv_fused: act(conv(x, w, b) + residual) in one pass over the output (the inference
epilogue the ONNX importer fuses, hl/onnx/fuse.py).

Each kernel path (Winograd 3x3, im2col with one-sample bands and with multi-sample tiles,
pointwise 1x1, depthwise, 1-D, float64) and each activation is checked two ways:
- against a float64 numpy reference (tests/ops/test_conv.py's ref_conv, then the add and the
  activation in float64): float32 rtol/atol 1e-4, as the plain conv tests (every output is a
  sum over C_in/g * k taps in another order), float64 1e-10;
- against hl's own unfused ops (conv2d, add, then relu/clip/leaky_relu/hard_sigmoid), which
  it must equal bit for bit, also on adversarial values: NaN and infinities in the input and
  the residual, weights large enough to overflow.
"""
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors
from tests.ops.test_conv import ref_conv

ACTS = [("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", 0.0, 6.0), ("clip", -0.5, 0.25),
        ("leaky_relu", 0.1, 0.0), ("hard_sigmoid", 0.2, 0.5)]

# (x shape, w shape, stride, padding, groups): one per kernel path in libcore/src/cpu/conv.c
PATHS = {
    "winograd": ((2, 16, 9, 11), (16, 16, 3, 3), 1, 1, 1),
    "im2col_tiles": ((3, 5, 7, 6), (6, 5, 3, 3), 1, 1, 1),          # several samples per tile
    "im2col_bands": ((1, 8, 300, 300), (4, 8, 3, 3), 2, 1, 1),      # bands of output rows
    "pointwise": ((2, 8, 20, 20), (12, 8, 1, 1), 1, 0, 1),
    "grouped": ((2, 8, 10, 10), (8, 4, 3, 3), 1, 1, 2),
    "depthwise": ((2, 6, 13, 10), (6, 1, 3, 3), 2, 1, 6),
    "conv1d": ((2, 4, 17), (5, 4, 3), 1, 1, 1),
}


def ref_act(y, act, alpha, beta):
    if act == "relu":
        return np.maximum(y, 0)
    if act == "clip":
        return np.minimum(np.maximum(y, alpha), beta)
    if act == "leaky_relu":
        return np.where(y >= 0, y, alpha * y)
    if act == "hard_sigmoid":
        return np.clip(alpha * y + beta, 0, 1)
    return y


def unfused(x, w, b, r, stride, padding, groups, act, alpha, beta):
    conv = hl.conv1d if x.ndim == 3 else hl.conv2d
    y = conv(x, w, b, stride=stride, padding=padding, groups=groups)
    if r is not None:
        y = hl.add(y, r)
    if act == "relu":
        return hl.relu(y)
    if act == "clip":
        return hl.clip(y, alpha, beta)
    if act == "leaky_relu":
        return hl.leaky_relu(y, alpha)
    if act == "hard_sigmoid":
        return hl.hard_sigmoid(y, alpha, beta)
    return y


def operands(path, dtype, residual, seed=0):
    xs, ws, stride, padding, groups = PATHS[path]
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(xs).astype(dtype)
    w = (rng.standard_normal(ws) / np.sqrt(np.prod(ws[1:]))).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype)
    y = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                 [stride] * (x.ndim - 2), [padding] * (2 * (x.ndim - 2)), None, groups)
    r = rng.standard_normal(y.shape).astype(dtype) if residual else None
    return x, w, b, r, y, (stride, padding, groups)


def run_fused(x, w, b, r, geometry, act, alpha, beta):
    stride, padding, groups = geometry
    return hl.conv_fused(x, w, b, r, stride=stride, padding=padding, groups=groups,
                             act=act, alpha=alpha, beta=beta).numpy()


def run_unfused(x, w, b, r, geometry, act, alpha, beta):
    stride, padding, groups = geometry
    t = [None if a is None else hl.tensor(a) for a in (x, w, b, r)]
    return unfused(*t, stride, padding, groups, act, alpha, beta).numpy()


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("residual", [False, True])
def test_against_float64_reference_and_unfused_ops(path, act, alpha, beta, residual):
    dtype = np.float32
    x, w, b, r, y64, geometry = operands(path, dtype, residual)
    want = ref_act(y64 + (r.astype(np.float64) if residual else 0), act, alpha, beta)
    got = run_fused(x, w, b, r, geometry, act, alpha, beta)
    assert got.dtype == dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(got, run_unfused(x, w, b, r, geometry, act, alpha, beta))


@pytest.mark.parametrize("path", ["im2col_tiles", "depthwise", "pointwise", "conv1d"])
@pytest.mark.parametrize("act,alpha,beta", ACTS[1:])
def test_float64(path, act, alpha, beta):
    x, w, b, r, y64, geometry = operands(path, np.float64, True)
    got = run_fused(x, w, b, r, geometry, act, alpha, beta)
    np.testing.assert_allclose(got, ref_act(y64 + r, act, alpha, beta), rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("act,alpha,beta", ACTS)
def test_nan_inf_and_overflow_match_the_unfused_ops_bit_for_bit(path, act, alpha, beta):
    x, w, b, r, _, geometry = operands(path, np.float32, True, seed=1)
    x.flat[[5, x.size // 2]] = np.nan
    x.flat[[x.size // 3, -4]] = np.inf
    x.flat[x.size // 5] = -np.inf
    r.flat[::17] = np.nan
    r.flat[2::19] = -np.inf
    r.flat[3::23] = np.inf
    w[0] *= 1e38  # the first output channel's sums overflow to +-inf
    got = run_fused(x, w, b, r, geometry, act, alpha, beta)
    want = run_unfused(x, w, b, r, geometry, act, alpha, beta)
    assert np.isnan(want).any() and np.isfinite(want).any()
    np.testing.assert_array_equal(got, want)  # NaN where NaN, the same infinities


def test_threads_get_what_one_thread_gets():
    cases = [operands(p, np.float32, True, seed=i) for i, p in enumerate(sorted(PATHS))]
    alone = [run_fused(x, w, b, r, g, "relu", 0, 0) for x, w, b, r, _, g in cases]
    results, failures = {}, []

    def work(k):
        try:
            for _ in range(3):
                for i, (x, w, b, r, _, g) in enumerate(cases):
                    results[k, i] = run_fused(x, w, b, r, g, "relu", 0, 0)
                    np.testing.assert_array_equal(results[k, i], alone[i])
        except Exception as e:  # reported below: assertions in threads do not fail the test
            failures.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures, failures[0]


def test_bad_arguments_name_the_op_and_the_shapes():
    x = hl.tensor(np.ones((1, 2, 5, 5), np.float32))
    w = hl.tensor(np.ones((3, 2, 3, 3), np.float32))
    with pytest.raises(errors.ShapeError, match=r"conv_fused: the residual must have the "
                                                r"output's shape \(1, 3, 3, 3\)"):
        hl.conv_fused(x, w, residual=hl.tensor(np.ones((1, 3, 1, 1), np.float32)))
    with pytest.raises(errors.DTypeError, match=r"conv_fused: the residual is \(1, 3, 3, 3\) "
                                                r"float64 but the other operands are float32"):
        hl.conv_fused(x, w, residual=hl.tensor(np.ones((1, 3, 3, 3), np.float64)))
    with pytest.raises(errors.ValueError, match="conv_fused: act must be one of"):
        hl.conv_fused(x, w, act="gelu")
    with pytest.raises(errors.ShapeError, match="conv_fused: expected a 3-D"):
        hl.conv_fused(hl.tensor(np.ones((5, 5), np.float32)), w)
    with pytest.raises(errors.ShapeError, match="conv_fused: input"):
        hl.conv_fused(x, hl.tensor(np.ones((3, 4, 3, 3), np.float32)))


def test_residual_may_be_a_view_and_the_output_may_not_overlap_it():
    x, w, b, r, y64, geometry = operands("pointwise", np.float32, True)
    big = np.concatenate([r, r], axis=3)
    view = hl.tensor(big)[:, :, :, ::2]  # strided: made contiguous by the core
    got = run_fused(x, w, b, view, geometry, "relu", 0, 0)
    np.testing.assert_array_equal(got, run_unfused(x, w, b, big[:, :, :, ::2], geometry,
                                                   "relu", 0, 0))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(0, 2), c=st.integers(1, 4), h=st.integers(1, 7), w=st.integers(1, 7),
       k=st.integers(1, 4), co_per_group=st.integers(1, 3), groups=st.integers(1, 2),
       stride=st.integers(1, 3), pad=st.integers(0, 3), residual=st.booleans(),
       act=st.sampled_from(ACTS), seed=st.integers(0, 2**16))
def test_any_geometry_gives_the_unfused_answer_or_the_same_error(n, c, h, w, k, co_per_group,
                                                                  groups, stride, pad, residual,
                                                                  act, seed):
    """Random sizes, including empty batches, kernels larger than the padded input and
    channel counts that do not divide: conv_fused answers exactly as conv + add + act, or
    both raise an hl error (never a crash)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c * groups, h, w)).astype(np.float32)
    wt = rng.standard_normal((co_per_group * groups, c, k, k)).astype(np.float32)
    geometry = (stride, pad, groups)
    try:
        want = run_unfused(x, wt, None, None, geometry, *act)
    except errors.HLError as e:
        with pytest.raises(type(e)):
            run_fused(x, wt, None, None, geometry, *act)
        return
    r = rng.standard_normal(want.shape).astype(np.float32) if residual else None
    want = run_unfused(x, wt, None, r, geometry, *act)
    np.testing.assert_array_equal(run_fused(x, wt, None, r, geometry, *act), want)


def test_meta_tensors_get_the_output_shape():
    x, w = hl.zeros((2, 3, 8, 8), device="meta"), hl.zeros((4, 3, 3, 3), device="meta")
    y = hl.conv_fused(x, w, None, hl.zeros((2, 4, 6, 6), device="meta"), act="relu")
    assert tuple(y.shape) == (2, 4, 6, 6) and str(y.device) == "meta"


def test_refuses_to_drop_a_gradient():
    x = hl.randn(1, 2, 5, 5, requires_grad=True)
    w = hl.randn(3, 2, 3, 3)
    with pytest.raises(errors.UnsupportedError, match="conv_fused: an inference kernel"):
        hl.conv_fused(x, w, act="relu")
    with hl.no_grad():
        assert hl.conv_fused(x, w, act="relu").shape == (1, 3, 3, 3)
