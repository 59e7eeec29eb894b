"""Batch norm and layer norm, forward and backward.

Tolerances: float32 forward rtol 1e-5 / atol 1e-5 against a float64 numpy reference (the
outputs are O(1)); float32 gradients against PyTorch rtol 1e-4 / atol 1e-4 (sums over the
batch); float64 against finite differences rtol 1e-5 / atol 1e-6 (eps 1e-6).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from tests.ops import harness

F32 = dict(rtol=1e-5, atol=1e-5)
GRAD32 = dict(rtol=1e-4, atol=1e-4)
FD64 = dict(rtol=1e-5, atol=1e-6)


def randn(rng, shape, dtype=np.float32, scale=1.0, shift=0.0):
    return (rng.standard_normal(shape) * scale + shift).astype(dtype)


def np_batch_norm(x, mean, var, w, b, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    x64 = x.astype(np.float64)
    y = (x64 - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
    if w is not None:
        y = y * w.reshape(shape)
    if b is not None:
        y = y + b.reshape(shape)
    return y.astype(x.dtype)


def batch_axes(x):
    return (0,) + tuple(range(2, x.ndim))


def np_layer_norm(x, axis, w, b, eps):
    axes = tuple(range(axis, x.ndim))
    x64 = x.astype(np.float64)
    m = x64.mean(axis=axes, keepdims=True)
    v = x64.var(axis=axes, keepdims=True)
    y = (x64 - m) / np.sqrt(v + eps)
    if w is not None:
        y = y * w
    if b is not None:
        y = y + b
    return y.astype(x.dtype)


# ---- batch norm forward --------------------------------------------------------------------

BN_SHAPES = [(8, 3), (4, 5, 7), (2, 3, 4, 5), (3, 1, 6), (5, 4, 1, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", BN_SHAPES)
@pytest.mark.parametrize("affine", [True, False])
def test_batch_norm_training_forward(rng, shape, dtype, affine):
    x = randn(rng, shape, dtype, scale=2.0, shift=3.0)
    C = shape[1]
    w = randn(rng, (C,), dtype) if affine else None
    b = randn(rng, (C,), dtype) if affine else None
    eps = 1e-5
    ax = batch_axes(x)
    want = np_batch_norm(x, x.astype(np.float64).mean(ax), x.astype(np.float64).var(ax), w, b, eps)

    def run(t):
        rm, rv = hl.tensor(np.zeros(C, dtype)), hl.tensor(np.ones(C, dtype))
        return hl.batch_norm(t, rm, rv, w if w is None else hl.tensor(w),
                             b if b is None else hl.tensor(b), training=True, eps=eps)

    harness.check_op(run, lambda a: want, [x], **F32)


@pytest.mark.parametrize("shape", BN_SHAPES[:3])
def test_batch_norm_inference_forward(rng, shape):
    x = randn(rng, shape)
    C = shape[1]
    rm, rv = randn(rng, (C,)), rng.random(C).astype(np.float32) + 0.5
    w, b = randn(rng, (C,)), randn(rng, (C,))
    want = np_batch_norm(x, rm, rv, w, b, 1e-3)
    harness.check_op(lambda t: hl.batch_norm(t, hl.tensor(rm), hl.tensor(rv), hl.tensor(w),
                                             hl.tensor(b), training=False, eps=1e-3),
                     lambda a: want, [x], **F32)
    # inference leaves the running statistics alone and reports them as the saved stats
    trm, trv = hl.tensor(rm), hl.tensor(rv)
    _, m, s = hl.batch_norm(hl.tensor(x), trm, trv, eps=1e-3, return_stats=True)
    harness.assert_close(trm, rm, 0, 0)
    harness.assert_close(m, rm, **F32)
    harness.assert_close(s, 1 / np.sqrt(rv.astype(np.float64) + 1e-3), **F32)


@pytest.mark.parametrize("momentum", [0.1, 0.5, 1.0, 0.0])
def test_batch_norm_running_stats_vs_torch(rng, momentum):
    torch = pytest.importorskip("torch")
    C = 4
    rm, rv = hl.tensor(np.zeros(C, np.float32)), hl.tensor(np.ones(C, np.float32))
    trm, trv = torch.zeros(C), torch.ones(C)
    for step in range(4):
        x = randn(rng, (6, C, 5), scale=1 + step, shift=step)
        y, m, s = hl.batch_norm(hl.tensor(x), rm, rv, training=True, momentum=momentum,
                                return_stats=True)
        ty = torch.nn.functional.batch_norm(torch.tensor(x), trm, trv, training=True,
                                            momentum=momentum)
        harness.assert_close(y, ty.numpy(), **F32)
        harness.assert_close(rm, trm.numpy(), **F32)
        harness.assert_close(rv, trv.numpy(), **F32)
        harness.assert_close(m, x.astype(np.float64).mean((0, 2)), **F32)
        harness.assert_close(s, 1 / np.sqrt(x.astype(np.float64).var((0, 2)) + 1e-5), **F32)


def test_batch_norm_strided_running_stats(rng):
    """Running statistics that are strided views are updated in place through the view."""
    x = randn(rng, (5, 3, 2))
    big = hl.tensor(np.zeros(6, np.float32))
    big_v = hl.tensor(np.ones(6, np.float32))
    rm, rv = big[::2], big_v[1::2]
    hl.batch_norm(hl.tensor(x), rm, rv, training=True, momentum=0.5)
    mean, var = x.astype(np.float64).mean((0, 2)), x.astype(np.float64).var((0, 2), ddof=1)
    harness.assert_close(big.numpy()[::2], 0.5 * mean, **F32)
    harness.assert_close(big.numpy()[1::2], np.zeros(3), 0, 0)
    harness.assert_close(big_v.numpy()[1::2], 0.5 + 0.5 * var, **F32)
    harness.assert_close(big_v.numpy()[::2], np.ones(3), 0, 0)


def test_batch_norm_empty_batch_and_nan_like_torch(rng):
    torch = pytest.importorskip("torch")
    rm, rv = hl.tensor(np.zeros(3, np.float32)), hl.tensor(np.ones(3, np.float32))
    y = hl.batch_norm(hl.tensor(np.zeros((0, 3, 4), np.float32)), rm, rv, training=True)
    assert y.shape == (0, 3, 4)
    assert (rm.numpy() == 0).all() and (rv.numpy() == 1).all()  # as torch: nothing to track
    x = randn(rng, (4, 3, 2))
    x[1, 1, 0] = np.nan
    x[2, 2, 1] = np.inf
    trm, trv = torch.zeros(3), torch.ones(3)
    ty = torch.nn.functional.batch_norm(torch.tensor(x), trm, trv, training=True)
    y = hl.batch_norm(hl.tensor(x), rm, rv, training=True)
    harness.assert_close(y, ty.numpy(), **F32)
    harness.assert_close(rm, trm.numpy(), **F32)
    harness.assert_close(rv, trv.numpy(), **F32)


def test_batch_norm_without_running_stats_when_training(rng):
    x = randn(rng, (6, 2))
    y = hl.batch_norm(hl.tensor(x), None, None, training=True)
    harness.assert_close(y, np_batch_norm(x, x.mean(0), x.var(0), None, None, 1e-5), **F32)


# ---- batch norm backward -------------------------------------------------------------------

@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("shape", [(8, 3), (4, 5, 7), (2, 3, 4, 5)])
def test_batch_norm_grad_vs_torch(rng, shape, training):
    torch = pytest.importorskip("torch")
    C = shape[1]
    x, dy = randn(rng, shape, scale=2, shift=1), randn(rng, shape)
    w, b = randn(rng, (C,)), randn(rng, (C,))
    rm, rv = randn(rng, (C,)), rng.random(C).astype(np.float32) + 0.5
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    ty = torch.nn.functional.batch_norm(tx, torch.tensor(rm), torch.tensor(rv), tw, tb,
                                        training=training)
    ty.backward(torch.tensor(dy))
    _, m, s = hl.batch_norm(hl.tensor(x), hl.tensor(rm), hl.tensor(rv), hl.tensor(w),
                            hl.tensor(b), training=training, return_stats=True)
    for name, layout in harness.LAYOUTS.items():
        dx, dw, db = hl.ops.batch_norm_grad(layout(dy), layout(x), m, s, hl.tensor(w),
                                        training=training)
        harness.assert_close(dx, tx.grad.numpy(), **GRAD32, what=f"dx {name}")
        harness.assert_close(dw, tw.grad.numpy(), **GRAD32, what=f"dw {name}")
        harness.assert_close(db, tb.grad.numpy(), **GRAD32, what=f"db {name}")


def test_batch_norm_grad_finite_differences(rng):
    x, w, b = rng.standard_normal((3, 2, 2)), rng.standard_normal(2), rng.standard_normal(2)
    r = rng.standard_normal((3, 2, 2))

    def loss(x_, w_, b_):
        y = hl.batch_norm(hl.tensor(x_), None, None, hl.tensor(w_), hl.tensor(b_), training=True)
        return float(np.sum(r * y.numpy()))

    _, m, s = hl.batch_norm(hl.tensor(x), None, None, hl.tensor(w), hl.tensor(b), training=True,
                            return_stats=True)
    dx, dw, db = hl.ops.batch_norm_grad(hl.tensor(r), hl.tensor(x), m, s, hl.tensor(w))
    harness.assert_close(dx, harness.numeric_grad(lambda a: loss(a, w, b), x), **FD64)
    harness.assert_close(dw, harness.numeric_grad(lambda a: loss(x, a, b), w), **FD64)
    harness.assert_close(db, harness.numeric_grad(lambda a: loss(x, w, a), b), **FD64)


def test_batch_norm_grad_needs(rng):
    x, dy = randn(rng, (4, 3)), randn(rng, (4, 3))
    _, m, s = hl.batch_norm(hl.tensor(x), None, None, training=True, return_stats=True)
    full = hl.ops.batch_norm_grad(hl.tensor(dy), hl.tensor(x), m, s)
    for needs in [(True, False, False), (False, True, False), (False, False, True),
                  (False, False, False), (False, True, True)]:
        got = hl.ops.batch_norm_grad(hl.tensor(dy), hl.tensor(x), m, s, needs=needs)
        for g, f, n in zip(got, full, needs):
            assert (g is None) == (not n)
            if n:
                harness.assert_close(g, f.numpy(), 0, 0)


def test_batch_norm_bad_inputs():
    x = hl.tensor(np.zeros((4, 3, 2), np.float32))
    rm, rv = hl.tensor(np.zeros(3, np.float32)), hl.tensor(np.ones(3, np.float32))
    with pytest.raises(hl.errors.ShapeError, match="at least 2 dimensions"):
        hl.batch_norm(hl.tensor(np.zeros(3, np.float32)), rm, rv)
    with pytest.raises(hl.errors.ShapeError, match=r"scale of shape \(3,\)"):
        hl.batch_norm(x, rm, rv, weight=hl.tensor(np.ones(4, np.float32)))
    with pytest.raises(hl.errors.ShapeError, match="running_var of shape"):
        hl.batch_norm(x, rm, hl.tensor(np.ones(2, np.float32)))
    with pytest.raises(hl.errors.DTypeError, match="dtypes must match"):
        hl.batch_norm(x, rm, hl.tensor(np.ones(3, np.float64)))
    with pytest.raises(hl.errors.DTypeError, match="floating-point"):
        hl.batch_norm(hl.tensor(np.zeros((4, 3), np.int64)), rm, rv)
    with pytest.raises(hl.errors.ValueError, match="momentum"):
        hl.batch_norm(x, rm, rv, training=True, momentum=1.5)
    with pytest.raises(hl.errors.ValueError, match="eps"):
        hl.batch_norm(x, rm, rv, eps=-1e-5)
    with pytest.raises(hl.errors.ValueError, match="more than 1 value per channel"):
        hl.batch_norm(hl.tensor(np.zeros((1, 3), np.float32)), rm, rv, training=True)
    with pytest.raises(hl.errors.ValueError, match="needs running_mean"):
        hl.batch_norm(x, None, None, training=False)
    with pytest.raises(hl.errors.ValueError, match="both running_mean and running_var"):
        hl.batch_norm(x, rm, None, training=True)
    with pytest.raises(hl.errors.ValueError, match="must not|overlaps"):
        hl.batch_norm(x, rm, rm, training=True)
    with pytest.raises(hl.errors.ValueError, match="hl Tensor"):
        hl.batch_norm(x, np.zeros(3, np.float32), rv)
    m, s = hl.tensor(np.zeros(3, np.float32)), hl.tensor(np.ones(3, np.float32))
    with pytest.raises(hl.errors.ShapeError, match="dy of shape"):
        hl.ops.batch_norm_grad(hl.tensor(np.zeros((4, 3), np.float32)), x, m, s)
    with pytest.raises(hl.errors.ShapeError, match="save_invstd of shape"):
        hl.ops.batch_norm_grad(x, x, m, hl.tensor(np.ones(2, np.float32)))


# ---- layer norm ----------------------------------------------------------------------------

LN_CASES = [((4, 6), 1), ((2, 3, 5), 2), ((2, 3, 5), 1), ((3, 300), 1), ((2, 2, 3, 4), 1),
            ((5,), 0), ((3, 1), 1), ((0, 4), 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", LN_CASES)
@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, True), (False, False)])
def test_layer_norm_forward(rng, shape, axis, dtype, affine):
    x = randn(rng, shape, dtype, scale=2, shift=-1)
    tail = shape[axis:]
    w = randn(rng, tail, dtype) if affine[0] else None
    b = randn(rng, tail, dtype) if affine[1] else None
    want = np_layer_norm(x, axis, w, b, 1e-5)
    for wl, bl in (("contiguous", "contiguous"), ("transposed", "strided")):
        wt = None if w is None else harness.LAYOUTS[wl](w)
        bt = None if b is None else harness.LAYOUTS[bl](b)
        harness.check_op(lambda t: hl.layer_norm(t, tail, wt, bt), lambda a: want, [x], **F32)
        harness.check_op(lambda t: hl.layer_norm(t, None, wt, bt, axis=axis - len(shape)),
                         lambda a: want, [x], **F32)


def test_layer_norm_stats_and_int_normalized_shape(rng):
    x = randn(rng, (2, 3, 4))
    y, m, s = hl.layer_norm(hl.tensor(x), 4, return_stats=True)
    assert m.shape == (2, 3) and s.shape == (2, 3)
    harness.assert_close(m, x.astype(np.float64).mean(-1), **F32)
    harness.assert_close(s, 1 / np.sqrt(x.astype(np.float64).var(-1) + 1e-5), **F32)
    harness.assert_close(y, np_layer_norm(x, 2, None, None, 1e-5), **F32)


def test_layer_norm_nan_row_like_torch(rng):
    torch = pytest.importorskip("torch")
    x = randn(rng, (3, 4))
    x[1, 2] = np.nan
    x[2, 0] = -np.inf
    want = torch.nn.functional.layer_norm(torch.tensor(x), (4,)).numpy()
    harness.assert_close(hl.layer_norm(hl.tensor(x), (4,)), want, **F32)


@pytest.mark.parametrize("shape,axis", [((4, 6), 1), ((2, 3, 5), 1), ((3, 300), 1),
                                        ((2, 3, 5), 2)])
def test_layer_norm_grad_vs_torch(rng, shape, axis):
    torch = pytest.importorskip("torch")
    tail = shape[axis:]
    x, dy = randn(rng, shape, scale=2, shift=1), randn(rng, shape)
    w, b = randn(rng, tail), randn(rng, tail)
    tx, tw, tb = (torch.tensor(a, requires_grad=True) for a in (x, w, b))
    torch.nn.functional.layer_norm(tx, tail, tw, tb).backward(torch.tensor(dy))
    _, m, s = hl.layer_norm(hl.tensor(x), tail, hl.tensor(w), hl.tensor(b), return_stats=True)
    for name, layout in harness.LAYOUTS.items():
        dx, dw, db = hl.ops.layer_norm_grad(layout(dy), layout(x), m, s, layout(w))
        harness.assert_close(dx, tx.grad.numpy(), **GRAD32, what=f"dx {name}")
        harness.assert_close(dw, tw.grad.numpy(), **GRAD32, what=f"dw {name}")
        harness.assert_close(db, tb.grad.numpy(), **GRAD32, what=f"db {name}")
    dx, dw, db = hl.ops.layer_norm_grad(hl.tensor(dy), hl.tensor(x), m, s, None,
                                    needs=(True, False, True))
    assert dw is None
    tx.grad = None
    torch.nn.functional.layer_norm(tx, tail).backward(torch.tensor(dy))
    harness.assert_close(dx, tx.grad.numpy(), **GRAD32)


def test_layer_norm_grad_finite_differences(rng):
    x, w, b = (rng.standard_normal(s) for s in ((3, 2, 2), (2, 2), (2, 2)))
    r = rng.standard_normal((3, 2, 2))

    def loss(x_, w_, b_):
        return float(np.sum(r * hl.layer_norm(hl.tensor(x_), (2, 2), hl.tensor(w_),
                                              hl.tensor(b_)).numpy()))

    _, m, s = hl.layer_norm(hl.tensor(x), (2, 2), hl.tensor(w), hl.tensor(b), return_stats=True)
    dx, dw, db = hl.ops.layer_norm_grad(hl.tensor(r), hl.tensor(x), m, s, hl.tensor(w))
    harness.assert_close(dx, harness.numeric_grad(lambda a: loss(a, w, b), x), **FD64)
    harness.assert_close(dw, harness.numeric_grad(lambda a: loss(x, a, b), w), **FD64)
    harness.assert_close(db, harness.numeric_grad(lambda a: loss(x, w, a), b), **FD64)


def test_layer_norm_bad_inputs():
    x = hl.tensor(np.zeros((2, 3, 4), np.float32))
    with pytest.raises(hl.errors.ShapeError, match="normalized_shape"):
        hl.layer_norm(x, (3,))
    with pytest.raises(hl.errors.ShapeError, match="normalized_shape"):
        hl.layer_norm(x, ())
    with pytest.raises(hl.errors.ValueError, match="exactly one"):
        hl.layer_norm(x, (4,), axis=2)
    with pytest.raises(hl.errors.IndexError, match="axis 3"):
        hl.layer_norm(x, axis=3)
    with pytest.raises(hl.errors.ShapeError, match=r"scale of shape \(3, 4\)"):
        hl.layer_norm(x, (3, 4), weight=hl.tensor(np.ones(4, np.float32)))
    with pytest.raises(hl.errors.DTypeError, match="dtypes must match"):
        hl.layer_norm(x, (4,), bias=hl.tensor(np.ones(4, np.float64)))
    with pytest.raises(hl.errors.ValueError, match="eps"):
        hl.layer_norm(x, (4,), eps=float("nan"))
    m = hl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(hl.errors.ShapeError, match="invstd of shape"):
        hl.ops.layer_norm_grad(x, x, m, hl.tensor(np.zeros((2,), np.float32)))
    with pytest.raises(hl.errors.ShapeError, match="dy of shape"):
        hl.ops.layer_norm_grad(hl.tensor(np.zeros((2, 3), np.float32)), x, m, m)


# ---- properties ------------------------------------------------------------------------------

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@FAST
@given(shape=shapes, axis=st.integers(-5, 5), seed=st.integers(0, 99))
def test_property_layer_norm(shape, axis, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    try:
        got = hl.layer_norm(hl.tensor(x).reshape(shape), axis=axis)
    except hl.errors.HLError:
        assert not -len(shape) <= axis < len(shape)
        return
    a = axis % len(shape)
    if np.prod(shape[a:]) == 0:
        assert got.shape == shape
        return
    harness.assert_close(got, np_layer_norm(x, a, None, None, 1e-5), rtol=1e-4, atol=1e-4)


@FAST
@given(shape=shapes, training=st.booleans(), nstats=st.integers(0, 5), seed=st.integers(0, 99))
def test_property_batch_norm(shape, training, nstats, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    rm, rv = np.zeros(nstats, np.float32), np.ones(nstats, np.float32)
    try:
        got = hl.batch_norm(hl.tensor(x).reshape(shape), hl.tensor(rm), hl.tensor(rv),
                            training=training)
    except hl.errors.HLError:
        per_channel = int(np.prod(shape)) // max(shape[1], 1) if len(shape) >= 2 else 0
        assert (len(shape) < 2 or shape[1] != nstats or (training and per_channel == 1))
        return
    assert len(shape) >= 2 and shape[1] == nstats
    if training and x.size:
        ax = batch_axes(x)
        want = np_batch_norm(x, x.astype(np.float64).mean(ax), x.astype(np.float64).var(ax),
                             None, None, 1e-5)
    else:
        want = np_batch_norm(x, rm, rv, None, None, 1e-5)
    harness.assert_close(got, want, rtol=1e-4, atol=1e-4)


# ---- layer norm numerics and threads -------------------------------------------------------

def test_layer_norm_rows_far_from_zero_and_adversarial(rng):
    """float32 rows whose mean is 1e4 times their spread (the one-pass statistics shift by
    the row's first element, so E[d^2] - E[d]^2 does not cancel), rows whose first element
    is an outlier or is inf or NaN, and BERT's 768 columns (the AVX2 sums' 16-element blocks
    and the tail). Against float64 numpy and PyTorch; stats within float32 rounding."""
    torch = pytest.importorskip("torch")
    for cols in (5, 16, 37, 768):
        x = randn(rng, (6, cols), scale=1e-2, shift=1e4).astype(np.float32)
        x[1] = randn(rng, cols, scale=3.0, shift=-2e3)
        x[2, 0] = 1e6  # an outlier first: the shift is far from the mean
        x[3, 0] = np.inf
        x[4, 0] = np.nan
        x[5, cols // 2] = -np.inf
        w, b = randn(rng, cols), randn(rng, cols)
        y, m, s = hl.layer_norm(hl.tensor(x), (cols,), hl.tensor(w), hl.tensor(b),
                                return_stats=True)
        with np.errstate(invalid="ignore"):
            want = np_layer_norm(x, 1, w, b, 1e-5)
            x64 = x.astype(np.float64)
            want_m = x64.mean(-1)
            want_s = 1 / np.sqrt(x64.var(-1) + 1e-5)
        harness.assert_close(y, want, **F32)
        harness.assert_close(m, want_m, **F32)
        # 1 / std: relative error of float32 rounding only (the shift keeps var accurate)
        harness.assert_close(s, want_s, rtol=1e-5, atol=0)
        tw = torch.nn.functional.layer_norm(torch.tensor(x), (cols,), torch.tensor(w),
                                            torch.tensor(b)).numpy()
        np.testing.assert_array_equal(np.isnan(y.numpy()), np.isnan(tw))


def test_norms_and_softmax_bit_for_bit_at_one_and_two_threads(rng):
    """The pool's split of rows, channels and column blocks changes no bit: layer norm and
    batch norm forward and backward, softmax, log_softmax and their gradients (contiguous
    rows and side-by-side tiles), the softmax cross-entropy and its gradient, all above the
    kernels' parallel threshold."""
    x = randn(rng, (96, 768), scale=2, shift=1)
    dy = randn(rng, (96, 768))
    w, b = randn(rng, (768,)), randn(rng, (768,))
    xb = randn(rng, (8, 24, 10, 10))
    dyb = randn(rng, (8, 24, 10, 10))
    x3 = randn(rng, (4, 50, 130))
    labels = rng.integers(0, 768, 96).astype(np.int64)

    def run():
        out = {}
        y, m, s = hl.layer_norm(hl.tensor(x), (768,), hl.tensor(w), hl.tensor(b),
                                return_stats=True)
        out["ln"], out["ln_m"], out["ln_s"] = y.numpy(), m.numpy(), s.numpy()
        grads = hl.ops.layer_norm_grad(hl.tensor(dy), hl.tensor(x), m, s, hl.tensor(w))
        for k, g in zip(("ln_dx", "ln_dw", "ln_db"), grads):
            out[k] = g.numpy()
        xt = hl.tensor(xb, requires_grad=True)
        yb = hl.batch_norm(xt, None, None, training=True)
        out["bn"] = yb.numpy()
        yb.backward(hl.tensor(dyb))
        out["bn_dx"] = xt.grad.numpy()
        for axis in (-1, 1):
            for f in (hl.softmax, hl.log_softmax):
                t = hl.tensor(x3, requires_grad=True)
                y = f(t, axis=axis)
                out[f"{f.__name__}{axis}"] = y.numpy()
                y.backward(hl.tensor(np.ones_like(x3)))
                out[f"{f.__name__}{axis}_dx"] = t.grad.numpy()
        t = hl.tensor(x, requires_grad=True)
        loss = hl.losses.softmax_cross_entropy(t, hl.tensor(labels), reduction="none")
        out["ce"] = loss.numpy()
        loss.backward(hl.tensor(np.ones(96, np.float32)))
        out["ce_dx"] = t.grad.numpy()
        return out

    before = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = run()
        hl.set_num_threads(2)
        two = run()
    finally:
        hl.set_num_threads(before)
    for k in one:
        assert one[k].tobytes() == two[k].tobytes(), k
    harness.assert_close(one["ln"], np_layer_norm(x, 1, w, b, 1e-5), **F32)


