"""Pooling ops against a direct numpy reference and PyTorch CPU: max pooling (with indices,
dilation, ceil_mode, asymmetric pads), average pooling (count_include_pad both ways,
ceil_mode), their gradients, global pooling, and bad inputs.

Max pooling selects values, so it compares exactly; averages use rtol 1e-6 (float32) and the
gradients rtol 1e-5 / atol 1e-6.
"""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors
from tests.ops.harness import LAYOUTS, assert_close, check_op, numeric_grad


# ---- numpy reference ---------------------------------------------------------------------

def pool_out(i, k, s, pb, pe, d, ceil):
    span = i + pb + pe - (d * (k - 1) + 1)
    if span < 0:
        raise ValueError("window larger than the padded input")
    o = (-(-span // s) if ceil else span // s) + 1
    if ceil and (o - 1) * s >= i + pb:
        o -= 1
    return o


def ref_pool(x, kind, k, s=None, pads=None, d=None, ceil=False, cip=True):
    """(y, indices) by visiting every window; indices are flat within each plane."""
    S = x.ndim - 2
    s = s or k
    d = d or [1] * S
    pads = pads or [0] * (2 * S)
    ins = x.shape[2:]
    outs = [pool_out(ins[a], k[a], s[a], pads[a], pads[S + a], d[a], ceil) for a in range(S)]
    y = np.zeros(x.shape[:2] + tuple(outs), x.dtype)
    idx = np.full(y.shape, -1, np.int64)
    flat = x.reshape(x.shape[:2] + (int(np.prod(ins)),))
    strides = [int(np.prod(ins[a + 1:])) for a in range(S)]
    for o in itertools.product(*[range(n) for n in outs]):
        taps = [[o[a] * s[a] - pads[a] + t * d[a] for t in range(k[a])] for a in range(S)]
        valid = [[p for p in taps[a] if 0 <= p < ins[a]] for a in range(S)]
        where = [sum(p * st_ for p, st_ in zip(c, strides)) for c in itertools.product(*valid)]
        win = flat[:, :, where]
        at = (slice(None), slice(None)) + o
        if kind == "max":
            if win.shape[2]:
                j = win.argmax(axis=2)
                y[at] = np.take_along_axis(win, j[..., None], 2)[..., 0]
                idx[at] = np.asarray(where)[j]
            else:
                y[at] = -np.inf
        else:
            if cip:
                div = np.prod([sum(-pads[a] <= p < ins[a] + pads[S + a] for p in taps[a])
                               for a in range(S)])
            else:
                div = len(where)
            y[at] = win.astype(np.float64).sum(axis=2) / div if div else 0
    return y, idx


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# (x shape, kernel, stride, pads (ONNX order), dilation, ceil_mode)
MAX_CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), (1, 1), False),
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), False),
    ((1, 2, 7, 7), (3, 2), (2, 3), (1, 0, 0, 1), (1, 1), True),      # asymmetric, ceil
    ((2, 2, 9, 8), (3, 3), (1, 2), (1, 1, 1, 1), (2, 2), False),     # dilation
    ((1, 3, 6, 5), (2, 2), (2, 2), (1, 1, 1, 1), (1, 1), True),
    ((2, 3, 5, 5), (5, 5), (1, 1), (0, 0, 0, 0), (1, 1), False),     # global
    ((2, 3, 11), (3,), (2,), (1, 1), (1,), True),
    ((2, 2, 10), (2,), (3,), (0, 1), (2,), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", MAX_CASES)
def test_max_pool(rng, case, dtype):
    xs, k, s, p, d, ceil = case
    x = rand(rng, xs, dtype)
    fn = hl.max_pool2d if len(xs) == 4 else hl.max_pool1d
    check_op(lambda t: fn(t, k, s, p, d, ceil, return_indices=True),
             lambda a: ref_pool(a, "max", k, s, p, d, ceil), [x], rtol=0, atol=0)


@pytest.mark.parametrize("case", [c for c in MAX_CASES if c[3][:len(c[1])] == c[3][len(c[1]):]
                                  and all(2 * pi <= ki for pi, ki in zip(c[3], c[1]))])
def test_max_pool_matches_torch(rng, case):
    torch = pytest.importorskip("torch")
    xs, k, s, p, d, ceil = case
    S = len(xs) - 2
    x = rand(rng, xs, np.float64)
    tf = torch.nn.functional.max_pool2d if S == 2 else torch.nn.functional.max_pool1d
    tx = torch.from_numpy(x).requires_grad_(True)
    ty, ti = tf(tx, k, s, p[:S], d, ceil, return_indices=True)
    dy = rand(rng, tuple(ty.shape), np.float64)
    ty.backward(torch.from_numpy(dy))
    fn = hl.max_pool2d if S == 2 else hl.max_pool1d
    gfn = hl.ops.max_pool2d_grad if S == 2 else hl.ops.max_pool1d_grad
    y, i = fn(hl.tensor(x), k, s, p[:S], d, ceil, return_indices=True)
    assert_close(y, ty.detach().numpy(), rtol=0, atol=0)
    assert_close(i, ti.numpy())
    for layout in LAYOUTS:
        dx = gfn(LAYOUTS[layout](dy), LAYOUTS[layout](i.numpy()), xs, k, s, p[:S], d, ceil)
        assert_close(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12, what=layout)


# (x shape, kernel, stride, pads, ceil_mode)
AVG_CASES = [
    ((2, 3, 8, 8), (2, 2), (2, 2), (0, 0, 0, 0), False),
    ((2, 3, 7, 9), (3, 3), (2, 2), (1, 1, 1, 1), False),
    ((1, 2, 7, 6), (3, 3), (2, 2), (1, 1, 1, 1), True),
    ((2, 2, 6, 7), (2, 3), (1, 2), (1, 0, 0, 1), True),              # asymmetric
    ((1, 2, 5, 5), (4, 4), (3, 3), (2, 2, 2, 2), True),
    ((2, 3, 9), (3,), (2,), (1, 1), True),
    ((2, 3, 9), (4,), (3,), (2, 0), False),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("case", AVG_CASES)
def test_avg_pool(rng, case, cip, dtype):
    xs, k, s, p, ceil = case
    x = rand(rng, xs, dtype)
    fn = hl.avg_pool2d if len(xs) == 4 else hl.avg_pool1d
    check_op(lambda t: fn(t, k, s, p, ceil, cip), lambda a: ref_pool(a, "avg", k, s, p, None,
                                                                    ceil, cip)[0],
             [x], rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("cip", [True, False])
@pytest.mark.parametrize("case", [c for c in AVG_CASES if c[3][:len(c[1])] == c[3][len(c[1]):]])
def test_avg_pool_matches_torch(rng, case, cip):
    torch = pytest.importorskip("torch")
    xs, k, s, p, ceil = case
    S = len(xs) - 2
    x = rand(rng, xs, np.float64)
    tf = torch.nn.functional.avg_pool2d if S == 2 else torch.nn.functional.avg_pool1d
    tx = torch.from_numpy(x).requires_grad_(True)
    ty = tf(tx, k, s, p[:S], ceil, cip)
    dy = rand(rng, tuple(ty.shape), np.float64)
    ty.backward(torch.from_numpy(dy))
    fn = hl.avg_pool2d if S == 2 else hl.avg_pool1d
    gfn = hl.ops.avg_pool2d_grad if S == 2 else hl.ops.avg_pool1d_grad
    assert_close(fn(hl.tensor(x), k, s, p[:S], ceil, cip), ty.detach().numpy(), rtol=1e-12,
                 atol=1e-12)
    for layout in LAYOUTS:
        dx = gfn(LAYOUTS[layout](dy), xs, k, s, p[:S], ceil, cip)
        assert_close(dx, tx.grad.numpy(), rtol=1e-12, atol=1e-12, what=layout)
    dx32 = gfn(hl.tensor(dy.astype(np.float32)), xs, k, s, p[:S], ceil, cip)
    assert_close(dx32, tx.grad.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", [((1, 2, 5, 4), (3, 2), (2, 1), (1, 0, 1, 1), True, True),
                                  ((1, 2, 5, 4), (2, 2), (1, 2), (0, 1, 1, 0), True, False),
                                  ((2, 1, 7), (3,), (2,), (1, 0), False, False)])
def test_pool_grads_finite_differences(rng, case):
    xs, k, s, p, ceil, cip = case
    S = len(xs) - 2
    x = rand(rng, xs, np.float64)
    avg = hl.avg_pool2d if S == 2 else hl.avg_pool1d
    mx = hl.max_pool2d if S == 2 else hl.max_pool1d
    y = avg(hl.tensor(x), k, s, p, ceil, cip).numpy()
    dy = rand(rng, y.shape, np.float64)
    agrad = (hl.ops.avg_pool2d_grad if S == 2 else hl.ops.avg_pool1d_grad)(hl.tensor(dy), xs, k, s, p,
                                                                   ceil, cip)
    assert_close(agrad, numeric_grad(
        lambda v: float((avg(hl.tensor(v), k, s, p, ceil, cip).numpy() * dy).sum()), x),
        rtol=1e-6, atol=1e-7)
    y, i = mx(hl.tensor(x), k, s, p, 1, ceil, return_indices=True)
    mgrad = (hl.ops.max_pool2d_grad if S == 2 else hl.ops.max_pool1d_grad)(hl.tensor(dy), i, xs, k, s, p,
                                                                   1, ceil)
    assert_close(mgrad, numeric_grad(
        lambda v: float((mx(hl.tensor(v), k, s, p, 1, ceil).numpy() * dy).sum()), x),
        rtol=1e-6, atol=1e-7)


def test_max_pool_nan_and_padding_only_windows():
    x = np.array([[[1.0, np.nan, 3.0, 2.0]]], np.float32)
    y, i = hl.max_pool1d(hl.tensor(x), 2, return_indices=True)
    assert np.isnan(y.numpy()[0, 0, 0]) and y.numpy()[0, 0, 1] == 3
    assert i.numpy().tolist() == [[[1, 2]]]
    # dilation 2 over a 1-element input padded by 1: the window sees padding only
    y, i = hl.max_pool1d(hl.tensor(np.ones((1, 1, 1), np.float32)), 2, 1, 1, 2,
                         return_indices=True)
    assert y.numpy().tolist() == [[[-np.inf]]] and i.numpy().tolist() == [[[-1]]]
    dx = hl.ops.max_pool1d_grad(hl.tensor(np.ones((1, 1, 1), np.float32)), i, (1, 1, 1), 2, 1, 1, 2)
    assert dx.numpy().tolist() == [[[0.0]]]


def test_global_pools(rng):
    x = rand(rng, (2, 3, 5, 4))
    assert_close(hl.global_avg_pool2d(hl.tensor(x)), x.mean(axis=(2, 3), keepdims=True),
                 rtol=1e-6, atol=1e-6)
    assert_close(hl.global_max_pool2d(hl.tensor(x)), x.max(axis=(2, 3), keepdims=True), rtol=0,
                 atol=0)
    assert_close(hl.global_avg_pool2d(LAYOUTS["transposed"](x)),
                 x.mean(axis=(2, 3), keepdims=True), rtol=1e-6, atol=1e-6)


def test_pool_size_zero():
    x = hl.tensor(np.zeros((0, 3, 4, 4), np.float32))
    y, i = hl.max_pool2d(x, 2, return_indices=True)
    assert y.shape == (0, 3, 2, 2) and i.shape == (0, 3, 2, 2) and i.dtype == hl.int64
    assert hl.avg_pool2d(hl.tensor(np.zeros((2, 0, 4, 4), np.float32)), 2).shape == (2, 0, 2, 2)


# ---- bad inputs ----------------------------------------------------------------------------

def _t(shape, dtype=np.float32):
    return hl.tensor(np.ones(shape, dtype))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), 4), errors.ShapeError, "window spans 4"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), 2, dilation=3), errors.ShapeError,
     "window spans 4"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), 0), errors.ValueError, "kernel size must be"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), 2, stride=0), errors.ValueError,
     "stride must be positive"),
    (lambda: hl.avg_pool2d(_t((1, 1, 3, 3)), 2, padding=-1), errors.ValueError,
     "pads must be non-negative"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), 2, dilation=0), errors.ValueError, "dilation"),
    (lambda: hl.max_pool2d(_t((1, 3, 3)), 2), errors.ShapeError, "4-D input"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3), np.int64), 2), errors.DTypeError,
     "float32 or float64"),
    (lambda: hl.max_pool2d(_t((1, 1, 3, 3)), (2, 2, 2)), errors.ValueError, "kernel_size"),
    (lambda: hl.ops.avg_pool2d_grad(_t((1, 1, 2, 2)), (1, 1, 6, 6), 2), errors.ShapeError,
     "gives spatial size \\(3, 3\\)"),
    (lambda: hl.ops.avg_pool2d_grad(_t((1, 1, 2, 2)), (1, 2, 4, 4), 2), errors.ShapeError,
     "differ in batch or channels"),
    (lambda: hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), _t((1, 1, 2, 2), np.int64) * 99,
                                (1, 1, 4, 4), 2), errors.IndexError,
     "index 99 is out of range .* 16 elements"),
    (lambda: hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), _t((1, 1, 2, 2), np.int32) * -5,
                                (1, 1, 4, 4), 2), errors.IndexError, "index -5"),
    (lambda: hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), _t((1, 1, 2, 2), np.float32),
                                (1, 1, 4, 4), 2), errors.DTypeError, "int64 or int32"),
    (lambda: hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), _t((1, 1, 2, 1), np.int64),
                                (1, 1, 4, 4), 2), errors.ShapeError, "one shape"),
    (lambda: hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), None, (1, 1, 4, 4), 2), errors.ValueError,
     "needs the indices"),
])
def test_pool_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("itype", [np.int64, np.int32])
def test_max_pool_grad_checks_every_block_of_many_indices(rng, threads, itype):
    # 8 x 64 x 16 x 16 indices: the range check runs in blocks on the thread pool; a bad index
    # in any block is found, the least bad one is named whatever the thread count, and valid
    # indices scatter as numpy does
    shape, plane = (8, 64, 16, 16), 32 * 32
    idx = rng.integers(0, plane, size=shape).astype(itype)
    dy = rng.standard_normal(shape).astype(np.float32)
    before = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        dx = hl.ops.max_pool2d_grad(hl.tensor(dy), hl.tensor(idx), (8, 64, 32, 32), 2).numpy()
        want = np.zeros((8 * 64, plane), np.float32)
        for p in range(8 * 64):
            np.add.at(want[p], idx.reshape(8 * 64, -1)[p], dy.reshape(8 * 64, -1)[p])
        np.testing.assert_allclose(dx.reshape(8 * 64, -1), want, rtol=1e-6, atol=1e-6)
        for bad, at, named in ((plane, -1, plane), (-7, 40000, -7), (plane + 3, 70000, plane + 3)):
            wrong = idx.copy()
            wrong.reshape(-1)[at] = bad
            wrong.reshape(-1)[-5] = plane   # a too-large one too: the one below -1 is named first
            with pytest.raises(errors.IndexError, match=f"index {named} is out of range"):
                hl.ops.max_pool2d_grad(hl.tensor(dy), hl.tensor(wrong), (8, 64, 32, 32), 2)
    finally:
        hl.set_num_threads(before)


