"""gemm_pack_b and matmul_fused: act(a @ b + bias + residual) on a B packed once (the inference
products hl/onnx/fuse_matmul.py makes), or on a plain B (OpenBLAS, then the epilogue).

Each is checked against a float64 numpy reference: float32 within 2e-6 of sum(|a||b|) + 1
per output (sums in another order; GELU's fast erf/tanh add under 3e-7 relative), float64
1e-12. Shapes cover every edge of the kernel: rows that are not a multiple of its 6-row tile,
columns not a multiple of its 16-column panel, K across several 256-row blocks and K = 0,
batch axes, a transposed B, and enough work for two threads. Adversarial values: NaN and
infinities in a, the bias and the residual, masked rows of -inf, |x| up to 1e4 through every
activation (GELU's tails), compared with the unfused ops, which they must match where those
are finite and share NaN/inf placement with.
"""
import math
import threading

import numpy as np
import pytest

import hl
from hl import errors, ops

ACTS = [("none", 0.0, 0.0), ("relu", 0.0, 0.0), ("clip", -0.5, 0.25), ("leaky_relu", 0.1, 0.0),
        ("hard_sigmoid", 0.2, 0.5), ("gelu", 0.0, 0.0), ("gelu_tanh", 0.0, 0.0)]
SHAPES = [(1, 1, 1), (5, 7, 3), (6, 16, 16), (13, 300, 17), (64, 768, 80), (7, 513, 33),
          (130, 40, 50), (4, 0, 5), (0, 8, 9)]


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def ref_act(y, act, alpha, beta):
    with np.errstate(all="ignore"):
        if act == "relu":
            return np.where(y > 0, y, np.where(np.isnan(y), y, 0.0))
        if act == "clip":
            return np.minimum(np.maximum(y, alpha), beta)
        if act == "leaky_relu":
            return np.where(y >= 0, y, alpha * y)
        if act == "hard_sigmoid":
            return np.where(np.isnan(y), y, np.clip(alpha * y + beta, 0, 1))
        if act == "gelu":
            return 0.5 * y * (1 + _erf(y / math.sqrt(2)))
        if act == "gelu_tanh":
            return 0.5 * y * (1 + np.tanh(math.sqrt(2 / math.pi) * (y + 0.044715 * y ** 3)))
    return y


def reference(a, b, bias, r, act, alpha, beta):
    y = a.astype(np.float64) @ b.astype(np.float64)
    if bias is not None:
        y = y + bias
    if r is not None:
        y = y + r
    return ref_act(y, act, alpha, beta)


