"""Max pooling's fast paths: the 2x2 / stride-2 kernels (libcore/src/cpu/pool_2x2_impl.h) and
the general row sweep (pool_impl.h's row_window_max), each for the forward with indices and
the indexless gradient a recomputing plan runs (HL_POOL_GRAD_FROM_INPUT), the 2x2 one for the
forward without indices too. They must pick the tap the general loops pick (the first tap
starts, a later one wins when greater or NaN: the last NaN, else the first of equal maxima),
so each is compared bit for bit with a direct numpy loop of that rule, with the indexed
gradient (the plan replayed with PLAN_NO_RECOMPUTE), with eager ops and with PyTorch's
max_pool2d and its autograd, on ties, NaN, +-inf, -0, odd sizes (rows and columns no window
covers), rows long enough for the vector loop and its remainder, float32 and float64, one
thread and two; the general sweep also with padding, dilation, ceil_mode and rows longer
than its tile of 256 windows."""
import numpy as np
import pytest

import hl
from hl import _core, ops
from tests.ops.test_pool import _np_max_pool_with_indices
from tests.plan.replaying import replay

# (h, w): even; odd (a row and a column no window covers); one window; rows of 17 and 40
# windows (AVX2's 8-wide body plus a remainder, AVX-512's 16); a tall odd one
SIZES = [(8, 8), (7, 9), (2, 2), (6, 35), (4, 80), (13, 5)]


def _bits(a):
    """The array's bits, so that -0 differs from +0 and NaNs compare by payload."""
    a = np.ascontiguousarray(a)
    return a.view(np.uint32 if a.dtype == np.float32 else np.uint64)


