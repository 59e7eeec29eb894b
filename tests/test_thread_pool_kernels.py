"""The kernels whose OpenMP regions moved onto libcore's thread pool (branch pool2: reductions,
arg-reductions, cumsum, the index family, triangle, pad/tile (remap), resize, topk, random, the
integer matmul, the gemm/conv packings and the Winograd weight transforms): each checked
against numpy, float64 or PyTorch, and bit for bit the same at 1, 2 and 4 threads (4 is more
threads than this host's CPUs: the pool's oversubscribed mode) and from two Python threads.

The sizes are above every kernel's threshold for going parallel, so a second thread really
takes chunks. Tolerances: float32 kernels accumulating in double are compared at rtol 1e-6;
moves, indices and integer products exactly."""
import math

import numpy as np
import pytest

import hl
from hl import ops
from tests.concurrency import run_threads

torch = pytest.importorskip("torch")

THREAD_COUNTS = (1, 2, 4)


@pytest.fixture
def threads():
    before = hl.get_num_threads()
    yield hl.set_num_threads
    hl.set_num_threads(before)


def _rng(seed=0):
    return np.random.default_rng(seed)


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


def kernel_cases():
    """name -> (run: () -> array, want: array, check: (got, want) -> None)."""
    rng = _rng(7)
    T = hl.tensor
    exact = lambda got, want: np.testing.assert_array_equal(got, want)  # noqa: E731

    def close(rtol, atol=0.0):
        return lambda got, want: np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)

    cases = {}
    # reductions: a full sum (sliced rows), few long columns (sliced columns), many outputs
    x = _f32(rng, 1 << 20)
    cases["sum_full"] = (lambda: hl.sum(T(x)).numpy(), x.astype(np.float64).sum(), close(1e-6))
    xc = _f32(rng, 40_000, 7)
    cases["sum_columns_sliced"] = (lambda: hl.sum(T(xc), axis=0).numpy(),
                                   xc.astype(np.float64).sum(0), close(1e-6, 1e-9))
    xm = _f32(rng, 300, 500)
    cases["mean_rows"] = (lambda: hl.mean(T(xm), axis=1).numpy(),
                          xm.astype(np.float64).mean(1), close(1e-6, 1e-9))
    xl = _f32(rng, 3, 100_000) * 5
    m = xl.astype(np.float64).max(1, keepdims=True)
    lse = (m + np.log(np.exp(xl - m).sum(1, keepdims=True)))[:, 0]
    cases["logsumexp_sliced"] = (lambda: hl.logsumexp(T(xl), axis=1).numpy(), lse, close(1e-6))
    cases["max_blocks"] = (lambda: hl.max(T(xc), axis=0).numpy(), xc.max(0), exact)
    # argmax: few outputs of a long axis (sliced, with ties), columns, many rows
    xa = rng.integers(0, 50, (2, 200_000)).astype(np.float32)
    cases["argmax_sliced"] = (lambda: hl.argmax(T(xa), axis=1).numpy(), xa.argmax(1), exact)
    cases["argmin_columns"] = (lambda: hl.argmin(T(xc), axis=0).numpy(), xc.argmin(0), exact)
    cases["argmax_rows"] = (lambda: hl.argmax(T(xm), axis=1).numpy(), xm.argmax(1), exact)
    # cumsum along both axes
    xs = _f32(rng, 64, 2000)
    cases["cumsum_inner"] = (lambda: hl.cumsum(T(xs), axis=1).numpy(),
                             np.cumsum(xs.astype(np.float64), 1), close(1e-5, 1e-5))
    cases["cumsum_outer"] = (lambda: hl.cumsum(T(xs), axis=0).numpy(),
                             np.cumsum(xs.astype(np.float64), 0), close(1e-5, 1e-5))
    # the index family
    xg = _f32(rng, 5000, 24)
    ig = rng.integers(-5000, 5000, 3000)
    cases["gather_rows"] = (lambda: hl.gather(T(xg), T(ig), axis=0).numpy(),
                            np.take(xg, ig, axis=0), exact)
    x1 = _f32(rng, 200_000)
    i1 = rng.integers(0, 200_000, 60_000).astype(np.int32)
    cases["gather_elements_1"] = (lambda: hl.gather(T(x1), T(i1)).numpy(), x1[i1], exact)
    dy = _f32(rng, 3000, 24)
    ig_pos = rng.integers(0, 500, 3000)
    want_dx = np.zeros((500, 24))
    np.add.at(want_dx, ig_pos, dy.astype(np.float64))
    cases["gather_grad"] = (lambda: ops.gather_grad(T(dy), T(ig_pos), 0, (500, 24)).numpy(),
                            want_dx, close(1e-5, 1e-5))
    xe = _f32(rng, 300, 400)
    ie = rng.integers(0, 400, (300, 200))
    cases["gather_elements"] = (lambda: hl.gather_elements(T(xe), T(ie), axis=1).numpy(),
                                np.take_along_axis(xe, ie, 1), exact)
    upd = _f32(rng, 300, 200)
    want_sc = xe.astype(np.float64).copy()
    np.add.at(want_sc, (np.arange(300)[:, None], ie), upd.astype(np.float64))
    cases["scatter_add"] = (
        lambda: hl.scatter_elements(T(xe), T(ie), T(upd), axis=1, reduction="add").numpy(),
        want_sc, close(1e-5, 1e-5))
    oh = rng.integers(0, 100, 4000)
    cases["one_hot"] = (lambda: hl.one_hot(T(oh), 100).numpy(),
                        np.eye(100, dtype=np.float32)[oh], exact)
    xn = np.where(rng.random((300, 1000)) < 0.5, 0, 1).astype(np.float32)
    cases["nonzero"] = (lambda: np.asarray(hl.nonzero(T(xn)).numpy()),
                        np.stack(np.nonzero(xn)), exact)
    xt = _f32(rng, 400, 1000)
    cases["topk"] = (lambda: hl.topk(T(xt), 5)[0].numpy(), -np.sort(-xt, 1)[:, :5], exact)
    # moves: a triangle, pad and tile (remap)
    xtr = _f32(rng, 6, 200, 200)
    cases["tril"] = (lambda: hl.tril(T(xtr), k=3).numpy(), np.tril(xtr, 3), exact)
    xp = _f32(rng, 4, 64, 120)
    cases["pad"] = (lambda: hl.pad(T(xp), (0, 2, 5, 0, 3, 1), value=1.5).numpy(),
                    np.pad(xp, ((0, 0), (2, 3), (5, 1)), constant_values=1.5), exact)
    # resize: bilinear, half-pixel, as PyTorch's interpolate without corner alignment
    xr = _f32(rng, 1, 3, 120, 120)
    want_r = torch.nn.functional.interpolate(torch.from_numpy(xr).double(), size=(250, 250),
                                             mode="bilinear", align_corners=False).numpy()
    cases["resize_linear"] = (lambda: hl.resize(T(xr), size=(1, 3, 250, 250),
                                                mode="linear").numpy(), want_r, close(1e-5, 1e-5))
    # integer products
    ai = rng.integers(-1000, 1000, (300, 200)).astype(np.int64)
    bi = rng.integers(-1000, 1000, (200, 150)).astype(np.int64)
    cases["matmul_int64"] = (lambda: hl.matmul(T(ai), T(bi)).numpy(), ai @ bi, exact)
    # packings, read back through the products that take them (float64 references)
    a = _f32(rng, 3, 2048)
    b = _f32(rng, 2048, 2100)
    cases["gemm_pack_b"] = (
        lambda: hl.matmul_fused(T(a), ops.gemm_pack_b(T(b))).numpy(),
        a.astype(np.float64) @ b.astype(np.float64), close(1e-4, 1e-4))
    xw = _f32(rng, 1, 1024, 6, 6)
    w1 = _f32(rng, 4096, 1024, 1, 1) * 0.03
    want_1x1 = np.einsum("nchw,oc->nohw", xw.astype(np.float64), w1[:, :, 0, 0].astype(np.float64))
    cases["conv_pack_panels"] = (
        lambda: ops.conv_fused_forward(T(xw), T(w1), packed=ops.conv_pack(T(w1))).numpy(),
        want_1x1, close(1e-4, 1e-4))
    x3 = _f32(rng, 1, 256, 16, 16)
    w3 = _f32(rng, 256, 256, 3, 3) * 0.02
    want_3x3 = torch.nn.functional.conv2d(torch.from_numpy(x3).double(),
                                          torch.from_numpy(w3).double(), padding=1).numpy()
    cases["winograd_pack"] = (
        lambda: ops.conv_fused_forward(T(x3), T(w3), padding=1,
                                       packed=ops.conv_pack(T(w3), layout="winograd")).numpy(),
        want_3x3, close(1e-3, 1e-3))
    return cases