def _data(rng, m, k, n, lead=()):
    a = rng.standard_normal(lead + (m, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    r = rng.standard_normal(lead + (m, n)).astype(np.float32)
    return a, b, bias, r


def _close(got, want, a, b, rtol):
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + 1
    assert got.shape == want.shape
    assert np.all(np.abs(got - want) <= rtol * scale), np.max(np.abs(got - want) / scale)


@pytest.mark.parametrize("act,alpha,beta", ACTS)
@pytest.mark.parametrize("m,k,n", SHAPES)
def test_packed_and_plain_match_float64(m, k, n, act, alpha, beta):
    rng = np.random.default_rng(m * 1000 + k + n)
    a, b, bias, r = _data(rng, m, k, n)
    want = reference(a, b, bias, r, act, alpha, beta)
    packed = ops.gemm_pack_b(hl.tensor(b))
    assert packed.shape == (k, n) and packed.data.shape == ((n + 15) // 16, k, 16)
    for bb in (packed, hl.tensor(b)):
        got = hl.matmul_fused(hl.tensor(a), bb, hl.tensor(bias), hl.tensor(r), act=act,
                              alpha=alpha, beta=beta).numpy()
        _close(got, want, a, b, 2e-6)


@pytest.mark.parametrize("with_bias,with_res", [(False, False), (True, False), (False, True)])
def test_optional_operands_batch_axes_and_transposed_b(with_bias, with_res):
    rng = np.random.default_rng(1)
    a, b, bias, r = _data(rng, 9, 40, 35, lead=(2, 3))
    bias = bias if with_bias else None
    r = r if with_res else None
    want = reference(a, b, bias, r, "gelu", 0, 0)
    bt = hl.tensor(np.ascontiguousarray(b.T))
    for bb in (ops.gemm_pack_b(bt, trans_b=True), ops.gemm_pack_b(hl.tensor(b)), bt.T):
        got = hl.matmul_fused(hl.tensor(a), bb, None if bias is None else hl.tensor(bias),
                              None if r is None else hl.tensor(r), act="gelu").numpy()
        _close(got, want, a, b, 2e-6)


def test_float64_plain_b():
    rng = np.random.default_rng(2)
    a, b, bias, r = (x.astype(np.float64) for x in _data(rng, 11, 20, 19))
    for act, alpha, beta in ACTS:
        got = hl.matmul_fused(hl.tensor(a), hl.tensor(b), hl.tensor(bias), hl.tensor(r),
                              act=act, alpha=alpha, beta=beta).numpy()
        np.testing.assert_allclose(got, reference(a, b, bias, r, act, alpha, beta),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("m", [70, 144, 145])
def test_large_products_on_two_threads_equal_one_thread(m):
    """At two threads the pool cuts 44 panels into 8 chunks; with at most 144 rows (one
    block of A) each thread packs A once and reuses it for its later chunks, past that
    (145) every chunk packs each block again: the same bits either way."""
    rng = np.random.default_rng(3)
    a, b, bias, r = _data(rng, m, 600, 700)
    packed = ops.gemm_pack_b(hl.tensor(b))
    before = hl.get_num_threads()
    outs = []
    try:
        for t in (1, 2):
            hl.set_num_threads(t)
            outs.append(hl.matmul_fused(hl.tensor(a), packed, hl.tensor(bias), hl.tensor(r),
                                        act="gelu_tanh").numpy())
    finally:
        hl.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])  # each column is one thread's, same order
    _close(outs[0], reference(a, b, bias, r, "gelu_tanh", 0, 0), a, b, 2e-6)


# The cut between threads (split_product in libcore/src/cpu/matmul_fused.c): row blocks of at
# most 144 rows (MC) in 6-row tiles, split into more blocks when a thread gets two or more of
# at least 48 rows (M >= 187 at two threads, 283 at three), else ranges of 16-column panels
# as well. Shapes around each boundary: M just below, at and above MC and the row-split
# thresholds, odd K across 256-row blocks, N not a multiple of 16 (a narrow last panel), one
# column (a single panel: rows only), K = 0 (the epilogue alone), and many panels of few rows.
SPLIT_SHAPES = [(143, 37, 101), (144, 300, 33), (145, 257, 100), (186, 41, 70), (187, 40, 70),
                (282, 29, 61), (283, 29, 61), (515, 1000, 1), (600, 0, 900), (7, 1000, 1100),
                (1031, 77, 47)]
SPLIT_EPILOGUES = [(False, False, "none"), (True, False, "gelu"), (True, True, "relu"),
                   (False, True, "gelu_tanh"), (True, True, "clip")]


@pytest.mark.parametrize("bias_on,res_on,act", SPLIT_EPILOGUES)
@pytest.mark.parametrize("m,k,n", SPLIT_SHAPES)
def test_every_cut_between_threads_gives_the_same_bits(m, k, n, bias_on, res_on, act):
    """One, two and three threads cut the product differently (rows only, rows and panels,
    one block): each output is summed in the same order either way, so the bits agree, and
    all agree with float64 (2e-6 of sum |a||b| + 1)."""
    rng = np.random.default_rng(m * 7 + k * 3 + n)
    a, b, bias, r = _data(rng, m, k, n)
    bias = bias if bias_on else None
    r = r if res_on else None
    alpha, beta = (-0.5, 0.25) if act == "clip" else (0.0, 0.0)
    packed = ops.gemm_pack_b(hl.tensor(b))
    before = hl.get_num_threads()
    outs = []
    try:
        for t in (1, 2, 3):
            hl.set_num_threads(t)
            outs.append(hl.matmul_fused(hl.tensor(a), packed,
                                        None if bias is None else hl.tensor(bias),
                                        None if r is None else hl.tensor(r), act=act,
                                        alpha=alpha, beta=beta).numpy())
    finally:
        hl.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    _close(outs[0], reference(a, b, bias, r, act, alpha, beta), a, b, 2e-6)


# A packed B over 16 MB (split_product's WIDE_B_BYTES: GPT-2's logits) is cut into panel
# ranges first, each run for every row block, every thread keeping all of A packed. K = 64 and
# 4100 panels make 16.8 MB; 151 rows are two row blocks at one thread (the second ending in a
# one-row tile) and M = 20 one; the last panel is narrow (65599 = 4099 x 16 + 15).
@pytest.mark.parametrize("m", [20, 151])
def test_wide_b_cut_panels_first_gives_the_same_bits(m):
    rng = np.random.default_rng(m)
    k, n = 64, 65599
    a, b, bias, r = _data(rng, m, k, n)
    packed = ops.gemm_pack_b(hl.tensor(b))
    assert packed.data.shape[0] * k * 16 * 4 > 16 << 20
    before = hl.get_num_threads()
    outs = []
    try:
        for t in (1, 2, 3):
            hl.set_num_threads(t)
            outs.append(hl.matmul_fused(hl.tensor(a), packed, hl.tensor(bias), hl.tensor(r),
                                        act="relu").numpy())
    finally:
        hl.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    _close(outs[0], reference(a, b, bias, r, "relu", 0, 0), a, b, 2e-6)


def test_several_python_threads_get_one_threads_answers():
    rng = np.random.default_rng(4)
    a, b, bias, r = _data(rng, 33, 100, 90)
    packed = ops.gemm_pack_b(hl.tensor(b))
    ta, tbias, tr = hl.tensor(a), hl.tensor(bias), hl.tensor(r)
    want = hl.matmul_fused(ta, packed, tbias, tr, act="gelu").numpy()
    got, errs = [], []

    def work():
        try:
            for _ in range(20):
                got.append(hl.matmul_fused(ta, packed, tbias, tr, act="gelu").numpy())
        except Exception as e:  # pragma: no cover - reported below
            errs.append(e)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errs
    for g in got:
        np.testing.assert_array_equal(g, want)


def _unfused(a, b, bias, r, act, alpha, beta):
    y = hl.matmul(a, b) + bias + r
    return {"none": lambda: y, "relu": lambda: hl.relu(y),
            "clip": lambda: hl.clip(y, alpha, beta),
            "leaky_relu": lambda: hl.leaky_relu(y, alpha),
            "hard_sigmoid": lambda: hl.hard_sigmoid(y, alpha, beta),
            "gelu": lambda: hl.gelu(y), "gelu_tanh": lambda: hl.gelu_tanh(y)}[act]()


@pytest.mark.parametrize("act,alpha,beta", ACTS)
def test_adversarial_values_agree_with_the_unfused_ops(act, alpha, beta):
    rng = np.random.default_rng(5)
    m, k, n = 12, 20, 40
    a = (rng.standard_normal((m, k)) * 300).astype(np.float32)  # outputs up to ~1e4
    a[0, 3] = np.nan
    a[1, 0] = np.inf
    b = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(n).astype(np.float32)
    bias[5] = -np.inf
    r = rng.standard_normal((m, n)).astype(np.float32)
    r[4, :] = -np.inf  # a fully masked row
    r[6, 7] = np.nan
    got = hl.matmul_fused(hl.tensor(a), ops.gemm_pack_b(hl.tensor(b)), hl.tensor(bias),
                          hl.tensor(r), act=act, alpha=alpha, beta=beta).numpy()
    want = _unfused(hl.tensor(a), hl.tensor(b), hl.tensor(bias), hl.tensor(r), act, alpha,
                    beta).numpy()
    ref = reference(a, b, bias, r, act, alpha, beta)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))
    fin = np.isfinite(ref)
    scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64)) + 1
    assert np.all(np.abs(got[fin] - ref[fin]) <= 2e-6 * scale[fin])


