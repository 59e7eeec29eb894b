"""softmax / log_softmax, their gradients, and softmax cross-entropy.

Tolerances: float32 forward rtol 1e-5 / atol 1e-6 against a float64 numpy reference; float32
gradients against PyTorch rtol 1e-4 / atol 1e-5; float64 against finite differences
rtol 1e-5 / atol 1e-7 (eps 1e-6, central differences).
"""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from tests.ops import harness

F32 = dict(rtol=1e-5, atol=1e-6)
GRAD32 = dict(rtol=1e-4, atol=1e-5)
FD64 = dict(rtol=1e-5, atol=1e-7)


def np_log_softmax(x, axis):
    x64 = np.asarray(x, dtype=np.float64)
    m = np.max(x64, axis=axis, keepdims=True) if x64.size else 0
    z = x64 - m
    with np.errstate(divide="ignore", invalid="ignore"):
        return (z - np.log(np.sum(np.exp(z), axis=axis, keepdims=True))).astype(x.dtype)


def np_softmax(x, axis):
    return np.exp(np_log_softmax(x.astype(np.float64), axis)).astype(x.dtype)


def randn(rng, shape, dtype=np.float32, scale=3.0):
    return (rng.standard_normal(shape) * scale).astype(dtype)


# ---- forward ---------------------------------------------------------------------------------

