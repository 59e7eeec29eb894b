"""Copies, casts and fills (libcore api/copy.c, cpu/copy.c): hl_cast between all 8 dtypes,
fill, arange, eye, tril/triu, Tensor.copy_ and contiguous, against numpy.

Conversions are exact where they can be and compared bit for bit:
  - to float16: numpy's own float16 conversion (round to nearest even, subnormals, overflow to
    inf), from float32 and directly from float64 (no double rounding);
  - to bfloat16: ml_dtypes.bfloat16 from float32; from float64 and wide integers hl rounds
    once, correctly, where ml_dtypes goes through float32 and can round twice, so those are
    compared with an exact reference;
  - float -> integer: numpy leaves out-of-range values and NaN undefined. hl saturates to the
    integer type's range and sends NaN to 0 (documented in libcore/src/cpu/dtypes.h), so a
    cast never has undefined behaviour;
  - integer -> narrower integer wraps modulo 2**bits, as numpy does.
"""
import ml_dtypes
import numpy as np
import pytest

import hl
from hl import errors

from .harness import LAYOUTS, assert_close, check_guard, check_op
from .shapes import random_shape

BF16 = np.dtype(ml_dtypes.bfloat16)
ALL = [np.dtype(d) for d in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_,
                             np.float16)] + [BF16]
HL = {np.dtype(d.np): d for d in (hl.float32, hl.float64, hl.int32, hl.int64, hl.uint8,
                                  hl.bool, hl.float16, hl.bfloat16)}


def _name(d):
    return np.dtype(d).name


def _cast(x, dtype):
    return hl.tensor(x).astype(HL[np.dtype(dtype)]).numpy()


