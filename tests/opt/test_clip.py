"""Gradient clipping by global norm against torch.nn.utils.clip_grad_norm_ (rtol 1e-6 in
float32), and the optimisers' clip_norm argument."""
import numpy as np
import pytest

import hl

from .common import RTOL, ATOL, SHAPES

torch = pytest.importorskip("torch")


def _grads(rng, scale):
    return [(scale * rng.standard_normal(s)).astype(np.float32) for s in SHAPES]


@pytest.mark.parametrize("scale,max_norm,norm_type", [
    (1.0, 0.5, 2.0),     # clipped
    (0.01, 5.0, 2.0),    # below the limit: unchanged (factor 1)
    (2.0, 1.0, float("inf")),
    (1.0, 0.7, 1.0),
])
def test_clip_params_grads_matches_torch(rng, scale, max_norm, norm_type):
    grads = _grads(rng, scale)
    ps = [hl.Tensor(np.zeros(s, np.float32), requires_grad=True) for s in SHAPES]
    for p, g in zip(ps, grads):
        p.grad = hl.tensor(g)
    ps.append(hl.Tensor(np.zeros(3, np.float32), requires_grad=True))  # no grad: skipped
    tps = [torch.zeros(s, requires_grad=True) for s in SHAPES]
    for tp, g in zip(tps, grads):
        tp.grad = torch.tensor(g)
    total = hl.opt.clip_grad_norm(ps, max_norm, norm_type=norm_type)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, max_norm, norm_type=norm_type)
    assert float(total) == pytest.approx(float(ttotal), rel=1e-6)
    for p, tp in zip(ps, tps):
        np.testing.assert_allclose(p.grad.numpy(), tp.grad.numpy(), rtol=1e-6, atol=1e-7)
    assert ps[-1].grad is None


def test_clip_bare_gradients_in_place(rng):
    grads = _grads(rng, 3.0)
    hgs = [hl.tensor(g) for g in grads]
    views = [g.numpy() for g in hgs]  # in place: the same memory shows the clipped values
    tgs = [torch.tensor(g, requires_grad=False) for g in grads]
    tps = [torch.zeros(g.shape, requires_grad=True) for g in grads]
    for tp, tg in zip(tps, tgs):
        tp.grad = tg
    total = hl.opt.clip_grad_norm(hgs, 1.0)
    ttotal = torch.nn.utils.clip_grad_norm_(tps, 1.0)
    assert float(total) == pytest.approx(float(ttotal), rel=1e-6)
    for v, tp in zip(views, tps):
        np.testing.assert_allclose(v, tp.grad.numpy(), rtol=1e-6, atol=1e-7)
    total_after = np.sqrt(sum(float((v.astype(np.float64) ** 2).sum()) for v in views))
    assert total_after == pytest.approx(1.0, rel=1e-5)


def test_clip_after_backward_with_shared_gradient():
    """(w + b).sum() passes one broadcast dy to both w and b; the backward walk hands each
    leaf a gradient of its own, so clipping scales each exactly once, also in place."""
    w = hl.Tensor(np.zeros(4, np.float32), requires_grad=True, stores_grad=True)
    b = hl.Tensor(np.zeros(4, np.float32), requires_grad=True, stores_grad=True)
    (w + b).sum().backward()
    total = hl.opt.clip_grad_norm([w, b], 1.0)
    assert float(total) == pytest.approx(np.sqrt(8.0), rel=1e-6)
    np.testing.assert_allclose(w.grad.numpy(), np.full(4, 1 / np.sqrt(8)), rtol=1e-5)
    np.testing.assert_allclose(b.grad.numpy(), np.full(4, 1 / np.sqrt(8)), rtol=1e-5)
    pairs = list(hl.autograd.backward((w + b).sum()))
    total = hl.opt.clip_grad_norm([g for _, g in pairs], 1.0)
    assert float(total) == pytest.approx(np.sqrt(8.0), rel=1e-6)
    for _, g in pairs:
        np.testing.assert_allclose(g.numpy(), np.full(4, 1 / np.sqrt(8)), rtol=1e-5)
    e = hl.ones(1).expand(4)   # a broadcast view a user made: refused, not scaled 4 times
    with pytest.raises(hl.errors.ValueError):
        hl.opt.clip_grad_norm([e], 1.0)


def test_clip_bad_arguments():
    with pytest.raises(hl.errors.ValueError, match="max_norm"):
        hl.opt.clip_grad_norm([hl.ones(3)], 0.0)
    p = hl.Tensor(np.ones(3, np.float32), requires_grad=True)
    p.grad = hl.ones(3)
    with pytest.raises(hl.errors.ValueError, match="not a mix"):
        hl.opt.clip_grad_norm([p, hl.ones(3)], 1.0)
    with pytest.raises(hl.errors.ValueError, match="clip_norm"):
        hl.opt.SGD(lr=0.1, clip_norm=-1)


@pytest.mark.parametrize("style", ["singa", "pytorch"])
def test_optimiser_clip_norm_matches_torch(rng, style):
    """SGD with momentum and clip_norm=0.5 on mean((x * w + b - y)**2), against torch with
    clip_grad_norm_ before each step. Both the SINGA path (gradients gathered from backward) and the PyTorch
    path (step() from .grad) clip by the norm over all gradients of the step."""
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = (5 * rng.standard_normal((16, 1))).astype(np.float32)  # large errors: clipping acts
    w0 = rng.standard_normal(4).astype(np.float32)
    b0 = np.zeros(1, np.float32)
    w = hl.Tensor(w0.copy(), requires_grad=True, stores_grad=True, name="w")
    b = hl.Tensor(b0.copy(), requires_grad=True, stores_grad=True, name="b")
    params = [w, b] if style == "pytorch" else None
    opt = hl.opt.SGD(lr=0.1, momentum=0.9, clip_norm=0.5, params=params)
    tw, tb = (torch.tensor(v.copy(), requires_grad=True) for v in (w0, b0))
    topt = torch.optim.SGD([tw, tb], lr=0.1, momentum=0.9)
    hx, hy, tx, ty = hl.tensor(x), hl.tensor(y), torch.tensor(x), torch.tensor(y)
    clipped = 0
    for _ in range(20):
        loss = ((hx * w + b - hy) ** 2).mean()
        if style == "pytorch":
            opt.zero_grad()
            loss.backward()
            opt.step()
        else:
            opt.backward_and_update(loss)
        topt.zero_grad()
        ((tx * tw + tb - ty) ** 2).mean().backward()
        clipped += float(torch.nn.utils.clip_grad_norm_([tw, tb], 0.5)) > 0.5
        topt.step()
    assert clipped >= 10
    np.testing.assert_allclose(w.numpy(), tw.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(b.numpy(), tb.detach().numpy(), rtol=RTOL, atol=ATOL)