SHAPES_AXES = [((7,), 0), ((3, 5), -1), ((3, 5), 0), ((2, 3, 4), 1), ((2, 3, 70), 1),
               ((2, 130, 3), -1), ((4, 1, 5), 1), ((1, 1), 0), ((2, 0, 3), 2), ((2, 0, 3), 1),
               ((2, 3, 2, 5), 2), ((3, 4, 2), -3)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape,axis", SHAPES_AXES)
def test_softmax_forward(rng, shape, axis, dtype):
    x = randn(rng, shape, dtype)
    tol = F32 if dtype == np.float32 else dict(rtol=1e-12, atol=1e-14)
    harness.check_op(lambda t: hl.softmax(t, axis), lambda a: np_softmax(a, axis), [x], **tol)
    harness.check_op(lambda t: hl.log_softmax(t, axis), lambda a: np_log_softmax(a, axis), [x],
                     rtol=tol["rtol"], atol=tol["atol"] * 10)


def test_softmax_large_values_do_not_overflow():
    x = np.array([[1000.0, 1001.0, 999.0], [-1000.0, -1001.0, -999.0]], np.float32)
    harness.assert_close(hl.softmax(hl.tensor(x)), np_softmax(x, -1), **F32)
    harness.assert_close(hl.log_softmax(hl.tensor(x)), np_log_softmax(x, -1), **F32)


def test_softmax_wide_range_float32():
    """The float32 kernels use their own exp for x - max <= 0: check it over the whole range
    (below exp(-87) results may flush to 0, hence the tiny atol)."""
    x = np.linspace(-120.0, 0.0, 20001, dtype=np.float32)
    x[::7] -= np.float32(0.3)
    want = np_log_softmax(x, 0)
    harness.assert_close(hl.log_softmax(hl.tensor(x)), want, rtol=2e-7, atol=0)
    harness.assert_close(hl.softmax(hl.tensor(x)), np_softmax(x, 0), rtol=1e-6, atol=1e-37)
    cols = np.stack([x, x[::-1]], axis=1)  # the strided-axis kernel, same values
    harness.assert_close(hl.softmax(hl.tensor(cols), 0), np_softmax(cols, 0), rtol=1e-6,
                         atol=1e-37)


def test_softmax_0d_and_int_input():
    y = hl.softmax(hl.tensor(np.array(2.5, np.float32)).reshape(()), 0)
    assert y.shape == () and y.item() == 1.0
    y = hl.softmax(hl.tensor(np.array([1, 2, 3], np.int64)))
    assert y.dtype == hl.float32
    harness.assert_close(y, np_softmax(np.array([1, 2, 3], np.float32), -1), **F32)


def test_softmax_out_and_guard(rng):
    x = randn(rng, (3, 6))
    harness.check_guard(lambda out: hl.softmax(hl.tensor(x), 1, out=out), (3, 6))
    out = hl.tensor(np.zeros((3, 6), np.float32))
    r = hl.log_softmax(hl.tensor(x), 1, out=out)
    harness.assert_close(out, np_log_softmax(x, 1), **F32)
    assert r.shares_memory(out)


def test_softmax_in_place(rng):
    x = randn(rng, (4, 70, 3))
    t = hl.tensor(x)
    hl.softmax(t, 1, out=t)
    harness.assert_close(t, np_softmax(x, 1), **F32)


def test_softmax_nan_inf_like_torch():
    torch = pytest.importorskip("torch")
    inf, nan = np.inf, np.nan
    rows = np.array([[-inf, -inf, -inf], [inf, 1, 2], [nan, 1, 2], [-inf, 1, 2], [inf, inf, 0],
                     [1, 2, 3]], np.float32)
    for axis, x in ((1, rows), (0, np.ascontiguousarray(rows.T))):
        for f, tf in ((hl.softmax, torch.softmax), (hl.log_softmax, torch.log_softmax)):
            want = tf(torch.tensor(x), axis).numpy()
            harness.assert_close(f(hl.tensor(x), axis), want, **F32, what=f.__name__)


# ---- softmax gradients ------------------------------------------------------------------------

@pytest.mark.parametrize("shape,axis", [((3, 5), -1), ((2, 3, 70), 1), ((4, 2, 3), 0),
                                        ((2, 0, 3), 1)])
@pytest.mark.parametrize("log", [False, True])
def test_softmax_grad_vs_torch(rng, shape, axis, log):
    torch = pytest.importorskip("torch")
    x, dy = randn(rng, shape), randn(rng, shape, scale=1.0)
    tx = torch.tensor(x, requires_grad=True)
    ty = (torch.log_softmax if log else torch.softmax)(tx, axis)
    ty.backward(torch.tensor(dy))
    y = (hl.log_softmax if log else hl.softmax)(hl.tensor(x), axis)
    grad = hl.ops.log_softmax_grad if log else hl.ops.softmax_grad
    for name, layout in harness.LAYOUTS.items():
        got = grad(layout(y.numpy()), layout(dy), axis)
        harness.assert_close(got, tx.grad.numpy(), **GRAD32, what=name)


@pytest.mark.parametrize("log", [False, True])
@pytest.mark.parametrize("axis", [0, 1])
def test_softmax_grad_finite_differences(rng, log, axis):
    x = rng.standard_normal((3, 4))
    w = rng.standard_normal((3, 4))
    fwd = hl.log_softmax if log else hl.softmax
    want = harness.numeric_grad(lambda a: float(np.sum(w * fwd(hl.tensor(a), axis).numpy())), x)
    y = fwd(hl.tensor(x), axis)
    got = (hl.ops.log_softmax_grad if log else hl.ops.softmax_grad)(y, hl.tensor(w), axis)
    harness.assert_close(got, want, **FD64)


def test_softmax_bad_inputs():
    x = hl.tensor(np.zeros((2, 3), np.float32))
    with pytest.raises(hl.errors.IndexError, match="axis 2 is out of range"):
        hl.softmax(x, 2)
    with pytest.raises(hl.errors.IndexError, match="axis -3"):
        hl.log_softmax(x, -3)
    with pytest.raises(hl.errors.ShapeError, match="dy .* must have the shape of y"):
        hl.ops.softmax_grad(x, hl.tensor(np.zeros((3, 2), np.float32)), 1)
    with pytest.raises(hl.errors.DTypeError, match="same dtype"):
        hl.ops.softmax_grad(x, hl.tensor(np.zeros((2, 3), np.float64)), 1)
    with pytest.raises(hl.errors.DTypeError):
        hl.softmax(x.astype(hl.float16))
    with pytest.raises(hl.errors.ShapeError, match="output tensor given"):
        hl.softmax(x, out=hl.tensor(np.zeros((3, 2), np.float32)))
    with pytest.raises(hl.errors.ValueError, match="contiguous"):
        hl.softmax(x, out=hl.tensor(np.zeros((3, 2), np.float32)).T)


# ---- cross-entropy ----------------------------------------------------------------------------

def np_ce(logits, target, ignore_index=-100):
    """Per-sample losses: labels (int) or probabilities (float)."""
    lp = np_log_softmax(logits.astype(np.float64), 1)
    if target.dtype.kind in "iu":
        t = np.where(target == ignore_index, 0, target)
        picked = np.take_along_axis(lp, np.expand_dims(t, 1), axis=1)[:, 0]
        return np.where(target == ignore_index, 0.0, -picked).astype(logits.dtype)
    return (-(target * lp).sum(axis=1)).astype(logits.dtype)


CE_SHAPES = [(5, 7), (4, 3, 6), (2, 4, 3, 70), (1, 1), (3, 2, 1, 1), (0, 4), (2, 3, 0)]


@pytest.mark.parametrize("ldtype", [np.int64, np.int32])
@pytest.mark.parametrize("shape", CE_SHAPES)
def test_cross_entropy_labels_forward(rng, shape, ldtype):
    logits = randn(rng, shape)
    sample = (shape[0],) + shape[2:]
    labels = rng.integers(0, shape[1], sample).astype(ldtype)
    if labels.size > 2:
        labels.flat[1] = -100
    want = np_ce(logits, labels)
    harness.check_op(lambda t: hl.softmax_cross_entropy(t, hl.tensor(labels), reduction="none"),
                     lambda a: want, [logits], **F32)
    loss, lp = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(labels), reduction="none",
                                        return_log_prob=True)
    harness.assert_close(lp, np_log_softmax(logits, 1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape", CE_SHAPES[:4])
def test_cross_entropy_soft_forward(rng, shape):
    logits = randn(rng, shape)
    soft = np_softmax(randn(rng, shape), 1)
    harness.check_op(lambda t, p: hl.softmax_cross_entropy(t, p, reduction="none"),
                     lambda a, p: np_ce(a, p), [logits, soft], **F32)
    onehot = np.eye(shape[1], dtype=np.float32)[rng.integers(0, shape[1], (shape[0],) + shape[2:])]
    onehot = np.moveaxis(onehot, -1, 1)
    labels = onehot.argmax(1)
    got = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(onehot), reduction="none")
    harness.assert_close(got, np_ce(logits, labels), **F32)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("kind", ["labels", "soft"])
def test_cross_entropy_vs_torch(rng, reduction, kind):
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    logits = randn(rng, (6, 5, 3))
    if kind == "labels":
        target = rng.integers(0, 5, (6, 3))
        target[0, 0] = target[3, 2] = -100
        tt = torch.tensor(target)
    else:
        target = np_softmax(randn(rng, (6, 5, 3)), 1) * 1.5  # not normalised: exact gradient
        tt = torch.tensor(target)
    tx = torch.tensor(logits, requires_grad=True)
    tl = tf.cross_entropy(tx, tt, reduction=reduction)
    dl = randn(rng, tuple(tl.shape), scale=1.0)
    tl.backward(torch.tensor(dl))
    loss, lp = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(target), reduction=reduction,
                                        return_log_prob=True)
    harness.assert_close(loss, tl.detach().numpy(), **F32)
    dlt = hl.tensor(dl) if reduction == "none" else float(dl)
    g = hl.ops.softmax_cross_entropy_grad(lp, hl.tensor(target), dlt, reduction=reduction)
    harness.assert_close(g, tx.grad.numpy(), **GRAD32)