def test_gelu_tails_and_small_values_keep_the_stated_error():
    """Over |x| up to 30 and down to 1e-30 (one-column products x * 1, the partial-panel path,
    and 16-column ones, the AVX2 kernel's), the fused GELUs stay within 1e-6 relative of
    float64, plus 3e-7 |x| for x < 0: there 1 + erf(x) (1 + tanh) cancels in float32, in the
    formula itself (the unfused ONNX graph computes the same)."""
    x = np.concatenate([np.linspace(-30, 30, 6001), np.logspace(-30, 1, 399),
                        -np.logspace(-30, 1, 400)]).astype(np.float32)
    for cols in (1, 16):
        eye = ops.gemm_pack_b(hl.tensor(np.ones((1, cols), np.float32)))
        for act in ("gelu", "gelu_tanh"):
            got = hl.matmul_fused(hl.tensor(x.reshape(-1, 1)), eye, act=act).numpy()
            want = ref_act(x.astype(np.float64), act, 0, 0)[:, None]
            bound = 1e-6 * np.abs(want) + 3e-7 * np.abs(x[:, None]) * (x[:, None] < 0)
            assert np.all(np.abs(got - want) <= bound), (act, cols)


def test_errors_name_the_op_and_shapes():
    a = hl.tensor(np.ones((3, 4), np.float32))
    b = hl.tensor(np.ones((4, 5), np.float32))
    packed = ops.gemm_pack_b(b)
    with pytest.raises(errors.ShapeError, match=r"matmul_fused: a \(3, 4\) float32 and b \(5, 4\)"):
        hl.matmul_fused(a, hl.tensor(np.ones((5, 4), np.float32)))
    with pytest.raises(errors.ShapeError, match="matmul_fused: b must be what gemm_pack_b"):
        hl.matmul_fused(hl.tensor(np.ones((3, 6), np.float32)), packed)
    with pytest.raises(errors.ShapeError, match=r"bias must be a \(5,\)"):
        hl.matmul_fused(a, packed, hl.tensor(np.ones(4, np.float32)))
    with pytest.raises(errors.ShapeError, match="residual must have the result's shape"):
        hl.matmul_fused(a, packed, None, hl.tensor(np.ones((1, 5), np.float32)))
    with pytest.raises(errors.DTypeError, match="packed b takes a float32 a"):
        hl.matmul_fused(a.astype("float64"), packed)
    with pytest.raises(errors.DTypeError, match="gemm_pack_b: packs float32"):
        ops.gemm_pack_b(b.astype("float64"))
    with pytest.raises(errors.ShapeError, match="gemm_pack_b: expected a 2-D"):
        ops.gemm_pack_b(hl.tensor(np.ones(4, np.float32)))
    with pytest.raises(errors.ValueError, match="act must be one of"):
        hl.matmul_fused(a, packed, act="swish")
    with pytest.raises(errors.DTypeError, match="computes in float32 and float64"):
        hl.matmul_fused(hl.tensor(np.ones((3, 4), np.int32)), hl.tensor(np.ones((4, 5),
                                                                                np.int32)))
    w = hl.tensor(np.ones((4, 5), np.float32), requires_grad=True)
    with pytest.raises(errors.UnsupportedError, match="without a gradient"):
        hl.matmul_fused(a, w)
    with pytest.raises(errors.UnsupportedError, match="gemm_pack_b: packs a constant weight"):
        hl.gemm_pack_b(w)
    with hl.no_grad():
        assert hl.matmul_fused(a, w).shape == (3, 5)
        assert hl.matmul_fused(a, hl.gemm_pack_b(w)).shape == (3, 5)


def test_out_of_place_output_never_aliases_inputs():
    rng = np.random.default_rng(6)
    a, b, bias, r = _data(rng, 8, 8, 8)
    ta = hl.tensor(a)
    with pytest.raises(errors.HLError, match="overlap"):
        ops.matmul_fused_forward(ta, ops.gemm_pack_b(hl.tensor(b)), out=ta)
