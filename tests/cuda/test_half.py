"""float16/bfloat16 compute on cuda beyond the element-wise ops: matmul/gemm (half operands,
float32 sums), convolution and its gradients, reductions (double accumulators, rounded once).
Each result is compared with the CPU computing in float32 on the same half-rounded inputs, so
the only differences are the final rounding to the half type and the order of the sums:

- a result rounded once to float16 is within 2^-11 relative (half an ulp, 11-bit
  significand) of the exact value, bfloat16 within 2^-8 (8-bit significand); the tolerance
  below is twice that relative to the largest magnitude of the output (sums with
  cancellation are not relative-accurate element by element);
- conv's weight gradient is summed over the batch in float32 before its single rounding,
  so it meets the same bound (a per-sample half sum would not, at batch 16).
"""
import numpy as np
import pytest

import hl
from hl.autograd import functional as F

pytestmark = pytest.mark.gpu

HALVES = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


def _pair(a, dtype):
    """a rounded to dtype, on cuda in dtype and on the CPU in float32 (the same values)."""
    h = hl.tensor(a).astype(dtype)
    return h.to("cuda"), h.astype("float32")


def _close(got, want, dtype):
    got = got.astype("float32").numpy().astype(np.float64)
    want = want.numpy().astype(np.float64)
    tol = 2 * HALVES[dtype] * max(np.abs(want).max(), 1e-30)
    assert np.abs(got - want).max() <= tol, (np.abs(got - want).max(), tol)


@pytest.mark.parametrize("dtype", list(HALVES))
def test_matmul_and_gemm_in_half(dtype):
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 5, 67)), rng.standard_normal((67, 9))
    (ga, ca), (gb, cb) = _pair(a, dtype), _pair(b, dtype)
    y = ga @ gb
    assert y.dtype == hl.dtype(dtype) and y.device == hl.cuda(0)
    _close(y, ca @ cb, dtype)
    # gemm with transposes and a c, as linear calls it
    x, w, c = rng.standard_normal((7, 67)), rng.standard_normal((9, 67)), rng.standard_normal(9)
    (gx, cx), (gw, cw), (gc, cc) = _pair(x, dtype), _pair(w, dtype), _pair(c, dtype)
    _close(F.linear(gx, gw, gc), F.linear(cx, cw, cc), dtype)
    ga2, ca2 = _pair(rng.standard_normal((67, 7)), dtype)
    _close(F.gemm(ga2, gw, gc, trans_a=True, trans_b=True, alpha=0.5, beta=2.0),
           F.gemm(ca2, cw, cc, trans_a=True, trans_b=True, alpha=0.5, beta=2.0), dtype)


@pytest.mark.parametrize("dtype", list(HALVES))
def test_conv_and_its_gradients_in_half(dtype):
    rng = np.random.default_rng(2)
    (gx, cx), (gw, cw), (gb, cb) = (_pair(rng.standard_normal((16, 4, 9, 9)), dtype),
                                    _pair(rng.standard_normal((6, 2, 3, 3)), dtype),
                                    _pair(rng.standard_normal(6), dtype))
    outs = {}
    for side, (x, w, b) in (("cuda", (gx, gw, gb)), ("cpu", (cx, cw, cb))):
        x, w, b = (t.detach() for t in (x, w, b))
        for t in (x, w, b):
            t.requires_grad = True
        y = F.conv2d(x, w, b, stride=2, padding=1, groups=2)
        dy = hl.tensor(np.cos(np.arange(y.size, dtype=np.float32)).reshape(y.shape))
        dy = dy.astype(dtype).to("cuda") if side == "cuda" else dy.astype(dtype).astype("float32")
        y.backward(dy)
        outs[side] = (y, x.grad, w.grad, b.grad)
    for got, want in zip(outs["cuda"], outs["cpu"]):
        assert got.dtype == hl.dtype(dtype)
        _close(got, want, dtype)


@pytest.mark.parametrize("dtype", list(HALVES))
@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "prod", "logsumexp"])
def test_reductions_read_half_and_accumulate_wide(dtype, op):
    rng = np.random.default_rng(3)
    a = rng.uniform(0.9, 1.1, (6, 700)) if op == "prod" else rng.standard_normal((6, 700))
    g, c = _pair(a, dtype)
    for axis in (None, 1, 0):
        got, want = getattr(F, op)(g, axis=axis), getattr(F, op)(c, axis=axis)
        assert got.dtype == hl.dtype(dtype)  # numpy's rule: a half sum stays half
        _close(got, want, dtype)
    # 4096 ones: a float16 running sum stops at 2048 (2048 + 1 rounds back); ours is exact
    ones = hl.tensor(np.ones(4096, np.float32), device="cuda").astype(dtype)
    assert float(F.sum(ones).astype("float32").item()) == 4096.0


def test_half_on_the_cpu_still_says_to_cast():
    a = hl.tensor(np.ones((2, 2), np.float32)).astype("float16")
    with pytest.raises(hl.errors.DTypeError, match="float16"):
        a @ a


def _forward_backward(f, arrays, dtype):
    """f on cuda in dtype and on the CPU in float32 (same half-rounded inputs), with the
    gradient of each input for the same half-rounded dy."""
    outs = {}
    for side in ("cuda", "cpu"):
        xs = []
        for a in arrays:
            g, c = _pair(a, dtype)
            t = (g if side == "cuda" else c).detach()
            t.requires_grad = True
            xs.append(t)
        y = f(*xs)
        dy = hl.tensor(np.cos(np.arange(y.size, dtype=np.float32)).reshape(y.shape)).astype(dtype)
        y.backward(dy.to("cuda") if side == "cuda" else dy.astype("float32"))
        outs[side] = [y] + [x.grad for x in xs]
    return outs["cuda"], outs["cpu"]