def _run_all(cases):
    return {name: np.asarray(run()) for name, (run, _, _) in cases.items()}


def test_moved_kernels_match_their_references_and_each_other_at_1_2_4_threads(threads):
    cases = kernel_cases()
    results = {}
    for n in THREAD_COUNTS:
        threads(n)
        results[n] = _run_all(cases)
    failures = []
    for name, (_, want, check) in cases.items():
        try:
            check(results[1][name], want)
        except AssertionError as e:
            failures.append(f"{name}: {e}")
        for n in THREAD_COUNTS[1:]:
            if not np.array_equal(results[1][name], results[n][name], equal_nan=True):
                failures.append(f"{name}: {n} threads differ from 1")
    assert not failures, "\n".join(failures)


def test_two_python_threads_get_what_one_gets(threads):
    threads(2)
    cases = kernel_cases()
    alone = _run_all(cases)
    both = run_threads(lambda i: _run_all(cases), 2)
    for got in both:
        for name in cases:
            assert np.array_equal(alone[name], got[name], equal_nan=True), name


def test_a_float64_sum_is_accurate_and_independent_of_the_thread_count(threads):
    """The sliced order (fixed slices, each summed pairwise, combined in order) against the
    exactly rounded sum (math.fsum): the error of pairwise summation is bounded by about
    log2(n) eps sum|x|; 1e-14 sum|x| leaves room and fails a plain left-to-right sum of this
    data by orders of magnitude."""
    rng = _rng(3)
    x = rng.standard_normal(1 << 21) * 10.0 ** rng.integers(-6, 7, 1 << 21)
    exact_sum = math.fsum(x)
    bound = 1e-14 * np.abs(x).sum()
    got = {}
    for n in THREAD_COUNTS:
        threads(n)
        got[n] = hl.sum(hl.tensor(x)).item()
    assert abs(got[1] - exact_sum) <= bound, (got[1], exact_sum, bound)
    assert got[1] == got[2] == got[4]
    # the same through the column layout's slices: few outputs, many rows
    xc = x.reshape(-1, 8)
    want = np.array([math.fsum(xc[:, j]) for j in range(8)])
    cols = {}
    for n in THREAD_COUNTS:
        threads(n)
        cols[n] = hl.sum(hl.tensor(xc), axis=0).numpy()
    assert (np.abs(cols[1] - want) <= 1e-14 * np.abs(xc).sum(0)).all()
    assert np.array_equal(cols[1], cols[2]) and np.array_equal(cols[1], cols[4])


