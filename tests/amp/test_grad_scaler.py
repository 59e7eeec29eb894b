"""hl.amp.GradScaler against torch.amp.GradScaler: the same overflow pattern gives the same
sequence of scales, skipped steps and parameters (PyTorch-style steps), the SINGA-style
backward_and_update follows the same rule, and misuse raises as torch does."""
import numpy as np
import pytest

import hl
from hl.amp import GradScaler

torch = pytest.importorskip("torch")

# inf or NaN in the gradient at these steps (None: finite)
PATTERN = [None, None, "inf", None, None, None, None, "nan", "inf", None, None, None, None, None]


def _grad_value(step, kind):
    return {None: 0.25 + 0.01 * step, "inf": float("inf"), "nan": float("nan")}[kind]


def test_state_sequence_matches_torch():
    kw = dict(init_scale=1024.0, growth_factor=2.0, backoff_factor=0.25, growth_interval=3)
    ours, theirs = GradScaler("cpu", **kw), torch.amp.GradScaler("cpu", **kw)
    p = hl.tensor(np.ones(4, np.float32), requires_grad=True)
    opt = hl.opt.SGD(lr=0.1, params=[p])
    tp = torch.nn.Parameter(torch.ones(4))
    topt = torch.optim.SGD([tp], lr=0.1)
    for step, kind in enumerate(PATTERN):
        g = _grad_value(step, kind)
        ours.scale(hl.tensor(1.0))
        theirs.scale(torch.tensor(1.0))  # torch makes its scale tensor on the first scale()
        # the gradient as backward would leave it: scaled
        p.grad = hl.tensor(np.full(4, g * ours.get_scale(), np.float32))
        tp.grad = torch.full((4,), g * theirs.get_scale())
        ours.step(opt)
        theirs.step(topt)
        ours.update()
        theirs.update()
        assert ours.get_scale() == theirs.get_scale(), step
        assert ours.state_dict()["_growth_tracker"] == theirs.state_dict()["_growth_tracker"]
        np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-6)
    # three backoffs (one alone, two in a row) and two growths after 3 clean steps each
    assert ours.get_scale() == 1024.0 * 0.25 ** 3 * 2 ** 2


def test_scale_unscale_and_explicit_unscale():
    s = GradScaler("cpu", init_scale=8.0)
    p = hl.tensor(np.ones(3, np.float32), requires_grad=True)
    opt = hl.opt.SGD(lr=1.0, params=[p])
    loss = s.scale(hl.autograd.functional.sum(p * p))
    assert float(loss.item()) == 24.0
    loss.backward()
    np.testing.assert_array_equal(p.grad.numpy(), [16.0, 16.0, 16.0])
    s.unscale_(opt)  # e.g. to clip the true gradients before step
    np.testing.assert_array_equal(p.grad.numpy(), [2.0, 2.0, 2.0])
    with pytest.raises(hl.errors.ValueError, match="already been called"):
        s.unscale_(opt)
    s.step(opt)
    with pytest.raises(hl.errors.ValueError, match="already been called since the last"):
        s.step(opt)
    s.update()
    np.testing.assert_array_equal(p.numpy(), [-1.0, -1.0, -1.0])
    with pytest.raises(hl.errors.ValueError, match="no inf checks"):
        s.update()
    s.update(new_scale=3.0)
    assert s.get_scale() == 3.0


def test_singa_style_backward_and_update_skips_and_backs_off():
    s = GradScaler("cpu", init_scale=2.0 ** 16, growth_interval=2)
    p = hl.tensor(np.ones(2, np.float32), requires_grad=True)
    p.stores_grad = True  # a parameter, as layers make them (SINGA's backward yields these)
    opt = hl.opt.SGD(lr=0.5)
    big = hl.tensor(np.full(2, 1e35, np.float32))  # times 2^16 overflows float32
    assert not s.backward_and_update(opt, hl.autograd.functional.sum(p * big))
    assert s.get_scale() == 2.0 ** 15 and opt.step_count == 0
    np.testing.assert_array_equal(p.numpy(), [1.0, 1.0])  # skipped
    small = hl.tensor(np.full(2, 0.5, np.float32))
    for _ in range(2):
        assert s.backward_and_update(opt, hl.autograd.functional.sum(p * small))
    np.testing.assert_allclose(p.numpy(), [0.5, 0.5])  # two steps of lr 0.5 * 0.5, unscaled
    assert s.get_scale() == 2.0 ** 16 and opt.step_count == 2  # grew after 2 clean steps


def test_disabled_scaler_is_transparent():
    s = GradScaler("cpu", enabled=False)
    t = hl.tensor(np.ones(2, np.float32))
    assert s.scale(t) is t and s.get_scale() == 1.0 and s.state_dict() == {}
    with pytest.raises(hl.errors.ValueError, match="growth_factor"):
        GradScaler(growth_factor=1.0)