def test_cross_entropy_single_sample_and_lists():
    torch = pytest.importorskip("torch")
    x = np.array([0.5, -1.0, 2.0, 0.1], np.float32)
    want = torch.nn.functional.cross_entropy(torch.tensor(x), torch.tensor(2)).item()
    got = hl.softmax_cross_entropy(hl.tensor(x), 2)
    assert got.shape == () and abs(got.item() - want) < 1e-5
    loss = hl.softmax_cross_entropy(hl.tensor(x[None]), [2], reduction="sum")
    assert abs(loss.item() - want) < 1e-5


def test_cross_entropy_all_ignored_mean_is_nan_like_torch():
    x = hl.tensor(np.zeros((2, 3), np.float32))
    loss = hl.softmax_cross_entropy(x, hl.tensor(np.array([-100, -100])))
    assert np.isnan(loss.item())
    loss = hl.softmax_cross_entropy(x, hl.tensor(np.array([-100, -100])), reduction="sum")
    assert loss.item() == 0.0
    lp = hl.log_softmax(x, 1)
    g = hl.ops.softmax_cross_entropy_grad(lp, hl.tensor(np.array([-100, -100])),
                                      hl.tensor(np.ones(2, np.float32)))
    assert (g.numpy() == 0).all()


def test_cross_entropy_strided_labels(rng):
    logits = randn(rng, (4, 5, 3))
    labels = rng.integers(0, 5, (4, 3))
    want = np_ce(logits, labels)
    for layout in harness.LAYOUTS.values():
        got = hl.softmax_cross_entropy(layout(logits), layout(labels), reduction="none")
        harness.assert_close(got, want, **F32)