def _bits_equal(got, want):
    """Bitwise equality, any NaN matching any NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    u = {2: np.uint16, 4: np.uint32, 8: np.uint64}[got.dtype.itemsize]
    with np.errstate(invalid="ignore"):
        nan = np.isnan(got.astype(np.float64)) & np.isnan(want.astype(np.float64))
    bad = (got.view(u) != want.view(u)) & ~nan
    assert not bad.any(), f"{bad.sum()} differ, first inputs at {np.flatnonzero(bad)[:5]}: " \
                          f"got {got[bad][:5]}, want {want[bad][:5]}"


# ---- every pair of dtypes ------------------------------------------------------------------

@pytest.mark.parametrize("src", ALL, ids=_name)
@pytest.mark.parametrize("dst", ALL, ids=_name)
def test_cast_every_pair(src, dst, rng):
    """Values every dtype holds exactly (small integers, halves, bools), every layout."""
    if src.kind == "b":
        x = rng.random((3, 7)) < 0.5
    elif src.kind in "iu":
        x = rng.integers(0, 100, (3, 7)).astype(src)
    else:
        x = (rng.integers(-100, 100, (3, 7)) / 4).astype(src)
        if dst.kind == "u":
            x = np.abs(x)
    want = x.astype(dst)
    for layout, make in LAYOUTS.items():
        got = make(x).astype(HL[dst])
        assert got.dtype.np == dst
        assert_close(got.astype(hl.float64) if dst == BF16 else got,
                     want.astype(np.float64) if dst == BF16 else want, rtol=0, atol=0,
                     what=f"{layout} {src} -> {dst}")


@pytest.mark.parametrize("src", [np.int32, np.int64, np.uint8], ids=_name)
@pytest.mark.parametrize("dst", [np.int32, np.int64, np.uint8, np.bool_], ids=_name)
def test_integer_casts_wrap_like_numpy(src, dst, rng):
    info = np.iinfo(src)
    x = np.concatenate([rng.integers(info.min, info.max, 50, dtype=src, endpoint=True),
                        np.array([info.min, info.max, 0, 255, 256, -1 % (info.max + 1)],
                                 dtype=np.int64).astype(src)])
    np.testing.assert_array_equal(_cast(x, dst), x.astype(dst))


@pytest.mark.parametrize("src", [np.int32, np.int64, np.uint8, np.bool_], ids=_name)
@pytest.mark.parametrize("dst", [np.float32, np.float64, np.float16], ids=_name)
def test_integer_to_float_rounds_like_numpy(src, dst, rng):
    if src is np.bool_:
        x = rng.random(20) < 0.5
    else:
        info = np.iinfo(src)
        x = rng.integers(info.min, info.max, 200, dtype=src, endpoint=True)
    with np.errstate(over="ignore"):
        _bits_equal(_cast(x, dst), x.astype(dst))


# ---- float16 ---------------------------------------------------------------------------------

def test_float32_to_float16_random_bits(rng):
    x = rng.integers(0, 2 ** 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        _bits_equal(_cast(x, np.float16), x.astype(np.float16))


def test_float32_to_float16_edges():
    """Ties to even in the normal and subnormal ranges, the overflow boundary, signed zeros."""
    half_ulp = [np.float32(1 + k * 2 ** -10 + 2 ** -11) for k in range(4)]      # ties at 1
    sub = [np.float32(2 ** -24 * (k + 0.5)) for k in range(6)]                   # ties, subnormal
    x = np.array(half_ulp + sub + [np.float32(v) for v in (
        65504, 65519.99, 65520, 1e9, -65520, 2 ** -25, 2 ** -25 * 1.0001, 2 ** -26, 6.1e-5,
        2 ** -14, 2 ** -14 - 2 ** -25, 0.0, -0.0, np.inf, -np.inf, np.nan)], dtype=np.float32)
    with np.errstate(over="ignore"):
        _bits_equal(_cast(x, np.float16), x.astype(np.float16))
        _bits_equal(_cast(-x, np.float16), (-x).astype(np.float16))


def _near_half_range(rng, n):
    """float64 values spread over float16's range, with random low bits (the bits that a
    double rounding would lose)."""
    mant = rng.random(n) + 1
    exp = rng.integers(-27, 17, n)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return sign * np.ldexp(mant, exp)


def test_float64_to_float16_rounds_once(rng):
    x = _near_half_range(rng, 1 << 16)
    # exact ties plus or minus one float64 ulp: a double rounding gets these wrong
    ties = np.array([1 + 2 ** -11, 1 + 3 * 2 ** -11, 2 ** -24 * 1.5, 1024 + 0.5, 2 ** -20 * 1.5])
    x = np.concatenate([x, ties, np.nextafter(ties, 0), np.nextafter(ties, 10), -ties,
                        [65519.999999, 65520.0, 1e300, -1e300, 1e-300, np.nan, np.inf]])
    with np.errstate(over="ignore"):
        _bits_equal(_cast(x, np.float16), x.astype(np.float16))


def test_float16_to_wider_is_exact_for_all_65536_values():
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    for dst in (np.float32, np.float64):
        _bits_equal(_cast(h, dst), h.astype(dst))
    b = np.arange(1 << 16, dtype=np.uint16).view(BF16)
    with np.errstate(invalid="ignore"):
        for dst in (np.float32, np.float64):
            _bits_equal(_cast(b, dst), b.astype(dst))


# ---- bfloat16 ---------------------------------------------------------------------------------

def test_float32_to_bfloat16_random_bits(rng):
    x = rng.integers(0, 2 ** 32, 1 << 18, dtype=np.uint64).astype(np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):
        _bits_equal(_cast(x, BF16), x.astype(BF16))


def test_float32_to_bfloat16_edges():
    x = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 1 + 2 ** -8 + 2 ** -20, 3.3895e38, 3.4e38,
                  np.finfo(np.float32).max, 1e-40, 2 ** -133, 2 ** -134, 0.0, -0.0, np.inf,
                  -np.inf, np.nan], dtype=np.float32)
    with np.errstate(invalid="ignore"):
        _bits_equal(_cast(x, BF16), x.astype(BF16))
        _bits_equal(_cast(-x, BF16), (-x).astype(BF16))


def _bf16_exact(x):
    """Correctly rounded float64 -> bfloat16 (nearest, ties to even), for normal values: the
    two bfloat16 neighbours of x are x's float64 bits with the low 45 mantissa bits cleared
    (toward zero) and that plus one bfloat16 ulp."""
    bits = x.view(np.uint64)
    low = bits & np.uint64((1 << 45) - 1)
    down = bits & ~np.uint64((1 << 45) - 1)
    up = down + np.uint64(1 << 45)
    half = np.uint64(1 << 44)
    odd = (down >> np.uint64(45)) & np.uint64(1)
    take_up = (low > half) | ((low == half) & (odd == 1))
    return np.where(take_up, up, down).view(np.float64).astype(np.float32).astype(BF16)


def test_float64_to_bfloat16_rounds_once(rng):
    mant = rng.random(1 << 16) + 1
    x = np.ldexp(mant, rng.integers(-100, 100, mant.size)) * np.where(
        rng.random(mant.size) < 0.5, -1, 1)
    ties = np.array([1 + 2 ** -8, 1 + 3 * 2 ** -8, 2.0 ** 60 * (1 + 2 ** -8)])
    x = np.concatenate([x, ties, np.nextafter(ties, 0), np.nextafter(ties, 10), -ties])
    _bits_equal(_cast(x, BF16), _bf16_exact(x))
    # ml_dtypes rounds through float32 and so differs on the tie + 1 ulp inputs
    assert _cast(np.array([1 + 2 ** -8 + 2 ** -40]), BF16)[0] == BF16.type(1 + 2 ** -7)


def test_wide_integers_to_bfloat16_round_once(rng):
    x = rng.integers(-2 ** 62, 2 ** 62, 4096, dtype=np.int64)
    x = np.concatenate([x, [2 ** 24 + 2 ** 16 + 1, -(2 ** 24 + 2 ** 16 + 1), 2 ** 63 - 1,
                            -2 ** 63, 2 ** 62 + 2 ** 54 + 1, 0, 1, -1]]).astype(np.int64)
    # an int64 is exact in float64 only below 2**53; compute the reference from Python ints
    want = np.array([_bf16_exact(np.array([float(v)]))[0] if abs(int(v)) < 2 ** 53 else
                     _bf16_of_int(int(v)) for v in x], dtype=BF16)
    _bits_equal(_cast(x, BF16), want)
    small = x[np.abs(x) < 2 ** 31].astype(np.int32)
    _bits_equal(_cast(small, BF16), _bf16_exact(small.astype(np.float64)))


def _bf16_of_int(v):
    """Correct rounding of a Python int to bfloat16 (8 significant bits), ties to even."""
    a = abs(v)
    shift = a.bit_length() - 8
    q, r = divmod(a, 1 << shift)
    half = 1 << (shift - 1)
    if r > half or (r == half and q & 1):
        q += 1
    return BF16.type(float(q << shift) * (1 if v >= 0 else -1))


# ---- float -> integer ---------------------------------------------------------------------

SAT_IN = [1e10, -1e10, np.nan, np.inf, -np.inf, 2.5, -2.5, 255.9, -0.5, 256.0, 2.0 ** 31,
          -2.0 ** 31, 2.0 ** 63, -2.0 ** 63, 3e38]
SAT_WANT = {
    np.int32: [2 ** 31 - 1, -2 ** 31, 0, 2 ** 31 - 1, -2 ** 31, 2, -2, 255, 0, 256, 2 ** 31 - 1,
               -2 ** 31, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1],
    np.int64: [10 ** 10, -10 ** 10, 0, 2 ** 63 - 1, -2 ** 63, 2, -2, 255, 0, 256, 2 ** 31,
               -2 ** 31, 2 ** 63 - 1, -2 ** 63, 2 ** 63 - 1],
    np.uint8: [255, 0, 0, 255, 0, 2, 0, 255, 0, 255, 255, 0, 255, 0, 255],
}


@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16, BF16], ids=_name)
@pytest.mark.parametrize("dst", sorted(SAT_WANT, key=_name), ids=_name)
def test_float_to_integer_saturates_and_nan_is_zero(src, dst):
    """numpy leaves these undefined; hl truncates toward zero, saturates at the integer range
    and sends NaN to 0."""
    x = np.array(SAT_IN, dtype=np.float64)
    with np.errstate(over="ignore"):
        xs = x.astype(src)
    want = np.array(SAT_WANT[dst], dtype=np.int64)
    # the narrow float types round the inputs first; recompute the expectation from them
    if src in (np.float16, BF16):
        v = xs.astype(np.float64)
        info = np.iinfo(dst)
        want = np.array([0 if np.isnan(w) else info.max if w >= info.max else
                         info.min if w <= info.min else int(w) for w in v], dtype=np.int64)
    np.testing.assert_array_equal(_cast(xs, dst), want.astype(dst))


def test_float_to_bool_is_nonzero():
    x = np.array([0.0, -0.0, 0.5, np.nan, np.inf, -1e-45], dtype=np.float32)
    np.testing.assert_array_equal(_cast(x, np.bool_), x.astype(np.bool_))


# ---- cast entry point ---------------------------------------------------------------------

def test_cast_out_writes_only_the_output(rng):
    x = rng.standard_normal((3, 4))
    out = check_guard(lambda o: hl._core.call("cast", hl.tensor(x)._h, hl.float32.code,
                                              hl._core.out(o._h)), (3, 4))
    assert_close(out, x.astype(np.float32))


def test_cast_invalid_dtype_code():
    with pytest.raises(errors.DTypeError, match="cast: invalid dtype code 8"):
        hl._core.call("cast", hl.tensor([1.0])._h, 8, hl._core.OUT)
    with pytest.raises(errors.DTypeError, match="cast: invalid dtype code 1000"):
        hl._core.call("cast", hl.tensor([1.0])._h, 1000, hl._core.OUT)


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_astype_to_the_same_dtype_copies(dtype):
    t = hl.tensor(np.zeros(3, dtype=dtype))
    c = t.astype(HL[dtype])
    assert not c.shares_memory(t)
    assert c.dtype is t.dtype


# ---- fill ------------------------------------------------------------------------------------

FILL_VALUES = [0, 1, 3, -2.5, 0.1, 1e6, 255, np.nan, np.inf, -np.inf, True]


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_fill_every_dtype(dtype):
    for v in FILL_VALUES:
        t = hl.full((2, 3), v, dtype=HL[dtype])
        if dtype.kind in "iu" and isinstance(v, float):
            # float -> integer saturates (NaN -> 0), as in a cast
            want = _cast(np.full((2, 3), v, dtype=np.float64), dtype)
        else:
            with np.errstate(over="ignore", invalid="ignore"):
                want = np.full((2, 3), v, dtype=np.float64).astype(dtype)
        if dtype == BF16:
            _bits_equal(t.numpy(), want)
        else:
            np.testing.assert_array_equal(t.numpy(), want, err_msg=f"fill {v}")


def test_fill_of_a_view_writes_only_the_view():
    base = hl.zeros(4, 6)
    base[1:3, ::2].fill_(7.0)
    want = np.zeros((4, 6), np.float32)
    want[1:3, ::2] = 7
    assert_close(base, want)
    base.T[0].fill_(-1)          # a strided column
    want.T[0] = -1
    assert_close(base, want)
    hl.zeros(0, 3).fill_(1.0)    # size 0: nothing to do


@pytest.mark.parametrize("view", ["T", "strided T", "reversed"])
def test_fill_of_a_non_contiguous_view_stays_inside(view):
    """A column-major view once made the loop merge its axes the wrong way and write past the
    view (libcore cpu/loops.c)."""
    make = {"T": lambda o: o.reshape(4, 3).T, "strided T": lambda o: o.reshape(4, 3)[::2].T,
            "reversed": lambda o: o.reshape(4, 3).T.flip(1)}[view]
    out = check_guard(lambda o: make(o).fill_(1.0), (12,))
    want = np.zeros(12, np.float32) - 12345
    make_np = {"T": lambda a: a.reshape(4, 3).T, "strided T": lambda a: a.reshape(4, 3)[::2].T,
               "reversed": lambda a: a.reshape(4, 3).T[:, ::-1]}[view]
    make_np(want)[...] = 1
    assert_close(out, want)


def test_fill_of_a_broadcast_view_is_refused():
    # numpy's broadcast_to views are read-only; hl refuses every write into one
    # (tests/test_broadcast_writes.py covers the other ways in)
    t = hl.zeros(3)
    with pytest.raises(errors.ValueError, match=r"fill: the tensor is a broadcast view"):
        t.expand(4, 3).fill_(2.0)
    assert_close(t, [0, 0, 0])


# ---- arange, eye, tril / triu ----------------------------------------------------------------

ARANGE = [(0, 5, 1), (2, 11, 3), (5, 0, -1), (-3, 3, 2), (0, 0, 1), (3, 1, 1), (0.0, 1.0, 0.1),
          (1.5, -2.0, -0.25), (0, 10 ** 6, 7), (-5.5, 5.5, 1.0)]


@pytest.mark.parametrize("start,stop,step", ARANGE)
def test_arange(start, stop, step):
    got = hl.arange(start, stop, step)
    want = np.arange(start, stop, step)
    assert got.shape == want.shape
    if want.dtype.kind == "i":
        assert got.dtype is hl.int64
        np.testing.assert_array_equal(got.numpy(), want)
    else:
        assert got.dtype is hl.float32
        assert_close(got, want.astype(np.float32), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_arange_dtypes(dtype):
    got = hl.arange(0, 6, dtype=HL[dtype])
    want = np.arange(0, 6).astype(dtype)
    assert got.dtype is HL[dtype]
    assert_close(got.astype(hl.float64), want.astype(np.float64), rtol=0, atol=0)
    assert_close(hl.arange(3, dtype=HL[dtype]).astype(hl.float64),
                 np.arange(3).astype(dtype).astype(np.float64))


def test_arange_bad_arguments():
    with pytest.raises(errors.ValueError, match="step must not be zero"):
        hl.arange(0, 5, 0)
    with pytest.raises(errors.ValueError, match="arange: negative length -1"):
        hl._core.call("arange", 0.0, 1.0, -1, hl.float32.code, (0, 0), hl._core.OUT)
    with pytest.raises(errors.ValueError, match="arange: .*finite"):
        hl._core.call("arange", float("nan"), 1.0, 3, hl.float32.code, (0, 0), hl._core.OUT)
    with pytest.raises(errors.ValueError, match="arange: integer dtype int32 needs integer"):
        hl.arange(0, 3, 0.5, dtype=hl.int32)


@pytest.mark.parametrize("n,m,k", [(3, None, 0), (3, 5, 1), (4, 2, -1), (3, 3, 5), (3, 3, -7),
                                   (0, 3, 0), (1, 1, 0), (2, 0, 0)])
@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_eye(n, m, k, dtype):
    got = hl.eye(n, m, k, dtype=HL[dtype])
    want = np.eye(n, m, k, dtype=dtype)
    assert got.dtype is HL[dtype]
    assert_close(got.astype(hl.float64), want.astype(np.float64), rtol=0, atol=0)


def test_eye_negative_sizes():
    with pytest.raises(errors.ValueError, match=r"eye: negative size -1 x 3"):
        hl.eye(-1, 3)
    with pytest.raises(errors.ValueError, match=r"eye: negative size 2 x -2"):
        hl.eye(2, -2)


@pytest.mark.parametrize("upper", [False, True])
@pytest.mark.parametrize("shape", [(4, 4), (3, 5), (5, 2), (2, 3, 4), (2, 1, 3, 3), (0, 3),
                                   (3, 0), (2, 0, 2)])
def test_tril_triu(shape, upper, rng):
    x = rng.standard_normal(shape).astype(np.float32)
    f, ref = (hl.triu, np.triu) if upper else (hl.tril, np.tril)
    for k in (-6, -1, 0, 1, 2, 6):
        check_op(lambda t: f(t, k), lambda a: ref(a, k), [x], rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ALL, ids=_name)
def test_tril_every_dtype(dtype, rng):
    x = rng.integers(1, 5, (3, 4)).astype(dtype)
    got = hl.tril(hl.tensor(x), 1)
    assert_close(got.astype(hl.float64), np.tril(x, 1).astype(np.float64), rtol=0, atol=0)


def test_triangle_errors():
    with pytest.raises(errors.ShapeError, match="triangle: expected at least 2 dimensions"):
        hl.tril(hl.tensor([1.0, 2.0]))
    x = hl.zeros(3, 3)
    with pytest.raises(errors.ValueError, match="triangle.*overlaps"):
        hl._core.call("triangle", x._h, 0, 0, hl._core.out(x._h))


def test_triangle_out_writes_only_the_output(rng):
    x = rng.standard_normal((3, 3)).astype(np.float32)
    out = check_guard(lambda o: hl._core.call("triangle", hl.tensor(x)._h, 0, 1,
                                              hl._core.out(o._h)), (3, 3))
    assert_close(out, np.triu(x))


# ---- copy_ and contiguous ------------------------------------------------------------------------

@pytest.mark.parametrize("src_shape", [(3, 4), (4,), (1, 4), (3, 1), (), (1, 1, 1, 4)])
def test_copy_broadcasts(src_shape, rng):
    src = rng.standard_normal(src_shape)
    for layout, make in LAYOUTS.items():
        dst = hl.zeros(3, 4)
        keep = dst.numpy()
        dst.copy_(make(src))     # float64 into float32: cast on the way
        want = np.zeros((3, 4), np.float32)
        want[...] = src
        assert_close(dst, want, what=layout)
        assert np.shares_memory(keep, dst.numpy())


def test_copy_into_a_strided_view(rng):
    base = hl.zeros(4, 6, dtype=hl.int64)
    base[::2, 1::2].copy_(np.arange(3))
    want = np.zeros((4, 6), np.int64)
    want[::2, 1::2] = np.arange(3)
    np.testing.assert_array_equal(base.numpy(), want)
    base.T[::-1].copy_(hl.arange(24).reshape(6, 4))   # a reversed, transposed view
    want.T[::-1] = np.arange(24).reshape(6, 4)
    np.testing.assert_array_equal(base.numpy(), want)


def test_copy_from_python_data():
    t = hl.zeros(2, 3, dtype=hl.int32)
    t.copy_([[1, 2, 3], [4, 5, 6]])
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [4, 5, 6]])
    t.copy_(7)
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 7))


def test_copy_errors():
    t = hl.zeros(2, 3)
    with pytest.raises(errors.ShapeError, match=r"copy: cannot assign \(4,\) float32 to \(2, 3\)"):
        t.copy_(hl.zeros(4))
    with pytest.raises(errors.ShapeError, match="copy: cannot assign"):
        t.copy_(hl.zeros(2, 2, 3))
    x = hl.arange(6.0)
    with pytest.raises(errors.ValueError, match="copy.*overlaps"):
        x[1:].copy_(x[:5])


def test_copy_into_itself_is_a_no_op():
    x = hl.arange(6.0)
    x.copy_(x)
    assert_close(x, np.arange(6.0))


def test_contiguous():
    x = hl.tensor(np.arange(12.0).reshape(3, 4))
    assert x.contiguous().shares_memory(x)          # already contiguous: the same storage
    t = x.T
    c = t.contiguous()
    assert c.is_contiguous() and not c.shares_memory(x)
    assert_close(c, np.arange(12.0).reshape(3, 4).T)
    e = hl.zeros(3).expand(2, 3)
    assert not e.is_contiguous() and e.contiguous().is_contiguous()


def test_clone_does_not_share():
    x = hl.arange(4.0)
    y = x.clone()
    y += 1
    assert_close(x, np.arange(4.0))


@pytest.mark.parametrize("seed", range(4))
def test_cast_random_layouts(seed):
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, 5)
    x = rng.standard_normal(shape) * 100
    for dst in (np.float32, np.int32, np.float16, np.bool_):
        check_op(lambda t: t.astype(HL[np.dtype(dst)]), lambda a: a.astype(dst)
                 if dst is not np.int32 else np.trunc(a).astype(dst), [x], rtol=0, atol=0)
