"""hl.attention (libcore cpu/attention.c): softmax(scale q k^T + mask) v per (batch, head) in
one pass, against a float64 numpy reference and PyTorch's scaled_dot_product_attention.

Tolerances: rtol 2e-5, atol 2e-6 against float64 (float32 products of up to 200 terms, a float32
exp within 1.5 ulp, float32 sums of the probabilities). NaN positions must match exactly.
"""

import numpy as np
import pytest

import hl
from hl import errors
from tests.concurrency import run_threads

RTOL, ATOL = 2e-5, 2e-6


def reference(q, k, v, mask=None, scale=1.0, nan_to_zero=False):
    """float64: softmax over the last axis as softmax.c defines it (a row whose maximum is
    -inf or +inf, or that holds a NaN, is NaN), NaN -> 0 when asked."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    s = scale * q @ np.swapaxes(k, -1, -2)
    if mask is not None:
        s = s + np.asarray(mask, np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        m = np.max(s, axis=-1, keepdims=True)
        e = np.exp(s - m)
        p = e / e.sum(-1, keepdims=True)
    if nan_to_zero:
        p = np.where(np.isnan(p), 0.0, p)
    return p @ v


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32)


def check(got, want):
    got = np.asarray(got)
    assert got.shape == want.shape
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, equal_nan=True)


@pytest.mark.parametrize("b,h,sq,sk,d,dv", [
    (1, 1, 1, 1, 1, 1),
    (2, 3, 5, 7, 4, 4),
    (1, 2, 13, 17, 9, 33),     # nothing a multiple of the 6 x 16 tile
    (2, 12, 128, 128, 64, 64),  # BERT-base's heads
    (1, 2, 70, 200, 16, 48),   # more than one block of query rows
])
def test_random_against_float64(b, h, sq, sk, d, dv):
    rng = np.random.default_rng(sq * 100 + sk)
    q, k, v = rand(rng, b, h, sq, d), rand(rng, b, h, sk, d), rand(rng, b, h, sk, dv)
    mask = np.where(rng.random((b, 1, sq, sk)) < 0.2, -np.inf, 0.0).astype(np.float32)
    mask[..., 0] = 0  # no row fully hidden here
    for m in (None, mask):
        got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v),
                           None if m is None else hl.tensor(m), scale=d ** -0.5)
        check(got.numpy(), reference(q, k, v, m, d ** -0.5))


def test_against_pytorch_sdpa():
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    q, k, v = rand(rng, 2, 4, 9, 8), rand(rng, 2, 4, 11, 8), rand(rng, 2, 4, 11, 8)
    keep = rng.random((2, 1, 9, 11)) > 0.3
    keep[..., 0] = True
    want = torch.nn.functional.scaled_dot_product_attention(
        torch.tensor(q), torch.tensor(k), torch.tensor(v), attn_mask=torch.tensor(keep)).numpy()
    mask = np.where(keep, 0.0, -np.inf).astype(np.float32)
    got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v), hl.tensor(mask),
                       scale=8 ** -0.5).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_large_logits_and_large_negative_masks():
    """Scores of +-1e4 (the max shift keeps exp finite), masks of float32's lowest value (as
    Hugging Face's BERT writes them) and -1e9: no overflow, the masked keys get 0."""
    rng = np.random.default_rng(2)
    q, k, v = rand(rng, 1, 2, 8, 16, scale=30), rand(rng, 1, 2, 20, 16, scale=30), \
        rand(rng, 1, 2, 20, 5)
    for low in (np.finfo(np.float32).min, -1e9):
        mask = np.where(rng.random((1, 2, 8, 20)) < 0.5, low, 0.0).astype(np.float32)
        got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v), hl.tensor(mask))
        want = reference(q, k, v, mask)
        assert np.isfinite(got.numpy()).all()
        # float32 scores of |s| ~ 1e4 carry absolute errors of ~1e-3 into exp
        np.testing.assert_allclose(got.numpy(), want, rtol=2e-3, atol=2e-3)


def test_fully_masked_rows():
    """A row whose mask is all -inf: NaN, as softmax gives (and onnxruntime's Softmax), or 0
    with nan_to_zero (the IsNaN/Where of SDPA's export). A row fully hidden by float32's
    lowest value is not fully masked: it is a uniform average of v, as unfused."""
    rng = np.random.default_rng(3)
    q, k, v = rand(rng, 2, 2, 6, 8), rand(rng, 2, 2, 9, 8), rand(rng, 2, 2, 9, 4)
    mask = np.zeros((2, 1, 6, 9), np.float32)
    mask[0, 0, 1] = -np.inf
    mask[1, 0, 4] = np.finfo(np.float32).min
    for ntz in (False, True):
        got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v), hl.tensor(mask),
                           nan_to_zero=ntz).numpy()
        check(got, reference(q, k, v, mask, nan_to_zero=ntz))
        assert np.isnan(got[0, :, 1]).all() != ntz
        if ntz:
            assert (got[0, :, 1] == 0).all()
        np.testing.assert_allclose(got[1, :, 4], v[1].mean(axis=1), rtol=1e-5, atol=1e-6)


