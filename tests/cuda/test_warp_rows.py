"""Row kernels on cuda with a warp per row (libcore/cuda/softmax.cu, norm.cu: rows along the last
axis; lanes over the columns, shuffles combining them): softmax, log_softmax, cross-entropy
(labels, ignore_index, probabilities) and layer norm with their gradients, on rows longer than
a warp and not a multiple of it, against PyTorch CPU in float64 (1e-10 relative: only the
summation order differs), a NaN row staying NaN, and repeated runs giving the same bits."""
import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hl

pytestmark = pytest.mark.gpu

ROWS, COLS = 37, 1001  # rows over several warps and blocks; columns 31 lanes x 32 + 9
TOL = dict(rtol=1e-10, atol=1e-12)


def _grad(fn, *arrays):
    """fn on hl cuda tensors: the value and every input's gradient for upstream ones-like
    random weights (the same for torch)."""
    xs = [hl.tensor(a, device="cuda", requires_grad=True) for a in arrays]
    y = fn(*xs)
    w = np.random.default_rng(9).standard_normal(y.shape)
    (y * hl.tensor(w, device="cuda")).sum().backward()
    return [y.numpy()] + [x.grad.numpy() for x in xs], w


def _torch_grad(fn, w, *arrays):
    ts = [torch.from_numpy(a).requires_grad_() for a in arrays]
    y = fn(*ts)
    (y * torch.from_numpy(w)).sum().backward()
    return [y.detach().numpy()] + [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_softmax_rows(name):
    x = np.random.default_rng(0).standard_normal((ROWS, COLS)) * 4
    got, w = _grad(lambda t: getattr(hl, name)(t, axis=-1), x)
    want = _torch_grad(lambda t: getattr(torch, name)(t, dim=-1), w, x)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, **TOL)


def test_cross_entropy_rows_with_labels_and_ignore_index():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((ROWS, COLS)) * 3
    labels = rng.integers(0, COLS, ROWS)
    labels[[3, 20]] = -100
    logits = hl.tensor(x, device="cuda", requires_grad=True)
    loss = hl.softmax_cross_entropy(logits, hl.tensor(labels, device="cuda"))
    loss.backward()
    tx = torch.from_numpy(x).requires_grad_()
    want = F.cross_entropy(tx, torch.from_numpy(labels), ignore_index=-100)
    want.backward()
    np.testing.assert_allclose(loss.numpy(), want.detach().numpy(), **TOL)
    np.testing.assert_allclose(logits.grad.numpy(), tx.grad.numpy(), **TOL)


def test_cross_entropy_rows_with_probabilities():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((ROWS, COLS))
    p = rng.random((ROWS, COLS))
    p /= p.sum(1, keepdims=True)
    got, w = _grad(lambda a, b: hl.softmax_cross_entropy(a, b), x, p)
    want = _torch_grad(lambda a, b: F.cross_entropy(a, b), w, x, p)
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, **TOL)


def test_layer_norm_rows():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((ROWS, COLS)) * 2 + 7
    g, b = rng.standard_normal(COLS), rng.standard_normal(COLS)
    got, w = _grad(lambda a, s, t: hl.layer_norm(a, (COLS,), s, t), x, g, b)
    want = _torch_grad(lambda a, s, t: F.layer_norm(a, (COLS,), s, t), w, x, g, b)
    for name, gg, r in zip(("y", "dx", "dweight", "dbias"), got, want):
        np.testing.assert_allclose(gg, r, err_msg=name, **TOL)


def test_a_nan_row_stays_nan_and_runs_repeat_bit_for_bit():
    x = np.random.default_rng(4).standard_normal((ROWS, COLS)).astype(np.float32)
    x[5, 700] = np.nan
    t = hl.tensor(x, device="cuda")
    first, again = hl.softmax(t, axis=-1).numpy(), hl.softmax(t, axis=-1).numpy()
    assert np.isnan(first[5]).all() and not np.isnan(np.delete(first, 5, 0)).any()
    assert first.tobytes() == again.tobytes()
    ln1 = hl.layer_norm(t, (COLS,)).numpy()
    assert ln1.tobytes() == hl.layer_norm(t, (COLS,)).numpy().tobytes()