def _hostile(rng, shape, dtype):
    """Many ties (values 0..2), NaNs (two in one window somewhere), +-inf, windows of -inf
    alone, and -0 beside +0."""
    x = rng.integers(0, 3, size=shape).astype(dtype)
    flat = x.reshape(-1)
    picks = rng.choice(flat.size, size=max(4, flat.size // 12), replace=False)
    q = len(picks) // 4
    flat[picks[:q]] = np.nan
    flat[picks[q:2 * q]] = np.inf
    flat[picks[2 * q:3 * q]] = -np.inf
    flat[picks[3 * q:]] = -0.0
    x[0, 0, 0:2, 0:2] = -np.inf          # a window of -inf alone: its first tap wins
    if shape[2] >= 2 and shape[3] >= 4:
        x[-1, -1, 0, 2] = x[-1, -1, 1, 3] = np.nan    # two NaNs in one window: the last wins
        x[0, 0, 0, 2:4] = 0.0
        x[0, 0, 1, 2:4] = -0.0           # ties of +0 and -0: the first tap, +0
    return x


def _np_grad(x, dy):
    """max_pool_grad through the reference's indices: 0 + dy added in output order."""
    _, idx = _np_max_pool_with_indices(x, (2, 2), (2, 2))
    n, c, h, w = x.shape
    dx = np.zeros((n, c, h * w), x.dtype)
    for a, b in np.ndindex(n, c):
        for o, i in enumerate(idx[a, b].reshape(-1)):
            dx[a, b, i] += dy[a, b].reshape(-1)[o]
    return dx.reshape(x.shape)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw", SIZES)
def test_forward_values_and_indices_match_the_reference_bit_for_bit(rng, dtype, hw):
    x = _hostile(rng, (2, 3, *hw), dtype)
    want_y, want_i = _np_max_pool_with_indices(x, (2, 2), (2, 2))
    y, i = hl.max_pool2d(hl.tensor(x), 2, 2, return_indices=True)
    with hl.no_grad():
        plain = hl.max_pool2d(hl.tensor(x), 2, 2)
    np.testing.assert_array_equal(_bits(y.numpy()), _bits(want_y))
    np.testing.assert_array_equal(i.numpy(), want_i)
    np.testing.assert_array_equal(_bits(plain.numpy()), _bits(want_y))


def _grad_step(x, dy, kernel=2, **kw):
    """max_pool's forward with indices and its gradient, the pooled input an intermediate
    (so a plan may drop the indices and find the maxima again in it)."""
    kw = kw or {"stride": 2}

    def f():
        r = x * 1.0
        y, idx = ops.max_pool2d_forward(r, kernel, return_indices=True, **kw)
        dx = ops.max_pool2d_grad(dy * 1.0, idx, r.shape, kernel, **kw)
        return y, dx, r * 1.0   # r read after the gradient: it stays alive across it
    return f


def _replayed_grads(xn, dyn, threads, kernel=2, **kw):
    before = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        f = _grad_step(hl.tensor(xn), hl.tensor(dyn), kernel, **kw)
        plan, (y, dx, _) = replay(f)
        assert _core.plan_stats(plan)["recomputed"] == 1   # the indexless gradient ran
        _, (_, idx_dx, _) = replay(f, _core.PLAN_NO_RECOMPUTE)
        _, eager_dx, _ = f()
        return y.numpy(), dx.numpy(), idx_dx.numpy(), eager_dx.numpy()
    finally:
        hl.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw", SIZES)
def test_indexless_gradient_equals_the_indexed_one_bit_for_bit(rng, dtype, hw, threads):
    xn = _hostile(rng, (4, 5, *hw), dtype)
    dyn = rng.standard_normal((4, 5, hw[0] // 2, hw[1] // 2)).astype(dtype)
    dyn.reshape(-1)[::7] = -0.0          # 0 + (-0) is +0 in both gradients
    dyn.reshape(-1)[3::11] = np.inf
    y, dx, idx_dx, eager_dx = _replayed_grads(xn, dyn, threads)
    np.testing.assert_array_equal(_bits(dx), _bits(idx_dx))
    np.testing.assert_array_equal(_bits(dx), _bits(eager_dx))
    np.testing.assert_array_equal(_bits(dx), _bits(_np_grad(xn, dyn)))
    np.testing.assert_array_equal(_bits(y), _bits(_np_max_pool_with_indices(xn, (2, 2),
                                                                             (2, 2))[0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hw", [(24, 24), (8, 8), (7, 9), (6, 35)])
def test_indexless_gradient_matches_pytorch_autograd(rng, dtype, hw):
    torch = pytest.importorskip("torch")
    xn = rng.standard_normal((3, 4, *hw)).astype(dtype)
    xn.reshape(-1)[::9] = 1.0            # ties: the first tap of equal maxima
    xn.reshape(-1)[5::31] = -np.inf
    dyn = rng.standard_normal((3, 4, hw[0] // 2, hw[1] // 2)).astype(dtype)
    y, dx, _, _ = _replayed_grads(xn, dyn, 1)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 2, 2)
    ty.backward(torch.tensor(dyn))
    np.testing.assert_array_equal(y, ty.detach().numpy())
    # windows do not overlap, so each input gets at most one dy: exact
    np.testing.assert_array_equal(dx, tx.grad.numpy())


def test_nan_windows_match_pytorch(rng):
    torch = pytest.importorskip("torch")
    xn = rng.standard_normal((2, 3, 6, 10)).astype(np.float32)
    xn[0, 0, 0, 1] = xn[1, 2, 3, 4] = xn[1, 2, 2, 5] = np.nan   # the last two share a window
    dyn = rng.standard_normal((2, 3, 3, 5)).astype(np.float32)
    y, dx, _, _ = _replayed_grads(xn, dyn, 1)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch.nn.functional.max_pool2d(tx, 2, 2)
    ty.backward(torch.tensor(dyn))
    np.testing.assert_array_equal(y, ty.detach().numpy())        # NaN where torch has NaN
    np.testing.assert_array_equal(dx, tx.grad.numpy())           # the same NaN tap gets dy


# ---- the general row sweep ---------------------------------------------------------------

def _np_max_pool_general(x, k, s, p, d, oh, ow):
    """The general loops' rule with padding and dilation: taps inside the input in row-major
    order, the first starts, a later one wins when greater or NaN; -inf and -1 for none."""
    n, c, h, w = x.shape
    y = np.full((n, c, oh, ow), -np.inf, x.dtype)
    idx = np.full((n, c, oh, ow), -1, np.int64)
    for a, b, i, j in np.ndindex(n, c, oh, ow):
        for ty in range(k):
            for tx in range(k):
                r, q = i * s - p + ty * d, j * s - p + tx * d
                if 0 <= r < h and 0 <= q < w:
                    v = x[a, b, r, q]
                    if idx[a, b, i, j] < 0 or v > y[a, b, i, j] or np.isnan(v):
                        y[a, b, i, j], idx[a, b, i, j] = v, r * w + q
    return y, idx


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("k,s,p,d,ceil,hw", [
    (3, 2, 1, 1, False, (9, 11)),      # ResNet's stem pool
    (3, 1, 1, 1, False, (3, 300)),     # rows of 300 windows: two tiles of the sweep
    (3, 2, 1, 2, True, (8, 9)),        # dilation, ceil_mode: windows hanging past the edge
    (2, 2, 1, 1, False, (5, 6)),       # 2x2 stride 2 reaching padding: not the 2x2 kernel
    (2, 2, 0, 1, True, (5, 7)),        # 2x2 stride 2, ceil_mode's partial last windows
    (2, 1, 1, 2, False, (1, 6))])      # one row padded by 1, dilation 2: windows of padding only
def test_general_sweep_matches_the_reference_bit_for_bit(rng, threads, dtype, k, s, p, d, ceil,
                                                         hw):
    xn = _hostile(rng, (2, 3, *hw), dtype)
    kw = dict(stride=s, padding=p, dilation=d, ceil_mode=ceil)
    y, i = hl.max_pool2d(hl.tensor(xn), k, s, p, d, ceil_mode=ceil, return_indices=True)
    oh, ow = y.shape[2:]
    want_y, want_i = _np_max_pool_general(xn, k, s, p, d, oh, ow)
    np.testing.assert_array_equal(_bits(y.numpy()), _bits(want_y))
    np.testing.assert_array_equal(i.numpy(), want_i)
    dyn = rng.standard_normal((2, 3, oh, ow)).astype(dtype)
    dyn.reshape(-1)[::5] = -0.0
    ry, dx, idx_dx, eager_dx = _replayed_grads(xn, dyn, threads, k, **kw)
    np.testing.assert_array_equal(_bits(ry), _bits(want_y))
    np.testing.assert_array_equal(_bits(dx), _bits(idx_dx))
    np.testing.assert_array_equal(_bits(dx), _bits(eager_dx))
    want_dx = np.zeros((2, 3, hw[0] * hw[1]), dtype)
    for a, b in np.ndindex(2, 3):    # 0 + dy added in output order, as max_pool_grad does
        for o, at in enumerate(want_i[a, b].reshape(-1)):
            if at >= 0:
                want_dx[a, b, at] += dyn[a, b].reshape(-1)[o]
    np.testing.assert_array_equal(_bits(dx), _bits(want_dx.reshape(xn.shape)))