# ---- properties ------------------------------------------------------------------------------

@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S=st.sampled_from([1, 2]), kind=st.sampled_from(["max", "avg"]), n=st.integers(0, 2),
       c=st.integers(0, 2), size=st.integers(1, 7), k=st.integers(1, 4), s=st.integers(1, 3),
       p=st.integers(0, 2), pe=st.integers(0, 2), d=st.integers(1, 2), ceil=st.booleans(),
       cip=st.booleans(), broken=st.sampled_from([None] * 6 + ["k", "s", "p", "d", "size"]),
       bad=st.integers(-2, 0), data=st.data())
def test_pool_property_matches_reference_or_raises(S, kind, n, c, size, k, s, p, pe, d, ceil,
                                                   cip, broken, bad, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    if broken == "size":
        size = 0
    elif broken is not None:
        locals_ = {"k": k, "s": s, "p": p, "d": d}
        locals_[broken] = bad
        k, s, p, d = locals_["k"], locals_["s"], locals_["p"], locals_["d"]
    if kind == "avg":
        d = 1
    x = rand(rng, (n, c) + (size,) * S)
    pads = [p] * S + [pe] * S
    try:
        want = ref_pool(x, kind, [k] * S, [s] * S, pads, [d] * S, ceil, cip) \
            if min(k, s, d) >= 1 and p >= 0 else None
    except ValueError:
        want = None
    fn = {("max", 1): hl.max_pool1d, ("max", 2): hl.max_pool2d,
          ("avg", 1): hl.avg_pool1d, ("avg", 2): hl.avg_pool2d}[kind, S]
    args = (k, s, pads, d, ceil, True) if kind == "max" else (k, s, pads, ceil, cip)
    try:
        got = fn(hl.tensor(x), *args)
    except errors.HLError:
        assert want is None
        return
    assert want is not None
    if kind == "max":
        assert_close(got[0], want[0], rtol=0, atol=0)
        assert_close(got[1], want[1])
    else:
        assert_close(got, want[0], rtol=1e-5, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(bad=st.integers(-(2**40), 2**40))
def test_max_pool_grad_property_any_index(bad):
    idx = np.zeros((1, 1, 2, 2), np.int64)
    idx[0, 0, 1, 0] = bad
    try:
        dx = hl.ops.max_pool2d_grad(_t((1, 1, 2, 2)), hl.tensor(idx), (1, 1, 4, 4), 2)
    except errors.IndexError:
        assert not -1 <= bad < 16
        return
    assert -1 <= bad < 16
    assert dx.numpy().sum() == (4 if bad >= 0 else 3)


def _np_max_pool_with_indices(x, k, s):
    """Windows inside the input: the first tap starts, a later tap wins when greater or NaN."""
    n, c, h, w = x.shape
    oh, ow = (h - k[0]) // s[0] + 1, (w - k[1]) // s[1] + 1
    y = np.empty((n, c, oh, ow), x.dtype)
    idx = np.empty((n, c, oh, ow), np.int64)
    for a, b, i, j in np.ndindex(n, c, oh, ow):
        best, at = None, -1
        for ty in range(k[0]):
            for tx in range(k[1]):
                r, q = i * s[0] + ty, j * s[1] + tx
                v = x[a, b, r, q]
                if at < 0 or v > best or np.isnan(v):
                    best, at = v, r * w + q
        y[a, b, i, j], idx[a, b, i, j] = best, at
    return y, idx


@pytest.mark.parametrize("k,s,hw", [((2, 2), (2, 2), (6, 7)), ((3, 3), (2, 2), (7, 8)),
                                    ((2, 3), (1, 2), (5, 6))])
def test_max_pool_windows_inside_the_input_with_ties_and_nans(rng, k, s, hw):
    # the kernel's fast path for windows that never touch padding: same values and indices
    x = rng.integers(0, 3, size=(2, 3, *hw)).astype(np.float32)   # many ties
    x[0, 1, 1, 1] = x[1, 2, 2, 3] = x[1, 2, 3, 3] = np.nan
    y, i = hl.max_pool2d(hl.tensor(x), k, s, return_indices=True)
    want_y, want_i = _np_max_pool_with_indices(x, k, s)
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(i.numpy(), want_i)


@pytest.mark.parametrize("k,s,p,d,ceil", [((3, 3), (2, 2), (1, 1), (1, 1), False),
                                          ((3, 2), (1, 2), (1, 0), (2, 1), True),
                                          ((2, 2), (3, 3), (1, 1), (1, 1), True),
                                          ((3, 3), (1, 1), (0, 0), (1, 1), False)])
def test_max_pool_without_indices_equals_the_indexed_kernel(rng, k, s, p, d, ceil):
    # inference asks for no indices and takes the tap-by-tap loop; it must give the values
    # of the indexed loop (NaN wins, padding-only windows -inf, dilation, ceil_mode)
    x = rng.normal(size=(2, 3, 9, 8)).astype(np.float32)
    x[0, 1, 2, 2] = x[1, 2, 4, 5] = np.nan
    with hl.no_grad():
        plain = hl.max_pool2d(hl.tensor(x), k, s, p, d, ceil_mode=ceil)
    indexed, _ = hl.max_pool2d(hl.tensor(x), k, s, p, d, ceil_mode=ceil, return_indices=True)
    np.testing.assert_array_equal(plain.numpy(), indexed.numpy())  # both kinds of NaN agree
