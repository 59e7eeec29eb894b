"""Batch norm on cuda with several blocks per channel (libcore/cuda/norm.cu: each channel's
N*S elements split into ranges of about 4096, each summed by a block, the ranges combined in
order by a thread per channel with Chan's formula for the variance). Checked against PyTorch
CPU in float64 (forward, running statistics, every gradient) where the ranges are several and
uneven, for equal bits on repeated runs, and for the launch count (3 per call, whatever C)."""
import ctypes

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hl
from hl import ops

pytestmark = pytest.mark.gpu

# (shape, ranges per channel by norm.cu's bn_splits): 1, 4 (16384 per channel), 2 uneven
# (5000 = 2500 + 2500 over planes of 625: a range starts inside a plane), 2 with C=70
SHAPES = [(3, 4, 5, 6), (16, 2, 32, 32), (8, 3, 25, 25), (2, 70, 50, 50)]


def _reference(x, w, b, rm, rv, dy, momentum, eps):
    tx = torch.from_numpy(x).requires_grad_()
    tw = torch.from_numpy(w).requires_grad_()
    tb = torch.from_numpy(b).requires_grad_()
    trm, trv = torch.from_numpy(rm.copy()), torch.from_numpy(rv.copy())
    y = F.batch_norm(tx, trm, trv, tw, tb, training=True, momentum=momentum, eps=eps)
    y.backward(torch.from_numpy(dy))
    return [y.detach().numpy(), trm.numpy(), trv.numpy(), tx.grad.numpy(), tw.grad.numpy(),
            tb.grad.numpy()]


def _hl(x, w, b, rm, rv, dy, momentum, eps, dtype="float64"):
    X, W, B, DY = (hl.tensor(a, device="cuda").astype(dtype) for a in (x, w, b, dy))
    RM, RV = (hl.tensor(a.copy(), device="cuda").astype(dtype) for a in (rm, rv))
    y, mean, invstd = ops.batch_norm_forward(X, RM, RV, W, B, training=True, momentum=momentum,
                                             eps=eps, return_stats=True)
    dx, dw, db = ops.batch_norm_grad(DY, X, mean, invstd, W, training=True)
    return [t.astype("float64").numpy() for t in (y, RM, RV, dx, dw, db)]


def _inputs(shape, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = rng.standard_normal(shape) * 3 + 5  # an offset mean: the variance's accuracy shows
    return (x, rng.standard_normal(c), rng.standard_normal(c), rng.standard_normal(c),
            rng.random(c) + 0.5, rng.standard_normal(shape), 0.1, 1e-5)


@pytest.mark.parametrize("shape", SHAPES, ids=["one-range", "4-ranges", "uneven", "c70"])
def test_ranges_match_pytorch_in_float64(shape):
    args = _inputs(shape, 1)
    names = ("y", "running_mean", "running_var", "dx", "dweight", "dbias")
    for name, got, want in zip(names, _hl(*args), _reference(*args)):
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10, err_msg=name)


def test_float32_and_repeated_runs_give_the_same_bits():
    args = _inputs(SHAPES[1], 2)
    first, again = _hl(*args, dtype="float32"), _hl(*args, dtype="float32")
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()
    for got, want in zip(first, _reference(*args)):  # float32 inputs: the registry's 2e-5
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5 * np.abs(want).max())


@pytest.mark.skipif(not hl.cuda.is_emulated(), reason="counts launches with the emulation")
@pytest.mark.parametrize("shape", SHAPES[:2])
def test_three_launches_per_call(shape):
    from hl import _cuda_libs
    count = ctypes.CDLL(_cuda_libs.library_path()).hl_cuda_emu_launch_count
    x, w, b, rm, rv, dy, momentum, eps = _inputs(shape, 3)
    X, W, B, DY, RM, RV = (hl.tensor(a, device="cuda") for a in (x, w, b, dy, rm, rv))
    before = count()
    y, mean, invstd = ops.batch_norm_forward(X, RM, RV, W, B, training=True, return_stats=True)
    hl.cuda.synchronize()
    assert count() - before == 3
    before = count()
    ops.batch_norm_grad(DY, X, mean, invstd, W, training=True)
    hl.cuda.synchronize()
    assert count() - before == 3