def test_nan_and_inf_inputs():
    """A NaN in q makes its row NaN (0 with nan_to_zero); a +inf score makes its row NaN
    (softmax.c's rule); other rows are untouched."""
    rng = np.random.default_rng(4)
    q, k, v = rand(rng, 1, 1, 4, 8), rand(rng, 1, 1, 5, 8), rand(rng, 1, 1, 5, 3)
    q[0, 0, 1, 3] = np.nan
    mask = np.zeros((5,), np.float32)
    mask[2] = np.inf
    for m in (None, mask):
        for ntz in (False, True):
            got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v),
                               None if m is None else hl.tensor(m), nan_to_zero=ntz).numpy()
            check(got, reference(q, k, v, m, nan_to_zero=ntz))


@pytest.mark.parametrize("mask_shape", [(7,), (5, 7), (2, 1, 5, 7), (1, 3, 1, 7), (3, 5, 1)])
def test_mask_broadcasts(mask_shape):
    rng = np.random.default_rng(5)
    q, k, v = rand(rng, 2, 3, 5, 4), rand(rng, 2, 3, 7, 4), rand(rng, 2, 3, 7, 6)
    mask = rand(rng, *mask_shape, scale=3)
    got = hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v), hl.tensor(mask), scale=0.7)
    check(got.numpy(), reference(q, k, v, mask, 0.7))


def test_head_split_views_and_merged_output():
    """q, k, v as the permuted views of a (B, S, H, D) projection (read in place), a k whose
    last axis is strided (copied), and merge_heads's (B, Sq, H * Dv) layout."""
    rng = np.random.default_rng(6)
    b, s, h, d = 2, 11, 3, 8
    qkv = rand(rng, b, s, 3 * h * d)
    t = hl.tensor(qkv)
    q, k, v = (hl.permute(hl.reshape(t[:, :, i * h * d:(i + 1) * h * d], b, s, h, d),
                          0, 2, 1, 3) for i in range(3))
    qn, kn, vn = (qkv[:, :, i * h * d:(i + 1) * h * d].reshape(b, s, h, d).transpose(0, 2, 1, 3)
                  for i in range(3))
    want = reference(qn, kn, vn, scale=0.3)
    check(hl.attention(q, k, v, scale=0.3).numpy(), want)
    merged = hl.attention(q, k, v, scale=0.3, merge_heads=True)
    assert merged.shape == (b, s, h * d)
    check(merged.numpy(), want.transpose(0, 2, 1, 3).reshape(b, s, h * d))
    kt = hl.permute(hl.tensor(np.ascontiguousarray(kn.transpose(0, 1, 3, 2))), 0, 1, 3, 2)
    check(hl.attention(q, kt, v, scale=0.3).numpy(), want)


def test_two_threads_inside_and_two_callers():
    """hl's own threads (2) give the answer one thread gives, bit for bit, and so do two
    Python threads calling at once."""
    rng = np.random.default_rng(7)
    q, k, v = rand(rng, 2, 4, 70, 32), rand(rng, 2, 4, 90, 32), rand(rng, 2, 4, 90, 32)
    mask = np.where(rng.random((2, 1, 70, 90)) < 0.2, -np.inf, 0).astype(np.float32)
    args = [hl.tensor(a) for a in (q, k, v, mask)]
    before = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        one = hl.attention(*args, scale=0.2, nan_to_zero=True).numpy()
        hl.set_num_threads(2)
        two = hl.attention(*args, scale=0.2, nan_to_zero=True).numpy()
    finally:
        hl.set_num_threads(before)
    np.testing.assert_array_equal(one, two)
    check(one, reference(q, k, v, mask, 0.2, nan_to_zero=True))

    def worker(i):
        for _ in range(5):
            np.testing.assert_array_equal(
                hl.attention(*args, scale=0.2, nan_to_zero=True).numpy(), one)
    run_threads(worker, 2)


