"""Pooling gradients on cuda as gathers (libcore/cuda/pool.cu: a thread per input element visits
the windows that hold it in output order): the CPU's result bit for bit (the same additions in
the same order), float32 and float16, over overlapping, dilated, padded and ceil-mode windows;
max_pool_grad with indices outside their own windows (which no forward makes) falls back to
the scatter kernel and still equals the CPU; out-of-range indices still raise."""
import numpy as np
import pytest

import hl
from hl import ops

pytestmark = pytest.mark.gpu

# (x shape, kernel, stride, padding, dilation, ceil_mode)
GEOMETRIES = [((2, 3, 9, 8), 3, 2, 1, 1, False),      # overlapping windows
              ((1, 2, 11, 10), (3, 2), (2, 3), (1, 0), (2, 1), True),
              ((2, 2, 6, 6), 2, 2, 0, 1, False)]


def _both(fn):
    got = fn("cuda").astype("float32").numpy()
    want = fn("cpu").astype("float32").numpy()
    return got, want


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["overlap", "dilated-ceil", "tiling"])
def test_max_pool_grad_is_the_cpus_bit_for_bit(geometry, dtype):
    shape, k, s, p, d, ceil = geometry
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(dtype)

    def run(device):
        X = hl.tensor(x, device=device)
        y, idx = hl.max_pool2d(X, k, stride=s, padding=p, dilation=d, ceil_mode=ceil,
                               return_indices=True)
        dy = hl.tensor(rng_dy(y.shape, dtype), device=device)
        return ops.max_pool2d_grad(dy, idx, shape, k, s, p, d, ceil)

    got, want = _both(run)
    assert got.tobytes() == want.tobytes()


def rng_dy(shape, dtype):
    return np.random.default_rng(1).standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("include_pad", [True, False])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["overlap", "dilated-ceil", "tiling"])
def test_avg_pool_grad_is_the_cpus_bit_for_bit(geometry, include_pad):
    shape, k, s, p, _, ceil = geometry
    y_shape = hl.avg_pool2d(hl.zeros(shape), k, stride=s, padding=p, ceil_mode=ceil,
                            count_include_pad=include_pad).shape
    dy = rng_dy(y_shape, "float32")

    def run(device):
        return ops.avg_pool2d_grad(hl.tensor(dy, device=device), shape, k, s, p, ceil,
                                   include_pad)

    got, want = _both(run)
    assert got.tobytes() == want.tobytes()


def test_half_gradients_round_like_the_cpu_in_float32():
    """float16: each addition rounded to float16 (the CPU's order); compared with float32
    sums to the half type's resolution."""
    shape = (2, 3, 9, 8)
    dy = rng_dy((2, 3, 5, 4), "float32")
    got = ops.avg_pool2d_grad(hl.tensor(dy, device="cuda").astype("float16"), shape, 3, 2, 1)
    want = ops.avg_pool2d_grad(hl.tensor(dy), shape, 3, 2, 1).numpy()
    np.testing.assert_allclose(got.astype("float32").numpy(), want, rtol=4e-3, atol=4e-3)


@pytest.mark.parametrize("itype", ["int32", "int64"])
def test_indices_outside_their_windows_scatter_like_the_cpu(itype):
    """max_pool_grad adds dy at whatever in-range index it is given (the CPU's contract); an
    index outside its own output's window cannot be found by the gather, so the kernel falls
    back to the scatter form."""
    rng = np.random.default_rng(2)
    dy = rng.standard_normal((2, 2, 3, 3))
    idx = rng.integers(-1, 36, (2, 2, 3, 3)).astype(itype)  # planes of 6x6, anywhere
    want = ops.max_pool2d_grad(hl.tensor(dy), hl.tensor(idx), (2, 2, 6, 6), 2, 2).numpy()
    got = ops.max_pool2d_grad(hl.tensor(dy, device="cuda"), hl.tensor(idx, device="cuda"),
                              (2, 2, 6, 6), 2, 2).numpy()
    assert got.tobytes() == want.tobytes()
    idx[1, 1, 2, 0] = 36
    with pytest.raises(hl.errors.IndexError, match="max_pool_grad: index 36 is out of range"):
        ops.max_pool2d_grad(hl.tensor(dy, device="cuda"), hl.tensor(idx, device="cuda"),
                            (2, 2, 6, 6), 2, 2)
