"""Every optimiser's trajectory against torch.optim's: fixed synthetic gradients on
parameters of several shapes, and a small least-squares problem solved through autograd.
Tolerance: rtol 1e-5, atol 1e-6 in float32 after 25 steps."""
import numpy as np
import pytest

import hl

from .common import (ATOL, CONFIG_IDS, CONFIGS, RTOL, hl_params, initial_values,
                     synthetic_grads)

torch = pytest.importorskip("torch")

STEPS = 25


def _torch_params(values):
    return [torch.tensor(v.copy(), requires_grad=True) for v in values]


@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_singa_style_update_matches_torch(rng, hl_name, torch_name, kw):
    values = initial_values(rng)
    grads = synthetic_grads(rng, STEPS)
    ps = hl_params(values)
    opt = getattr(hl.opt, hl_name)(**kw)
    tps = _torch_params(values)
    topt = getattr(torch.optim, torch_name)(tps, **kw)
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            opt.update(p, hl.tensor(g))
        opt.step()
        for tp, g in zip(tps, step_grads):
            tp.grad = torch.tensor(g)
        topt.step()
    for p, tp, v in zip(ps, tps, values):
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=RTOL, atol=ATOL)
        assert not np.allclose(p.numpy(), v)  # it moved
    assert opt.step_count == STEPS


@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_least_squares_with_autograd_matches_torch(rng, hl_name, torch_name, kw):
    """loss = mean((x * w + b - y) ** 2), w of shape (4,), b of shape (1,) (broadcast):
    SINGA-style backward_and_update against torch's backward + step."""
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 1)).astype(np.float32)
    w0 = rng.standard_normal(4).astype(np.float32)
    b0 = np.zeros(1, np.float32)
    w, b = hl_params([w0, b0])
    opt = getattr(hl.opt, hl_name)(**kw)
    tw, tb = _torch_params([w0, b0])
    topt = getattr(torch.optim, torch_name)([tw, tb], **kw)
    hx, hy, tx, ty = hl.tensor(x), hl.tensor(y), torch.tensor(x), torch.tensor(y)
    for _ in range(STEPS):
        opt.backward_and_update(((hx * w + b - hy) ** 2).mean())
        topt.zero_grad()
        ((tx * tw + tb - ty) ** 2).mean().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS[1::3], ids=CONFIG_IDS[1::3])
def test_pytorch_style_step_matches_torch(rng, hl_name, torch_name, kw):
    """params= given; loss.backward() fills .grad; step() updates; zero_grad() clears."""
    x = rng.standard_normal((8, 3)).astype(np.float32)
    y = rng.standard_normal((8, 3)).astype(np.float32)
    w0 = rng.standard_normal(3).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    w, b = hl_params([w0, b0])
    opt = getattr(hl.opt, hl_name)(**kw, params={"w": w, "b": b})
    tw, tb = _torch_params([w0, b0])
    topt = getattr(torch.optim, torch_name)([tw, tb], **kw)
    hx, hy, tx, ty = hl.tensor(x), hl.tensor(y), torch.tensor(x), torch.tensor(y)
    for _ in range(STEPS):
        opt.zero_grad()
        assert w.grad is None and b.grad is None
        ((hx * w + b - hy) ** 2).mean().backward()
        opt.step()
        topt.zero_grad()
        ((tx * tw + tb - ty) ** 2).mean().backward()
        topt.step()
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_optimiser_call_is_backward_and_update(rng):
    w0 = rng.standard_normal(5).astype(np.float32)
    runs = []
    for use_call in (False, True):
        (w,) = hl_params([w0])
        opt = hl.opt.SGD(lr=0.1, momentum=0.9)
        for _ in range(3):
            loss = ((w - 1.0) ** 2).sum()
            opt(loss) if use_call else opt.backward_and_update(loss)
        runs.append(w.numpy().copy())
    np.testing.assert_array_equal(runs[0], runs[1])


def test_float64_parameters_match_torch(rng):
    p0 = rng.standard_normal((4, 3))
    grads = [rng.standard_normal((4, 3)) for _ in range(STEPS)]
    p = hl.Tensor(p0.copy(), requires_grad=True, name="w")
    opt = hl.opt.Adam(lr=0.05)
    tp = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.Adam([tp], lr=0.05)
    for g in grads:
        opt.update(p, hl.tensor(g))
        opt.step()
        tp.grad = torch.tensor(g)
        topt.step()
    assert p.dtype is hl.float64
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-12, atol=1e-14)