def test_cross_entropy_custom_ignore_index(rng):
    logits = randn(rng, (4, 3))
    labels = np.array([0, 7, 2, 7])
    loss = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(labels), ignore_index=7,
                                    reduction="none")
    harness.assert_close(loss, np_ce(logits, labels, 7), **F32)
    mean = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(labels), ignore_index=7)
    assert abs(mean.item() - np_ce(logits, labels, 7).sum() / 2) < 1e-5


def test_cross_entropy_nan_inf_like_torch():
    torch = pytest.importorskip("torch")
    tf = torch.nn.functional
    inf = np.inf
    x = np.array([[-inf, 0.0, 1.0], [np.nan, 0.0, 1.0], [inf, 0.0, 1.0], [-inf, -inf, -inf]],
                 np.float32)
    for labels in (np.array([0, 1, 1, 2]), np.array([1, 2, 0, 0])):
        want = tf.cross_entropy(torch.tensor(x), torch.tensor(labels), reduction="none").numpy()
        got = hl.softmax_cross_entropy(hl.tensor(x), hl.tensor(labels), reduction="none")
        harness.assert_close(got, want, **F32)
    soft = np.array([[0.0, 0.5, 0.5]] * 4, np.float32)
    want = tf.cross_entropy(torch.tensor(x), torch.tensor(soft), reduction="none").numpy()
    harness.assert_close(hl.softmax_cross_entropy(hl.tensor(x), hl.tensor(soft), reduction="none"),
                         want, **F32)


@pytest.mark.parametrize("kind", ["labels", "soft"])
def test_cross_entropy_grad_finite_differences(rng, kind):
    logits = rng.standard_normal((3, 4, 2))
    if kind == "labels":
        target = np.array([[0, 3], [-100, 1], [2, 2]])
    else:
        target = rng.random((3, 4, 2))
    w = rng.standard_normal((3, 2))

    def f(a):
        loss = hl.softmax_cross_entropy(hl.tensor(a), hl.tensor(target), reduction="none")
        return float(np.sum(w * loss.numpy()))

    want = harness.numeric_grad(f, logits)
    _, lp = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(target), reduction="none",
                                     return_log_prob=True)
    got = hl.ops.softmax_cross_entropy_grad(lp, hl.tensor(target), hl.tensor(w))
    harness.assert_close(got, want, **FD64)