@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("spatial", [(5, 7), (4, 4), (1, 3), (32, 32)])
def test_batch_norm_float32_output_is_the_double_expression_bit_for_bit(rng, training, spatial):
    """cpu/norm_rows.c writes float32 batch-norm outputs 8 at a time (AVX2) and the rest of
    each row one by one; every value must be float32((x - mean) * (w * invstd) + b) computed in
    float64 with two roundings (no FMA), the scalar loop's expression, with the statistics
    as the call reports them (training normalises by the saved float32 ones). Rows of 35, 16,
    3 and 1024 values: whole vectors, tails, and a row shorter than a vector; NaN, infinities
    (inference) and signed zeros pass as the expression says."""
    C = 3
    x = randn(rng, (4, C) + spatial, scale=3.0, shift=0.5)
    x.flat[7::23] = -0.0
    if not training:  # (in training they would make every statistic, so every output, NaN)
        x.flat[::11] = np.nan
        x.flat[3::17] = np.inf
        x.flat[5::19] = -np.inf
    w, b = randn(rng, (C,)), randn(rng, (C,))
    rm, rv = randn(rng, (C,)), rng.random(C).astype(np.float32) + 0.5
    y, m, s = hl.batch_norm(hl.tensor(x), hl.tensor(rm), hl.tensor(rv), hl.tensor(w),
                            hl.tensor(b), training=training, eps=1e-3, return_stats=True)
    shape = (1, C, 1, 1)
    mean = m.numpy().astype(np.float64).reshape(shape)
    invstd = (s.numpy().astype(np.float64) if training else
              1 / np.sqrt(rv.astype(np.float64) + 1e-3)).reshape(shape)
    a = w.astype(np.float64).reshape(shape) * invstd
    want = ((x.astype(np.float64) - mean) * a + b.astype(np.float64).reshape(shape))
    want = want.astype(np.float32)
    got = y.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got.view(np.uint32)[~np.isnan(want)],
                                  want.view(np.uint32)[~np.isnan(want)])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