def test_bad_input_is_refused_clearly():
    q, k, v = (hl.tensor(np.zeros(s, np.float32)) for s in ((1, 2, 3, 4), (1, 2, 5, 4),
                                                           (1, 2, 5, 6)))
    with pytest.raises(errors.ShapeError, match=r"attention: expected k \(1, 2, Sk, 4\)"):
        hl.attention(q, hl.tensor(np.zeros((1, 2, 5, 3), np.float32)), v)
    with pytest.raises(errors.ShapeError, match="attention: expected k"):
        hl.attention(q, k, hl.tensor(np.zeros((1, 2, 4, 6), np.float32)))
    with pytest.raises(errors.ShapeError, match="must be 4-D"):
        hl.attention(hl.tensor(np.zeros((2, 3, 4), np.float32)), k, v)
    with pytest.raises(errors.ShapeError, match=r"the mask \(2, 5\) float32 does not broadcast"):
        hl.attention(q, k, v, hl.tensor(np.zeros((2, 5), np.float32)))
    with pytest.raises(errors.DTypeError, match="attention: computes in float32, got q"):
        hl.attention(hl.tensor(np.zeros((1, 2, 3, 4))), k, v)
    with pytest.raises(errors.ValueError, match="the scale must be finite"):
        hl.attention(q, k, v, scale=float("inf"))
    with pytest.raises(errors.UnsupportedError, match="attention: an inference kernel"):
        hl.attention(hl.tensor(np.zeros((1, 2, 3, 4), np.float32), requires_grad=True), k, v)


def test_empty_keys_and_rows():
    """No keys: the output is 0 (the product with an empty V, as unfused); no rows: empty."""
    q = hl.tensor(np.ones((1, 1, 3, 4), np.float32))
    e = hl.tensor(np.zeros((1, 1, 0, 4), np.float32))
    np.testing.assert_array_equal(hl.attention(q, e, e).numpy(), np.zeros((1, 1, 3, 4)))
    assert hl.attention(e, q, q).shape == (1, 1, 0, 4)


def probabilities(scores, mask_stride_one=True, nan_to_zero=False):
    """softmax(scores) along the last axis as hl.attention computes it: q = 0, the scores
    given as the mask (contiguous along the keys, or broadcast from (Sk, 1) when not
    mask_stride_one) and v the identity, so the output rows are the probabilities."""
    rows, sk = scores.shape
    q = np.zeros((1, 1, rows, 1), np.float32)
    k = np.zeros((1, 1, sk, 1), np.float32)
    v = np.eye(sk, dtype=np.float32)[None, None]
    mask = scores if mask_stride_one else np.ascontiguousarray(scores.T).T
    return hl.attention(hl.tensor(q), hl.tensor(k), hl.tensor(v), hl.tensor(mask),
                        nan_to_zero=nan_to_zero).numpy()[0, 0]


@pytest.mark.parametrize("sk", [7, 8, 9, 16, 23, 64, 128, 131])
def test_softmax_rows_vector_and_tail_keys(sk):
    """The AVX2 row loop (8 keys a register) and its scalar tail: exp over [-100, 0] after
    the max shift (below -87 the exp is 0: under 1.7e-38 next to the maximum's 1) within
    1.5 ulp, float32 sums of at most sk terms; a mask read with a key stride (the portable
    loop) gives the same probabilities. Against float64 softmax."""
    rng = np.random.default_rng(sk)
    s = rng.uniform(-100, 0, (6, sk)).astype(np.float32)
    s[:, rng.integers(0, sk)] = 0.0
    s[1] = rng.uniform(-1, 1, sk)  # a row of near-equal probabilities
    s[2, :] = -90.0  # every key below the clamp: shifted by its max, uniform again
    with np.errstate(under="ignore"):
        e = np.exp(s.astype(np.float64) - s.max(-1, keepdims=True))
    want = e / e.sum(-1, keepdims=True)
    got = probabilities(s)
    np.testing.assert_allclose(got, want, rtol=3e-6, atol=1e-7)
    np.testing.assert_allclose(probabilities(s, mask_stride_one=False), want, rtol=3e-6,
                               atol=1e-7)


@pytest.mark.parametrize("sk", [8, 19, 40])
def test_softmax_rows_adversarial_lanes(sk):
    """A NaN, a +inf or a fully -inf row placed in a vector lane and in the scalar tail:
    NaN rows (0 under nan_to_zero) exactly where float64 softmax has them, other rows
    untouched; float32's largest scores (the max shift keeps exp finite)."""
    rows = []
    for pos in (0, 5, sk - 1):  # in the first register, in it again, in the tail (sk % 8)
        for bad in (np.nan, np.inf):
            r = np.linspace(-3, 3, sk).astype(np.float32)
            r[pos] = bad
            rows.append(r)
    rows.append(np.full(sk, -np.inf, np.float32))
    big = np.linspace(-3e38, 3e38, sk).astype(np.float32)
    rows.append(big)
    rows.append(np.linspace(-1, 1, sk).astype(np.float32))
    s = np.stack(rows)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(s.astype(np.float64) - s.max(-1, keepdims=True))
        want = e / e.sum(-1, keepdims=True)
    want[np.isnan(want).any(-1)] = np.nan  # softmax.c's rule: a NaN row is NaN throughout
    for ntz in (False, True):
        got = probabilities(s, nan_to_zero=ntz)
        w = np.where(np.isnan(want), 0.0, want) if ntz else want
        np.testing.assert_array_equal(np.isnan(got), np.isnan(w))
        np.testing.assert_allclose(got, w, rtol=3e-6, atol=1e-7)
