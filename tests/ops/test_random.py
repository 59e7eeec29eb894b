"""Counter-based random numbers (Philox 4x32-10): the published known-answer vector, agreement
with a Python model of the generator and of each distribution's construction, reproducibility
(same seed and offset, same numbers; whatever the thread count), the counters a draw
consumes, statistics with stated bounds, value ranges, dtypes and bad arguments.

Statistical bounds (fixed seeds, so the checks are deterministic): with n samples, means
within 5 standard errors; the Kolmogorov-Smirnov statistic below 1.63 / sqrt(n), the 1%
critical value."""
import math

import numpy as np
import pytest

import hl
from hl import _core, errors
from hl.ops.random import Generator, counters_for

M32 = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    """Philox 4x32-10 as published (Salmon et al. 2011): a model to check the C kernel."""
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for r in range(10):
        if r:
            k0, k1 = (k0 + 0x9E3779B9) & M32, (k1 + 0xBB67AE85) & M32
        p0, p1 = 0xD2511F53 * c0, 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0, p1 & M32, (p0 >> 32) ^ c3 ^ k1, p0 & M32)
    return c0, c1, c2, c3


def model_words(seed, offset, nblocks):
    out = []
    for b in range(nblocks):
        ctr = offset + b
        out.extend(philox4x32_10((ctr & M32, (ctr >> 32) & M32, ctr >> 64, 0),
                                 (seed & M32, seed >> 32)))
    return out


def draw(kind, n, dtype, seed, offset, a, b=None):
    t = hl.empty(n, dtype=dtype)
    _core.call("random_" + kind, t._h, seed, offset, float(a), *([] if b is None else [b]))
    return t.numpy()


