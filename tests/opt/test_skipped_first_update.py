"""A momentum buffer whose first update is skipped by hl.amp's flag (ops.skipping_when, as
graph-mode loss scaling runs it) must not be read uninitialised by the next update: the
trajectory equals PyTorch's SGD that never saw the skipped step (float32, RTOL/ATOL of
tests/opt/common.py): the skipped update leaves no buffer, so the next one is the first."""
import numpy as np
import pytest
import torch

import hl
from tests.opt.common import ATOL, RTOL, initial_values

SGD_MOMENTUM = [dict(lr=0.05, momentum=0.9), dict(lr=0.05, momentum=0.8, nesterov=True,
                                                  weight_decay=0.05),
                dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)]


def torch_sgd(kw, values, grads):
    ps = [torch.tensor(v.copy(), requires_grad=True) for v in values]
    opt = torch.optim.SGD(ps, **kw)
    for step in grads:
        for p, g in zip(ps, step):
            p.grad = torch.tensor(g)
        opt.step()
    return [p.detach().numpy() for p in ps]


@pytest.mark.parametrize("kw", SGD_MOMENTUM, ids=["momentum", "nesterov", "dampening"])
def test_a_skipped_first_update_leaves_the_next_one_exact(kw, monkeypatch):
    rng = np.random.default_rng(3)
    values = initial_values(rng)
    # the skipped step's gradients are huge, as a scaled overflow's would be
    grads = [[rng.standard_normal(v.shape).astype(np.float32) * (1e30 if k == 0 else 1)
              for v in values] for k in range(4)]
    ps = [hl.Tensor(v.copy(), name=f"p{i}") for i, v in enumerate(values)]
    opt = hl.opt.SGD(**kw)
    for k, step in enumerate(grads):
        with hl.ops.skipping_when(hl.tensor(np.array(k == 0))):
            for p, g in zip(ps, step):
                opt.update(p, hl.tensor(g))
        if k == 0:  # the skipped step wrote no parameter and left no buffer
            for p, v in zip(ps, values):
                np.testing.assert_array_equal(p.numpy(), v)
            assert not [k for k in opt.get_states() if "momentum" in k]
        opt.step()
    params = [p.numpy() for p in ps]
    want = torch_sgd(kw, values, grads[1:])
    for got, ref in zip(params, want):
        np.testing.assert_allclose(got, ref, rtol=RTOL, atol=ATOL)