def test_cross_entropy_bad_inputs():
    x = hl.tensor(np.zeros((4, 3), np.float32))
    with pytest.raises(hl.errors.IndexError, match="label 3 .* out of range for 3 classes"):
        hl.softmax_cross_entropy(x, hl.tensor(np.array([0, 1, 3, 2])))
    with pytest.raises(hl.errors.IndexError, match="label -1 "):
        hl.softmax_cross_entropy(x, hl.tensor(np.array([0, -1, 1, 2], np.int32)))
    with pytest.raises(hl.errors.IndexError, match="label 9 "):
        hl.ops.softmax_cross_entropy_grad(x, hl.tensor(np.array([0, 9, 1, 2])),
                                      hl.tensor(np.ones(4, np.float32)))
    with pytest.raises(hl.errors.ShapeError, match=r"must have shape \(4,\)"):
        hl.softmax_cross_entropy(x, hl.tensor(np.array([0, 1, 2])))
    with pytest.raises(hl.errors.ShapeError, match="probability target must have the logits"):
        hl.softmax_cross_entropy(x, hl.tensor(np.zeros((4, 2), np.float32)))
    with pytest.raises(hl.errors.DTypeError, match="int32/int64 class labels or probabilities"):
        hl.softmax_cross_entropy(x, hl.tensor(np.zeros((4, 3), np.float64)))
    with pytest.raises(hl.errors.DTypeError, match="int32/int64 class labels"):
        hl.softmax_cross_entropy(x, hl.tensor(np.zeros(4, np.uint8)))
    with pytest.raises(hl.errors.ShapeError, match="per-sample loss shape"):
        hl.ops.softmax_cross_entropy_grad(x, hl.tensor(np.zeros(4, np.int64)),
                                      hl.tensor(np.ones(3, np.float32)))
    with pytest.raises(hl.errors.ShapeError, match="must be a scalar"):
        hl.ops.softmax_cross_entropy_grad(x, hl.tensor(np.zeros(4, np.int64)),
                                      hl.tensor(np.ones(4, np.float32)), reduction="mean")
    with pytest.raises(hl.errors.ValueError, match="reduction must be"):
        hl.softmax_cross_entropy(x, hl.tensor(np.zeros(4, np.int64)), reduction="avg")
    with pytest.raises(hl.errors.ShapeError, match="classes on axis 1"):
        hl.softmax_cross_entropy(hl.tensor(np.float32(1)).reshape(()),
                                 hl.tensor(np.zeros(1, np.int64)))


# ---- properties: numpy's answer or an hl error, never a crash ------------------------------

FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
small_shapes = st.lists(st.integers(0, 4), min_size=0, max_size=4).map(tuple)


@FAST
@given(shape=small_shapes, axis=st.integers(-6, 6), log=st.booleans(), seed=st.integers(0, 99))
def test_property_softmax_random_axes(shape, axis, log, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    fn = hl.log_softmax if log else hl.softmax
    try:
        got = fn(hl.tensor(x).reshape(shape), axis)
    except hl.errors.HLError:
        ok_axis = -len(shape) <= axis < len(shape) or (shape == () and axis in (0, -1))
        assert not ok_axis, f"valid axis {axis} for {shape} was refused"
        return
    ref_axis = axis if shape else None
    want = x.reshape(shape)
    if shape:
        want = (np_log_softmax if log else np_softmax)(want, ref_axis)
    else:
        want = np.array(0.0 if log else 1.0, np.float32)
    harness.assert_close(got, want, rtol=1e-5, atol=1e-5)


@FAST
@given(n=st.integers(0, 4), c=st.integers(0, 5), d=st.integers(0, 3),
       labels=st.lists(st.integers(-102, 7), min_size=0, max_size=12), seed=st.integers(0, 99))
def test_property_cross_entropy_random_labels(n, c, d, labels, seed):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((n, c, d)).astype(np.float32)
    lab = np.resize(np.array(labels or [0], np.int64), (n, d))
    valid = bool(np.all((lab == -100) | ((lab >= 0) & (lab < c))))
    try:
        loss, lp = hl.softmax_cross_entropy(hl.tensor(logits), hl.tensor(lab), reduction="none",
                                            return_log_prob=True)
        g = hl.ops.softmax_cross_entropy_grad(lp, hl.tensor(lab),
                                          hl.tensor(np.ones((n, d), np.float32)))
    except hl.errors.IndexError:
        assert not valid
        return
    assert valid, f"labels {lab} accepted for {c} classes"
    # With no classes every label must be ignored (-100), so every loss is 0.
    want = np_ce(logits, lab) if c else np.zeros((n, d), np.float32)
    harness.assert_close(loss, want, rtol=1e-5, atol=1e-5)
    assert g.shape == logits.shape