def test_random_draws_are_the_same_at_any_thread_count(threads):
    draws = {}
    for n in THREAD_COUNTS:
        threads(n)
        hl.manual_seed(11)
        draws[n] = (hl.rand(1 << 20).numpy(), hl.randn(1 << 19, dtype=hl.float64).numpy())
    u, z = draws[1]
    # uniform [0, 1): mean 1/2, variance 1/12; normal: mean 0, variance 1 (5 sigma bounds)
    assert abs(u.mean() - 0.5) < 5 * math.sqrt(1 / 12 / u.size) and (u >= 0).all() and (u < 1).all()
    assert abs(z.mean()) < 5 / math.sqrt(z.size) and abs(z.var() - 1) < 5 * math.sqrt(2 / z.size)
    for n in THREAD_COUNTS[1:]:
        assert np.array_equal(draws[1][0], draws[n][0]) and np.array_equal(draws[1][1], draws[n][1])


def test_winograd_training_gradients_at_1_and_2_threads(threads):
    """The weight gradient's 4x4 -> 3x3 transform (winograd_weights.c) against PyTorch."""
    rng = _rng(5)
    x, w = _f32(rng, 2, 64, 20, 20), _f32(rng, 64, 64, 3, 3) * 0.05
    tx = torch.from_numpy(x).double().requires_grad_()
    tw = torch.from_numpy(w).double().requires_grad_()
    torch.nn.functional.conv2d(tx, tw, padding=1).sum().backward()
    grads = {}
    for n in (1, 2):
        threads(n)
        hx = hl.Tensor(x, requires_grad=True)
        hw = hl.Tensor(w, requires_grad=True)
        hl.conv2d(hx, hw, padding=1).sum().backward()
        grads[n] = (hx.grad.numpy(), hw.grad.numpy())
    np.testing.assert_allclose(grads[1][1], tw.grad.numpy(), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(grads[1][0], tx.grad.numpy(), rtol=1e-4, atol=1e-4)
    assert np.array_equal(grads[1][1], grads[2][1])


def test_an_oversubscribed_pool_runs_every_item_once(threads):
    """More threads than CPUs (workers sleep at once instead of spinning): every item of a
    loop still runs exactly once on a slot of the loop."""
    from hl import _core
    ffi, lib = _core.ffi, _core.lib
    threads(8)
    for n in (1, 7, 1000, 100_000):
        slots = np.full(n, -7, dtype=np.int32)
        _core.check(lib.hl_pool_probe(n, 1, ffi.cast("int32_t *", slots.ctypes.data), -1, 0,
                                      2_000, 0))
        assert ((slots >= 0) & (slots < 8)).all(), np.unique(slots)
