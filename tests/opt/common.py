"""Shared material for the optimiser tests: the optimiser configurations compared with
torch.optim, builders for the same parameters in hl and torch, and the trajectories of the
one-pass update kernel's tests (tests/opt/test_fused_rules.py on the CPU, tests/cuda/
test_fused.py and test_optimizer_moves.py on cuda)."""
import numpy as np

import hl

# (hl class name, torch class name, keyword arguments valid for both)
CONFIGS = [
    ("SGD", "SGD", dict(lr=0.1)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", "SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.05)),
    ("Adam", "Adam", dict(lr=0.01)),
    ("Adam", "Adam", dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, weight_decay=0.1)),
    ("Adam", "Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", "AdamW", dict(lr=0.01)),
    ("AdamW", "AdamW", dict(lr=0.01, weight_decay=0.3, amsgrad=True)),
    ("RMSProp", "RMSprop", dict(lr=0.01)),
    ("RMSProp", "RMSprop", dict(lr=0.005, alpha=0.9, momentum=0.7, weight_decay=0.02)),
    ("RMSProp", "RMSprop", dict(lr=0.005, centered=True, momentum=0.5, eps=1e-6)),
    ("AdaGrad", "Adagrad", dict(lr=0.1)),
    ("AdaGrad", "Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.01,
                                initial_accumulator_value=0.2)),
]

CONFIG_IDS = [f"{h}-{i}" for i, (h, _, _) in enumerate(CONFIGS)]

SHAPES = [(3, 4), (5,), (2, 3, 2), ()]

# float32 trajectories agree to rounding: both sides run the same float32 operations in the
# same order, so differences are a few ulps per step.
RTOL, ATOL = 1e-5, 1e-6


def initial_values(rng):
    return [rng.standard_normal(s).astype(np.float32) for s in SHAPES]


def hl_params(values, names=True):
    return [hl.Tensor(v.copy(), requires_grad=True, stores_grad=True,
                      name=f"p{i}" if names else None) for i, v in enumerate(values)]


def synthetic_grads(rng, steps):
    return [[rng.standard_normal(s).astype(np.float32) for s in SHAPES] for _ in range(steps)]


def hard_grads(rng, dtype, shapes, steps):
    """Per step, one gradient per shape holding what the update kernel must get right as the
    element-wise sequence does: zeros (AdaGrad's sqrt(0) + eps), huge and tiny magnitudes,
    and in tensors over 100 elements NaN and infinities (AMSGrad's maximum keeps NaN)."""
    out = []
    for _ in range(steps):
        step = []
        for s in shapes:
            g = rng.standard_normal(s)
            if g.ndim:
                flat = g.reshape(-1)
                flat[::7] = 0.0
                flat[1::11] *= 1e6
                flat[2::13] *= 1e-20
                if g.size > 100:
                    flat[3], flat[5], flat[6] = np.nan, np.inf, -np.inf
            step.append(g.astype(dtype))
        out.append(step)
    return out


def snapshot(params, opt):
    """Copies of the parameters' values and of the optimiser's tensor states."""
    states = {k: v.numpy().copy() for k, v in opt.get_states().items()
              if isinstance(v, hl.Tensor)}
    return [p.numpy().copy() for p in params], states


def trajectory(hl_name, kw, values, grads, monkeypatch, fused=True, devices=("cpu",),
               skips=None):
    """snapshot() after one optimiser (hl.opt.<hl_name>(**kw)) has updated parameters named
    p0, p1, ... (from values) with grads, one opt.step() per step.
    - fused=False: the rules' element-wise sequence (as on a backend without the kernel);
    - devices: the device of each step (the last one repeats); a parameter moves in place
      to the next device before its update, as Module.to moves it;
    - skips: one bool per step: the updates run inside ops.skipping_when(a 0-d bool on the
      device), every one must read the flag, and a skipped step must write nothing."""
    with monkeypatch.context() as m:
        if not fused:
            m.setattr(hl.ops, "optim_update_available", lambda param, grad=None: False)
        ps = [hl.Tensor(v.copy(), name=f"p{i}", device=devices[0]) for i, v in enumerate(values)]
        assert not fused or hl.ops.optim_update_available(ps[0])
        opt = getattr(hl.opt, hl_name)(**kw)
        for k, step in enumerate(grads):
            device = devices[min(k, len(devices) - 1)]

            def update():
                for p, g in zip(ps, step):
                    p._move_to(device)
                    opt.update(p, hl.tensor(g, device=device))
            if skips is None:
                update()
            else:
                before = snapshot(ps, opt)
                flag = hl.tensor(np.array(skips[k]), device=device)
                with hl.ops.skipping_when(flag) as done:
                    update()
                assert done == {id(p) for p in ps}  # every update read the flag
                if skips[k]:
                    after = snapshot(ps, opt)
                    assert before[1].keys() == after[1].keys()
                    for a, b in zip(before[0] + list(before[1].values()),
                                    after[0] + list(after[1].values())):
                        np.testing.assert_array_equal(a, b)
            opt.step()
        return snapshot(ps, opt)


def assert_same_trajectory(got, want):
    """Bit for bit (NaN where NaN): parameters, state keys and states."""
    for a, b in zip(got[0], want[0]):
        np.testing.assert_array_equal(a, b)
    assert got[1].keys() == want[1].keys()
    for k in got[1]:
        np.testing.assert_array_equal(got[1][k], want[1][k], err_msg=k)