@pytest.mark.parametrize("dtype", list(HALVES))
@pytest.mark.parametrize("case", ["softmax", "log_softmax", "cross_entropy", "batch_norm",
                                  "layer_norm", "max_pool", "avg_pool"])
def test_softmax_losses_norms_pooling_in_half(dtype, case):
    """Forward to twice the half type's rounding as above; gradients to four times it: the
    backward reads the forward's rounded output (softmax's y, log_softmax's log-probabilities,
    the norms' saved statistics) or rounds a sum per window (pooling), one more rounding."""
    rng = np.random.default_rng(4)
    labels = np.array([1, 0, 3, 2, 4, 1])
    x2, x4 = rng.standard_normal((6, 11)), rng.standard_normal((3, 4, 6, 6))
    fs = {
        "softmax": (lambda x: F.softmax(x), [x2]),
        "log_softmax": (lambda x: F.log_softmax(x), [x2]),
        "cross_entropy": (lambda x: F.softmax_cross_entropy(
            x, hl.tensor(labels, device=x.device), reduction="none"), [x2]),
        "batch_norm": (lambda x, w, b: F.batch_norm(x, None, None, w, b, training=True),
                       [x4, rng.uniform(0.5, 1.5, 4), rng.standard_normal(4)]),
        "layer_norm": (lambda x, w, b: F.layer_norm(x, (6, 6), w, b),
                       [x4, rng.uniform(0.5, 1.5, (6, 6)), rng.standard_normal((6, 6))]),
        "max_pool": (lambda x: F.max_pool2d(x, 3, 2, padding=1), [x4]),
        "avg_pool": (lambda x: F.avg_pool2d(x, 3, 2, padding=1), [x4]),
    }
    f, arrays = fs[case]
    got, want = _forward_backward(f, arrays, dtype)
    assert got[0].dtype == hl.dtype(dtype)
    _close(got[0], want[0], dtype)
    for g, w in zip(got[1:], want[1:]):
        assert g.dtype == hl.dtype(dtype)
        gv, wv = g.astype("float32").numpy(), w.numpy()
        assert np.abs(gv - wv).max() <= 4 * HALVES[dtype] * np.abs(wv).max(), case


@pytest.mark.parametrize("dtype", list(HALVES))
def test_random_draws_in_half_are_float32s_stream_rounded(dtype):
    """A half draw reads float32's Philox words and formulas and rounds each number once:
    uniform equals the float32 draw rounded (bit for bit, apart from a float32 value that
    rounds up to `high`, which becomes the half value below it: [low, high) still holds),
    normal to the device libm's last float32 bits before the rounding, bernoulli exactly."""
    draws = {}
    for dt in (dtype, "float32"):
        hl.manual_seed(77)
        draws[dt] = [hl.uniform(4001, low=-2, high=3, dtype=dt, device="cuda"),
                     hl.normal(999, mean=1, std=2, dtype=dt, device="cuda"),
                     hl.bernoulli(1003, p=0.3, dtype=dt, device="cuda"),
                     hl.uniform(20000, low=0.0, high=1.0, dtype=dt, device="cuda")]
    half, f32 = draws[dtype], draws["float32"]
    for h in half:
        assert h.dtype is hl.dtype(dtype) and h.device == hl.cuda(0)
    rounded = [t.astype(dtype).astype("float32").numpy() for t in f32]
    got = [t.astype("float32").numpy() for t in half]
    ulp = 2.0 ** -10 if dtype == "float16" else 2.0 ** -7  # the spacing in [1, 2)

    def uniform_expected(r, high, below):
        return np.where(r >= high, np.float32(below), r)
    # [-2, 3): the half value below 3 is 3 - 2 ulp; below 1 it is 1 - ulp / 2
    np.testing.assert_array_equal(got[0], uniform_expected(rounded[0], 3, 3 - 2 * ulp))
    np.testing.assert_allclose(got[1], rounded[1], rtol=HALVES[dtype] * 2, atol=1e-6)
    np.testing.assert_array_equal(got[2], rounded[2])
    # [0, 1): float32 values above 1 - 2^-12 (float16) round up to 1.0 and are stepped down
    top = rounded[3] == 1.0
    assert top.any() and got[3].max() < 1.0
    np.testing.assert_array_equal(got[3], uniform_expected(rounded[3], 1, 1 - ulp / 2))
    assert got[0].min() >= -2 and got[0].max() < 3


@pytest.mark.parametrize("dtype", list(HALVES))
def test_dropout_in_half_drops_what_float32_drops(dtype):
    """dropout on a half tensor: the same Bernoulli mask as float32's from the same seed, the
    kept values scaled by 1/(1-p) and rounded (p = 0.5: the scale 2 is exact, so the result
    is x * 2 exactly); its gradient the same mask."""
    x = hl.tensor(np.linspace(-3, 3, 999, dtype=np.float32), device="cuda").astype(dtype)
    x32 = x.astype("float32")
    outs = {}
    for t in (x, x32):
        hl.manual_seed(5)
        t = t.detach()
        t.requires_grad = True
        y = F.dropout(t, 0.5)
        y.backward(hl.ones(y.shape, dtype=y.dtype.name, device="cuda"))
        outs[t.dtype.name] = (y.astype("float32").numpy(), t.grad.astype("float32").numpy())
    (y16, g16), (y32, g32) = outs[dtype], outs["float32"]
    assert (y32 == 0).sum() > 300
    np.testing.assert_array_equal(y16, y32)
    np.testing.assert_array_equal(g16, g32)
