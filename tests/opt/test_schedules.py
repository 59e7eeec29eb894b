"""Learning-rate schedules against their formulas and torch.optim.lr_scheduler, and how an
optimiser reads them (the update after k calls to step() uses schedule(k))."""
import math

import numpy as np
import pytest

import hl
from hl.opt import Constant, CosineDecay, ExponentialDecay, LinearWarmup, StepDecay

STEPS = range(0, 40)


def test_constant():
    s = Constant(0.3)
    assert [s(k) for k in (0, 1, 1000)] == [0.3, 0.3, 0.3]


def test_step_decay_formula():
    s = StepDecay(0.5, step_size=7, gamma=0.3)
    for k in STEPS:
        assert s(k) == pytest.approx(0.5 * 0.3 ** (k // 7), rel=1e-15)


@pytest.mark.parametrize("staircase", [False, True])
def test_exponential_decay_formula(staircase):
    s = ExponentialDecay(0.2, gamma=0.5, decay_steps=10, staircase=staircase)
    for k in STEPS:
        p = k // 10 if staircase else k / 10
        assert s(k) == pytest.approx(0.2 * 0.5 ** p, rel=1e-15)
    assert s(10) == pytest.approx(0.1)


def test_cosine_decay_formula_and_floor():
    s = CosineDecay(1.0, total_steps=20, min_lr=0.1)
    assert s(0) == pytest.approx(1.0)
    assert s(10) == pytest.approx(0.55)
    assert s(20) == pytest.approx(0.1)
    assert s(35) == pytest.approx(0.1)  # stays at the floor past the end
    for k in range(21):
        assert s(k) == pytest.approx(0.1 + 0.9 * (1 + math.cos(math.pi * k / 20)) / 2)


def test_linear_warmup_then_schedule():
    s = LinearWarmup(5, CosineDecay(1.0, total_steps=10), start_factor=0.2)
    assert s(0) == pytest.approx(0.2)
    assert s(1) == pytest.approx(0.2 + 0.8 * 1 / 5)
    assert s(4) == pytest.approx(0.2 + 0.8 * 4 / 5)
    assert s(5) == pytest.approx(1.0)         # warm-up over: the cosine starts at its step 0
    assert s(10) == pytest.approx(0.5)        # cosine's step 5 of 10
    assert s(15) == pytest.approx(0.0, abs=1e-15)
    assert LinearWarmup(4, 0.1)(2) == pytest.approx(0.05)  # a constant after, start 0


def test_bad_schedule_arguments():
    with pytest.raises(hl.errors.ValueError, match="step_size"):
        StepDecay(0.1, step_size=0)
    with pytest.raises(hl.errors.ValueError, match="total_steps"):
        CosineDecay(0.1, total_steps=-3)
    with pytest.raises(hl.errors.ValueError, match="learning rate"):
        Constant(-1.0)
    with pytest.raises(hl.errors.ValueError, match="start_factor"):
        LinearWarmup(3, 0.1, start_factor=2.0)
    with pytest.raises(hl.errors.ValueError, match="params="):
        hl.opt.SGD([hl.zeros(3)])  # PyTorch's positional params


def test_callable_schedule_and_its_checks():
    opt = hl.opt.SGD(lr=lambda step: 0.1 / (1 + step))
    assert opt.lr == pytest.approx(0.1)
    opt.step()
    opt.step()
    assert opt.lr == pytest.approx(0.1 / 3)
    bad = hl.opt.SGD(lr=lambda step: float("nan"))
    with pytest.raises(hl.errors.ValueError, match="returned nan"):
        bad.lr


def test_update_k_uses_schedule_at_k():
    """With SGD (no momentum), param moves by -lr_k * grad at update k."""
    sched = StepDecay(1.0, step_size=2, gamma=0.5)
    p = hl.Tensor(np.zeros(1, np.float32), name="p")
    opt = hl.opt.SGD(lr=sched)
    moves = []
    for k in range(6):
        before = float(p.numpy()[0])
        opt.update(p, hl.ones(1))
        opt.step()
        moves.append(before - float(p.numpy()[0]))
    np.testing.assert_allclose(moves, [1, 1, 0.5, 0.5, 0.25, 0.25], rtol=1e-6)


def _torch_lrs(make_scheduler, n):
    torch = pytest.importorskip("torch")
    p = torch.zeros(1, requires_grad=True)
    opt = torch.optim.SGD([p], lr=0.4)
    sched = make_scheduler(torch.optim.lr_scheduler, opt)
    lrs = []
    for _ in range(n):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs


@pytest.mark.parametrize("ours,theirs", [
    (StepDecay(0.4, step_size=3, gamma=0.7),
     lambda lr, o: lr.StepLR(o, step_size=3, gamma=0.7)),
    (ExponentialDecay(0.4, gamma=0.93),
     lambda lr, o: lr.ExponentialLR(o, gamma=0.93)),
    (CosineDecay(0.4, total_steps=25, min_lr=0.01),
     lambda lr, o: lr.CosineAnnealingLR(o, T_max=25, eta_min=0.01)),
    (LinearWarmup(10, 0.4, start_factor=0.25),
     lambda lr, o: lr.LinearLR(o, start_factor=0.25, total_iters=10)),
], ids=["step", "exponential", "cosine", "warmup"])
def test_schedules_match_torch_lr_scheduler(ours, theirs):
    n = 26  # the cosine through its whole period (torch's would rise again after 25)
    # torch updates some schedules recursively (lr *= factor), so they drift by rounding
    np.testing.assert_allclose([ours(k) for k in range(n)], _torch_lrs(theirs, n), rtol=1e-9,
                               atol=1e-12)


def test_sgd_with_schedule_matches_torch_trajectory(rng):
    torch = pytest.importorskip("torch")
    p0 = rng.standard_normal(6).astype(np.float32)
    grads = [rng.standard_normal(6).astype(np.float32) for _ in range(20)]
    p = hl.Tensor(p0.copy(), name="p")
    opt = hl.opt.SGD(lr=LinearWarmup(4, CosineDecay(0.3, total_steps=16), start_factor=0.5),
                     momentum=0.9)
    tp = torch.tensor(p0.copy(), requires_grad=True)
    topt = torch.optim.SGD([tp], lr=0.3, momentum=0.9)
    tsched = torch.optim.lr_scheduler.SequentialLR(topt, [
        torch.optim.lr_scheduler.LinearLR(topt, start_factor=0.5, total_iters=4),
        torch.optim.lr_scheduler.CosineAnnealingLR(topt, T_max=16)], milestones=[4])
    for g in grads:
        opt.update(p, hl.tensor(g))
        opt.step()
        tp.grad = torch.tensor(g)
        topt.step()
        tsched.step()
    np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-5, atol=1e-6)
