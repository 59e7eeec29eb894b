"""Optimiser states: exact resume from get_states/set_states, the keys, the errors, and the
guarantee that updates keep each parameter's object and memory."""
import numpy as np
import pytest

import hl

from .common import CONFIG_IDS, CONFIGS, hl_params, initial_values, synthetic_grads

N, M = 7, 6


def _run(opt, ps, grads):
    for step_grads in grads:
        for p, g in zip(ps, step_grads):
            opt.update(p, hl.tensor(g))
        opt.step()


def _make(hl_name, kw, schedule=True):
    kw = dict(kw)
    if schedule:  # a schedule too, so resuming must also restore the step it reads
        kw["lr"] = hl.opt.LinearWarmup(3, hl.opt.StepDecay(kw["lr"], step_size=4, gamma=0.5))
    return getattr(hl.opt, hl_name)(**kw)


@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
@pytest.mark.parametrize("as_numpy", [False, True], ids=["tensors", "numpy"])
def test_resume_is_exact(rng, hl_name, torch_name, kw, as_numpy):
    values = initial_values(rng)
    grads = synthetic_grads(rng, N + M)
    ps = hl_params(values)
    opt = _make(hl_name, kw)
    _run(opt, ps, grads[:N])
    saved_states = opt.get_states()
    saved_params = [p.numpy().copy() for p in ps]
    _run(opt, ps, grads[N:])

    if as_numpy:  # as a states archive would give them back
        saved_states = {k: (np.array(v.numpy()) if isinstance(v, hl.Tensor) else v)
                        for k, v in saved_states.items()}
    ps2 = hl_params(saved_params)
    opt2 = _make(hl_name, kw)
    opt2.set_states(saved_states)
    assert opt2.step_count == N
    _run(opt2, ps2, grads[N:])
    for p, p2 in zip(ps, ps2):
        np.testing.assert_array_equal(p.numpy(), p2.numpy())  # bit for bit


def test_states_are_snapshots_and_keyed_by_name(rng):
    ps = hl_params(initial_values(rng))
    opt = hl.opt.Adam(lr=0.1)
    _run(opt, ps, synthetic_grads(rng, 2))
    states = opt.get_states()
    assert states["step"] == 2
    assert set(states) == {"step"} | {f"p{i}:{s}" for i in range(len(ps))
                                      for s in ("step", "exp_avg", "exp_avg_sq")}
    assert states["p0:step"] == 2
    before = states["p0:exp_avg"].numpy().copy()
    _run(opt, ps, synthetic_grads(rng, 1))
    np.testing.assert_array_equal(states["p0:exp_avg"].numpy(), before)  # a copy, not live


class _PlateauLike(hl.opt.Schedule):
    """A schedule with state of its own (a scale another part of a run may change)."""

    def __init__(self):
        self.scale = 1.0

    def value(self, step):
        return 0.1 * self.scale

    def get_states(self):
        return {"scale": self.scale}

    def set_states(self, states):
        self.scale = states["scale"]


def test_stateful_schedule_round_trips():
    p = hl.Tensor(np.ones(2, np.float32), name="w")
    sched = _PlateauLike()
    opt = hl.opt.SGD(lr=sched)
    opt.update(p, hl.ones(2))
    opt.step()
    sched.scale = 0.25
    states = opt.get_states()
    assert states == {"step": 1, "lr_schedule.scale": 0.25}
    opt2 = hl.opt.SGD(lr=_PlateauLike())
    opt2.set_states(states)
    assert opt2.lr == pytest.approx(0.025) and opt2.step_count == 1


def test_layer_style_names_and_unnamed_fallback(rng):
    named = hl.Tensor(np.ones(3, np.float32), name="conv1.W")
    unnamed = [hl.Tensor(np.ones(2, np.float32)), hl.Tensor(np.ones(4, np.float32))]
    opt = hl.opt.SGD(lr=0.1, momentum=0.9)
    for p in (unnamed[1], named, unnamed[0]):  # first-update order gives unnamed keys
        opt.update(p, hl.ones_like(p))
    assert sorted(opt.get_states()) == ["conv1.W:momentum_buffer", "param0:momentum_buffer",
                                        "param1:momentum_buffer", "step"]
    assert opt.get_states()["param0:momentum_buffer"].shape == (4,)
    # PyTorch style: the dict key, or the position in the list, names an unnamed parameter
    opt = hl.opt.SGD(lr=0.1, momentum=0.9, params={"enc.w": unnamed[0]})
    unnamed[0].grad = hl.ones(2)
    opt.step()
    assert "enc.w:momentum_buffer" in opt.get_states()
    opt = hl.opt.SGD(lr=0.1, momentum=0.9, params=[named, unnamed[1]])
    named.grad, unnamed[1].grad = hl.ones(3), hl.ones(4)
    opt.step()
    assert {"conv1.W:momentum_buffer", "param1:momentum_buffer"} <= set(opt.get_states())


