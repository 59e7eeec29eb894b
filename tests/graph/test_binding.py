"""Graph mode binds each batch to its plans' input slots instead of copying it (issue 20, item
4): the plans read the caller's tensors in place, a training step's two plans (forward and loss,
then backward and update: fit) both follow one bind, a bound tensor the caller drops stays alive
while a plan points at it, and a wrong signature is a clear error. Reference: the eager twin
(graph mode must give the same bits) and numpy."""
import gc

import numpy as np
import pytest

import hl
from hl import _core, errors

from .models import batches, params, stats, twins


def _entry(model, what):
    (entry,) = [e for e in model._graph_runner().caches[what].entries.values()
                if e.plan is not None]
    return entry


def test_fresh_tensors_each_step_are_bound_and_match_eager(rng):
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.1, momentum=0.9))
    for x, y in batches(rng, 10):
        # a new tensor per step, for each twin: nothing is reused between steps
        out_e, loss_e = eager.train_one_batch(hl.tensor(x), hl.tensor(y))
        xt, yt = hl.tensor(x), hl.tensor(y)
        out_g, loss_g = graph.train_one_batch(xt, yt)
        np.testing.assert_array_equal(out_g.numpy(), out_e.numpy())
        assert loss_g.item() == loss_e.item()
    for k, v in params(eager).items():
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)
    assert stats(graph)["replayed"] == 8
    # the last step read xt itself: its slot points at xt's memory (no copy was made)
    slots = _entry(graph, "train_one_batch").plan.slots
    assert _core.shares_storage(slots[0]._h, xt._h)
    assert _core.shares_storage(slots[1]._h, yt._h)


def _model(graph):
    hl.manual_seed(3)
    # Linear on a 3-D batch: its weight gradient reads the batch through a view that the
    # backward recording makes, a tensor the forward plan never saw
    m = hl.Sequential([hl.layers.Linear(4), hl.layers.ReLU(), hl.layers.Flatten(),
                       hl.layers.Linear(3)])
    m.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9), loss="cross_entropy",
              jit_compile=graph)
    return m


def test_fit_binds_the_batch_for_forward_and_backward_plans(rng):
    """fit's step is two plans, and the backward reads the batch. Were only the forward plan
    retargeted by a bind (no hl_plan_link_inputs), the backward would read a stale batch and
    the weights would drift from eager's (checked: they do)."""
    x = rng.standard_normal((40, 3, 5)).astype(np.float32)
    y = rng.integers(0, 3, 40)
    runs = []
    for graph in (False, True):
        m = _model(graph)
        h = m.fit(x, y, batch_size=8, epochs=2, verbose=0, shuffle=True)
        runs.append((m, h.history))
    (me, he), (mg, hg) = runs
    assert hg == he
    for k, v in me.get_states().items():
        np.testing.assert_array_equal(mg.get_states()[k].numpy(), v.numpy(), err_msg=k)
    assert mg._graph_runner().stats()["fit"]["replayed"] == 10 - 2


def test_two_plans_follow_one_bind():
    """At the core: the second plan reads the first plan's input slot (as a step's backward
    reads the batch); after linking, binding the first retargets the second."""
    x = hl.tensor(np.zeros((3, 4), np.float32))
    _core.plan_begin()
    try:
        slot = _core.plan_input(x._h)
        y = x * 2.0
    finally:
        first = _core.plan_end()
    _core.plan_begin()
    try:
        z = x.reshape(4, 3) + 1.0  # a view of the slot made in the second recording
    finally:
        second = _core.plan_end()
    _core.plan_link_inputs(first, second)
    for k in range(3):
        a = np.arange(12, dtype=np.float32).reshape(3, 4) * (k + 1)
        _core.plan_bind(first, slot, hl.tensor(a)._h)  # the tensor is dropped at once
        gc.collect()
        junk = [hl.tensor(np.full((3, 4), 7e7, np.float32)) for _ in range(4)]  # reuse bait
        _core.plan_run(first)
        _core.plan_run(second)
        np.testing.assert_array_equal(y.numpy(), a * 2)
        np.testing.assert_array_equal(z.numpy(), a.reshape(4, 3) + 1)
        del junk
    with pytest.raises(errors.ValueError, match="before binding"):
        _core.plan_link_inputs(first, second)  # slot 0 is bound now


def test_a_dropped_batch_never_dangles(rng):
    """The plan holds the bound tensor: Python dropping it and allocating over its old memory
    does not change what the next replay of the backward reads."""
    eager, graph = twins(lambda: hl.opt.SGD(lr=0.1))
    for x, y in batches(rng, 6):
        eager.train_one_batch(hl.tensor(x), hl.tensor(y))
        graph.train_one_batch(hl.tensor(x), hl.tensor(y))  # the tensors die right away
        gc.collect()
        [hl.tensor(np.full_like(x, np.nan)) for _ in range(3)]
    for k, v in params(eager).items():
        np.testing.assert_array_equal(params(graph)[k], v, err_msg=k)


@pytest.mark.parametrize("bad, error, words", [
    (lambda: np.zeros((3, 5), np.float32), errors.ShapeError, "slot 0 was recorded with shape"),
    (lambda: np.zeros((3, 4), np.float64), errors.DTypeError, "slot 0 was recorded as"),
])
def test_binding_another_signature_is_a_clear_error(bad, error, words):
    x = hl.tensor(np.zeros((3, 4), np.float32))
    _core.plan_begin()
    try:
        slot = _core.plan_input(x._h)
        x * 2.0
    finally:
        plan = _core.plan_end()
    with pytest.raises(error, match=words):
        _core.plan_bind(plan, slot, hl.tensor(bad())._h)
