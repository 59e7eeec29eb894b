"""float32 erf (libcore cpu/fast_math.h: x P(x^2) / Q(x^2) on x clamped to +-3.92, +-1 beyond)
as the Erf op computes it and as the fused GELU epilogue of matmul_fused computes it
(matmul_fused.c's eight-lane erf_v), against PyTorch's float64 erf and GELU.

Stated bounds (fast_math.h): absolute error under 4e-7 over all x, relative under 3e-7 for
0 < |x| < 0.5 (down to 1e-30); erf(-x) = -erf(x); exactly +-1 from |x| = 3.92 on (the
correctly rounded float32 value) and at +-inf; NaN stays NaN. The GELU epilogue: relative
1e-6 of float64 GELU, plus 3e-7 |x| for x < 0 (where 1 + erf cancels, in any float32 form).
"""
import numpy as np
import pytest
import torch

import hl
from hl import ops

GRID = np.concatenate([np.linspace(-6, 6, 600001), np.geomspace(1e-30, 0.5, 4001),
                       -np.geomspace(1e-30, 0.5, 4001), np.geomspace(3.5, 1e4, 2001),
                       -np.geomspace(3.5, 1e4, 2001)]).astype(np.float32)


def _erf64(x):
    return torch.erf(torch.tensor(x, dtype=torch.float64)).numpy()


def test_erf_within_the_stated_bounds_of_float64():
    got = hl.erf(hl.tensor(GRID)).numpy().astype(np.float64)
    want = _erf64(GRID)
    err = np.abs(got - want)
    assert err.max() <= 4e-7, (err.max(), GRID[np.argmax(err)])
    small = (np.abs(GRID) < 0.5) & (GRID != 0)
    assert np.max(err[small] / np.abs(want[small])) <= 3e-7
    assert np.all(np.abs(got) <= 1.0)


def test_erf_is_odd_saturates_exactly_and_keeps_nan():
    x = GRID[GRID > 0]
    pos, neg = hl.erf(hl.tensor(x)).numpy(), hl.erf(hl.tensor(-x)).numpy()
    np.testing.assert_array_equal(pos, -neg)
    special = np.array([3.92, -3.92, 4.0, -7.5, 1e30, -1e30, np.inf, -np.inf, np.nan, 0.0,
                        -0.0], np.float32)
    got = hl.erf(hl.tensor(special)).numpy()
    np.testing.assert_array_equal(got[:8], [1, -1, 1, -1, 1, -1, 1, -1])
    assert np.isnan(got[8])
    assert got[9] == 0 and got[10] == 0 and np.signbit(got[10])


@pytest.mark.parametrize("cols", [1, 16])  # the scalar epilogue (narrow panel) and erf_v
def test_fused_gelu_within_the_stated_bounds(cols):
    eye = ops.gemm_pack_b(hl.tensor(np.ones((1, cols), np.float32)))
    got = hl.matmul_fused(hl.tensor(GRID.reshape(-1, 1)), eye, act="gelu").numpy()
    x64 = torch.tensor(GRID, dtype=torch.float64)
    want = torch.nn.functional.gelu(x64).numpy()[:, None]
    bound = 1e-6 * np.abs(want) + 3e-7 * np.abs(GRID[:, None]) * (GRID[:, None] < 0)
    assert np.all(np.abs(got - want) <= bound)
    # -inf * (1 + erf(-inf)) = -inf * 0: NaN, as the unfused ops give; +inf stays +inf
    ends = hl.matmul_fused(hl.tensor(np.array([[-np.inf], [np.inf], [np.nan]], np.float32)),
                           eye, act="gelu").numpy()
    assert np.isnan(ends[0]).all() and np.isposinf(ends[1]).all() and np.isnan(ends[2]).all()


def test_erf_same_bits_at_one_two_three_threads():
    before = hl.get_num_threads()
    try:
        outs = []
        for t in (1, 2, 3):
            hl.set_num_threads(t)
            outs.append(hl.erf(hl.tensor(GRID)).numpy())
    finally:
        hl.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