def test_two_parameters_with_one_name_are_refused():
    a = hl.Tensor(np.ones(3, np.float32), name="W")
    b = hl.Tensor(np.ones(3, np.float32), name="W")
    opt = hl.opt.SGD(lr=0.1, momentum=0.9)
    opt.update(a, hl.ones(3))
    with pytest.raises(hl.errors.ValueError, match="two different parameters are named 'W'"):
        opt.update(b, hl.ones(3))


def test_same_parameter_twice_and_a_reshaped_successor():
    w = hl.Tensor(np.ones(3, np.float32), name="w")
    with pytest.raises(hl.errors.ValueError, match="'w' is given twice"):
        hl.opt.SGD(lr=0.1, params=[w, w])
    opt = hl.opt.SGD(lr=0.1, momentum=0.9)
    opt.update(w, hl.ones(3))
    del w  # the layer made a new, larger parameter under the same name
    w = hl.Tensor(np.ones(5, np.float32), name="w")
    with pytest.raises(hl.errors.ShapeError, match=r"w:momentum_buffer has shape \(3,\)"):
        opt.update(w, hl.ones(5))


def test_set_states_errors():
    p = hl.Tensor(np.ones(3, np.float32), name="w")
    opt = hl.opt.Adam(lr=0.1, params=[p])
    with pytest.raises(hl.errors.ValueError, match="'step'"):
        opt.set_states({})
    with pytest.raises(hl.errors.ValueError, match=r"unexpected entries \['w:velocity'\]"):
        opt.set_states({"step": 1, "w:velocity": np.zeros(3)})
    with pytest.raises(hl.errors.ValueError, match=r"unexpected entries \['v:exp_avg'\]"):
        opt.set_states({"step": 1, "v:exp_avg": np.zeros(3)})
    opt.set_states({"step": 1, "w:step": 1, "w:exp_avg": np.zeros(5),
                    "w:exp_avg_sq": np.zeros(5)})
    p.grad = hl.ones(3)
    with pytest.raises(hl.errors.ShapeError, match=r"w:exp_avg.*\(5,\).*\(3,\)"):
        opt.step()


def test_gradient_shape_mismatch():
    p = hl.Tensor(np.ones(3, np.float32), name="w")
    with pytest.raises(hl.errors.ShapeError, match=r"w has shape \(4,\).*\(3,\)"):
        hl.opt.SGD(lr=0.1).update(p, hl.ones(4))


@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_update_keeps_the_parameter_object_and_memory(rng, hl_name, torch_name, kw):
    ps = hl_params(initial_values(rng)[:2])
    opt = getattr(hl.opt, hl_name)(**kw)
    ids = [id(p) for p in ps]
    views = [p.numpy() for p in ps]  # numpy views over the parameters' memory
    before = [v.copy() for v in views]
    layer_refs = list(ps)  # what a layer holds
    for _ in range(3):
        for p in ps:
            opt.update(p, hl.ones_like(p))
        opt.step()
    for p, i, v, b, ref in zip(ps, ids, views, before, layer_refs):
        assert id(p) == i and ref is p
        np.testing.assert_array_equal(v, p.numpy())  # the view saw the update
        assert not np.array_equal(v, b)
        assert p.requires_grad and p.name is not None


def test_zero_grad_clears_seen_parameters_singa_style():
    p = hl.Tensor(np.ones(3, np.float32), requires_grad=True, stores_grad=True, name="w")
    opt = hl.opt.SGD(lr=0.1)
    opt.backward_and_update((p * p).sum())
    p.grad = hl.ones(3)
    opt.zero_grad()
    assert p.grad is None


def test_optim_alias():
    assert hl.optim is hl.opt
    assert hl.optim.RMSprop is hl.opt.RMSProp and hl.optim.Adagrad is hl.opt.AdaGrad