def test_known_answer_vector():
    """Random123's vector for counter 0, key 0: 6627e8d5 e169c58d bc57ac4c 9b00dbd8."""
    want = [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == tuple(want)
    u = draw("uniform", 4, hl.float32, 0, 0, 0.0, 1.0)
    assert [int(v * 2**24) for v in u] == [w >> 8 for w in want]
    u = draw("uniform", 2, hl.float64, 0, 0, 0.0, 1.0)
    assert int(u[0] * 2**53) == (want[0] << 21) | (want[1] >> 11)
    # the second published vector (all ones) agrees with the model too
    assert philox4x32_10((M32,) * 4, (M32, M32)) == (0x408F276D, 0x41C83B0E, 0xA20BC7C6,
                                                      0x6D5451FD)


@pytest.mark.parametrize("seed,offset", [(1, 0), (2**40 + 17, 5), (2**64 - 1, 2**33 + 1),
                                         (123, 2**64 - 2)])  # the last crosses 2**64
def test_matches_the_model(seed, offset):
    n = 11
    w = np.array(model_words(seed, offset, 6), dtype=np.uint64)
    u32 = draw("uniform", n, hl.float32, seed, offset, 0.0, 1.0)
    np.testing.assert_array_equal(u32, (w[:n] >> 8).astype(np.float64) * 2.0**-24)
    u64 = draw("uniform", n, hl.float64, seed, offset, 0.0, 1.0)
    bits = (w[0:2 * n:2] << np.uint64(21)) | (w[1:2 * n:2] >> np.uint64(11))
    np.testing.assert_array_equal(u64, bits.astype(np.float64) * 2.0**-53)
    bern = draw("bernoulli", n, hl.float32, seed, offset, 0.37)
    np.testing.assert_array_equal(bern, (w[:n].astype(np.float64) * 2.0**-32 < 0.37))
    # Box-Muller: u1 in (0, 1] from one word (two for float64), angle from the next
    z32 = draw("normal", n, hl.float32, seed, offset, 0.5, 2.0)
    u1 = ((w[0::2] >> 8) + 1).astype(np.float64) * 2.0**-24
    u2 = (w[1::2] >> 8).astype(np.float64) * 2.0**-24
    r = np.sqrt(-2 * np.log(u1))
    z = np.stack([r * np.cos(2 * np.pi * u2), r * np.sin(2 * np.pi * u2)], 1).ravel()
    np.testing.assert_allclose(z32, (0.5 + 2.0 * z[:n]).astype(np.float32), rtol=1e-6, atol=1e-6)


def test_same_seed_same_numbers_and_offsets_differ():
    a = draw("normal", 1000, hl.float32, 42, 0, 0.0, 1.0)
    b = draw("normal", 1000, hl.float32, 42, 0, 0.0, 1.0)
    np.testing.assert_array_equal(a, b)
    c = draw("normal", 1000, hl.float32, 42, 250, 0.0, 1.0)
    d = draw("normal", 1000, hl.float32, 43, 0, 0.0, 1.0)
    assert not np.any(a[:4] == c[:4]) and np.mean(a == d) < 0.01
    # an offset of k counters shifts the stream by k blocks
    np.testing.assert_array_equal(c[:1000 - 4 * 250], a[4 * 250:])
    e = draw("uniform", 100, hl.float64, 42, 10, 0.0, 1.0)
    f = draw("uniform", 200, hl.float64, 42, 0, 0.0, 1.0)
    np.testing.assert_array_equal(e[:80], f[20:100])
    g1, g2 = hl.random.Generator(7), hl.random.Generator(7)
    np.testing.assert_array_equal(hl.random.rand(50, generator=g1).numpy(),
                                  hl.random.rand(50, generator=g2).numpy())
    hl.manual_seed(3)
    x = hl.rand(20).numpy()
    hl.manual_seed(3)
    np.testing.assert_array_equal(hl.rand(20).numpy(), x)


@pytest.mark.parametrize("kind,dtype", [("uniform", hl.float32), ("uniform", hl.float64),
                                        ("normal", hl.float32), ("normal", hl.float64),
                                        ("bernoulli", hl.float32), ("bernoulli", hl.float64)])
def test_draws_consume_the_documented_counters(kind, dtype):
    fn = {"uniform": hl.random.uniform, "normal": hl.random.normal,
          "bernoulli": hl.random.bernoulli}[kind]
    per = 2 if kind != "bernoulli" and dtype is hl.float64 else 4
    g = Generator(99)
    first = fn(5, dtype=dtype, generator=g).numpy()
    assert g.offset == counters_for(kind, dtype, 5) == -(-5 // per)
    second = fn(7, dtype=dtype, generator=g).numpy()
    assert g.offset == -(-5 // per) + -(-7 // per)
    whole = fn(40, dtype=dtype, generator=Generator(99)).numpy()
    start = -(-5 // per) * per  # the second draw starts at the next whole counter
    np.testing.assert_array_equal(first, whole[:5])
    np.testing.assert_array_equal(second, whole[start:start + 7])
    state = g.get_state()
    a = fn(9, dtype=dtype, generator=g).numpy()
    g.set_state(state)
    np.testing.assert_array_equal(fn(9, dtype=dtype, generator=g).numpy(), a)


def test_same_numbers_for_any_thread_count():
    n = 300_001  # enough blocks for the parallel loop, and a partial last block
    before = hl.get_num_threads()
    runs = []
    try:
        for threads in (1, 2, 3):
            hl.set_num_threads(threads)
            runs.append([draw("uniform", n, hl.float32, 5, 3, -1.0, 1.0),
                         draw("uniform", n, hl.float64, 5, 3, -1.0, 1.0),
                         draw("normal", n, hl.float32, 5, 3, 0.0, 1.0),
                         draw("normal", n, hl.float64, 5, 3, 0.0, 1.0),
                         draw("bernoulli", n, hl.uint8, 5, 3, 0.5)])
    finally:
        hl.set_num_threads(before)
    for other in runs[1:]:
        for a, b in zip(runs[0], other):
            np.testing.assert_array_equal(a, b)


def _ks(sample, cdf):
    x = np.sort(sample.astype(np.float64))
    f = cdf(x)
    n = len(x)
    i = np.arange(1, n + 1)
    return max(np.max(i / n - f), np.max(f - (i - 1) / n))


N = 200_000
KS_BOUND = 1.63 / math.sqrt(N)


@pytest.mark.parametrize("dtype", [hl.float32, hl.float64])
def test_uniform_statistics_and_range(dtype):
    u = hl.random.uniform(N, low=-2.0, high=3.0, dtype=dtype, generator=Generator(11)).numpy()
    assert u.min() >= -2.0 and u.max() < 3.0
    w = (u + 2.0) / 5.0
    assert abs(w.mean() - 0.5) < 5 * math.sqrt(1 / 12 / N)
    assert abs(w.var() - 1 / 12) < 1e-3  # sd of the sample variance is 1.7e-4
    assert _ks(w, lambda x: np.clip(x, 0, 1)) < KS_BOUND


def test_uniform_never_reaches_high():
    # [1, 2) in float32: 1 + (1 - 2**-24) rounds to 2 unless the kernel steps back
    u = draw("uniform", 1 << 20, hl.float32, 0, 0, 1.0, 2.0)
    assert u.min() >= 1.0 and u.max() < 2.0
    u = draw("uniform", 10000, hl.float32, 1, 0, -3.0, -2.9999)
    assert u.min() >= np.float32(-3.0) and u.max() < np.float32(-2.9999)
    u = draw("uniform", 1000, hl.float64, 1, 0, -1e308, 1e308)  # the range overflows a double
    assert np.isfinite(u).all() and u.max() < 1e308
    assert (draw("uniform", 10, hl.float32, 1, 0, 0.25, 0.25) == 0.25).all()


@pytest.mark.parametrize("dtype", [hl.float32, hl.float64])
def test_normal_statistics(dtype):
    z = hl.random.normal(N, mean=1.0, std=2.0, dtype=dtype, generator=Generator(12)).numpy()
    z = (z.astype(np.float64) - 1.0) / 2.0
    assert np.isfinite(z).all()
    assert abs(z.mean()) < 5 / math.sqrt(N)
    assert abs(z.std() - 1) < 5 / math.sqrt(2 * N)
    cdf = np.vectorize(lambda v: 0.5 * (1 + math.erf(v / math.sqrt(2))))
    assert _ks(z, cdf) < KS_BOUND
    assert (draw("normal", 10, dtype, 1, 0, 4.0, 0.0) == 4.0).all()


@pytest.mark.parametrize("p", [0.0, 0.1, 0.5, 0.9, 1.0])
def test_bernoulli_frequency(p):
    b = hl.random.bernoulli(N, p=p, dtype=hl.float32, generator=Generator(13)).numpy()
    assert set(np.unique(b)) <= {0.0, 1.0}
    assert abs(b.mean() - p) <= 5 * math.sqrt(p * (1 - p) / N)


@pytest.mark.parametrize("dtype", [hl.float32, hl.float64, hl.int32, hl.int64, hl.uint8,
                                   hl.bool_, hl.float16])
def test_bernoulli_any_dtype(dtype):
    b = hl.random.bernoulli(1000, p=0.5, dtype=dtype, generator=Generator(1)).numpy()
    ref = hl.random.bernoulli(1000, p=0.5, dtype=hl.float64, generator=Generator(1)).numpy()
    assert b.dtype == dtype.np
    np.testing.assert_array_equal(b.astype(np.float64), ref)


def test_random_bad_arguments():
    t = hl.empty(4, 4)
    with pytest.raises(errors.ValueError, match="must be contiguous"):
        _core.call("random_uniform", t[:, ::2]._h, 0, 0, 0.0, 1.0)
    with pytest.raises(errors.ValueError, match="must be contiguous"):
        _core.call("random_bernoulli", t.T._h, 0, 0, 0.5)
    with pytest.raises(errors.DTypeError, match="float32 or float64"):
        _core.call("random_normal", hl.empty(3, dtype=hl.int32)._h, 0, 0, 0.0, 1.0)
    with pytest.raises(errors.DTypeError, match="float32 or float64"):
        hl.random.uniform(3, dtype=hl.float16)
    with pytest.raises(errors.DTypeError, match="float dtype"):
        hl.random.normal(3, dtype=hl.int64)
    with pytest.raises(errors.ValueError, match="low <= high"):
        hl.random.uniform(3, low=1.0, high=0.0)
    with pytest.raises(errors.ValueError, match="low <= high"):
        hl.random.uniform(3, low=float("nan"))
    with pytest.raises(errors.ValueError, match="float32's range"):
        hl.random.uniform(3, low=-1e39, high=0.0)
    with pytest.raises(errors.ValueError, match="std"):
        hl.random.normal(3, std=-1.0)
    with pytest.raises(errors.ValueError, match="std >= 0"):
        _core.call("random_normal", t._h, 0, 0, 0.0, float("inf"))
    with pytest.raises(errors.ValueError, match=r"p must be in \[0, 1\]"):
        hl.random.bernoulli(3, p=1.5)
    with pytest.raises(errors.ValueError, match=r"p must be in \[0, 1\]"):
        _core.call("random_bernoulli", t._h, 0, 0, float("nan"))
    with pytest.raises(errors.ValueError, match="NULL"):
        _core.call("random_uniform", None, 0, 0, 0.0, 1.0)
    # an empty tensor is a valid draw that consumes nothing
    g = Generator(0)
    assert hl.random.rand(0, 3, generator=g).shape == (0, 3) and g.offset == 0
