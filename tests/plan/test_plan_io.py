"""A plan's inputs and outputs without copies (hl._core): a slot bound to a borrowed tensor over
a numpy array's buffer (hl_tensor_borrow_host) reads the array in place, and
hl_plan_take_output hands an output's memory to the caller, the plan writing fresh memory on
its next replay; a copy wherever something else sees that memory. References: numpy on the
same values."""
import numpy as np
import pytest

import hl
from hl import _core, errors

from .replaying import record

RNG = np.random.default_rng(31)
F32 = hl.float32.code


def _view(h):
    return _core.numpy_view(h, np.dtype(np.float32))


def _step(x):
    """Element-wise first (an in-place candidate, were the input the plan's own), then a
    reduction and a product."""
    h = hl.exp(x * 0.5) + 1.0
    return h @ hl.tensor(np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4))


def _step_numpy(x):
    return (np.exp(x * 0.5) + 1.0) @ np.linspace(-1, 1, 24, dtype=np.float32).reshape(6, 4)


def _plan():
    x = hl.tensor(RNG.standard_normal((5, 6), dtype=np.float32))
    plan, (slot,), y = record(lambda: _step(x), x)
    return plan, slot, y


def test_borrowed_input_is_read_in_place_and_never_written():
    plan, slot, y = _plan()
    for _ in range(4):  # the memory plan is made at the second replay: borrowed from the first
        a = RNG.standard_normal((5, 6), dtype=np.float32)
        before = a.copy()
        _core.plan_bind(plan, slot, _core.borrow_host(a, F32))
        _core.plan_run(plan)
        np.testing.assert_allclose(y.numpy(), _step_numpy(before), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(a, before)
        a *= 2.0  # read in place: the next replay of the same binding sees the change
        _core.plan_run(plan)
        np.testing.assert_allclose(y.numpy(), _step_numpy(before * 2.0), rtol=1e-5, atol=1e-6)
    assert _core.plan_stats(plan)["memory_planned"]


def test_borrow_refuses_memory_misaligned_for_the_dtype():
    raw = np.zeros(4 * 30 + 1, np.uint8)
    a = np.frombuffer(raw.data, dtype=np.float32, count=30, offset=1)
    assert not a.flags.aligned
    with pytest.raises(errors.ValueError, match="not aligned to float32's 4 bytes"):
        _core.borrow_host(a, F32)


def test_taken_output_is_the_plans_memory_and_the_next_replay_writes_fresh_memory():
    plan, slot, y = _plan()
    taken = []
    for _ in range(4):
        a = RNG.standard_normal((5, 6), dtype=np.float32)
        _core.plan_bind(plan, slot, hl.tensor(a)._h)
        _core.plan_run(plan)
        before = _view(y._h)  # the plan's memory, as y sees it
        h, handed = _core.plan_take_output(plan, y._h)
        assert handed
        out = _view(h)
        assert np.shares_memory(out, before)  # no copy
        assert not np.shares_memory(y.numpy(), out)  # the plan's output moved on
        taken.append((out, _step_numpy(a)))
    for out, want in taken:  # later replays wrote elsewhere: every result is intact
        np.testing.assert_allclose(out, want, rtol=1e-5, atol=1e-6)


def test_take_refused_before_a_run_and_twice_between_runs():
    plan, slot, y = _plan()
    with pytest.raises(errors.ValueError, match="has not run yet"):
        _core.plan_take_output(plan, y._h)
    _core.plan_run(plan)
    _core.plan_take_output(plan, y._h)
    with pytest.raises(errors.ValueError, match="taken already since the last replay"):
        _core.plan_take_output(plan, y._h)
    _core.plan_run(plan)
    assert _core.plan_take_output(plan, y._h)[1]


def test_output_seen_from_outside_the_plan_is_copied():
    plan, slot, y = _plan()
    seen = y.reshape(20)  # a view made after recording: the caller sees the plan's memory
    _core.plan_run(plan)
    h, handed = _core.plan_take_output(plan, y._h)
    assert not handed
    out = _view(h)
    assert not np.shares_memory(out, seen.numpy())
    np.testing.assert_array_equal(out.reshape(20), seen.numpy())
    a = RNG.standard_normal((5, 6), dtype=np.float32)
    _core.plan_bind(plan, slot, hl.tensor(a)._h)
    _core.plan_run(plan)  # the view still shows the plan's output
    np.testing.assert_allclose(seen.numpy().reshape(5, 4), _step_numpy(a), rtol=1e-5,
                               atol=1e-6)


def test_output_viewing_an_input_is_copied():
    """An output the plan does not write (a view of its input slot) is never handed over."""
    x = hl.tensor(RNG.standard_normal((5, 6), dtype=np.float32))
    plan, (slot,), (flat, y) = record(lambda: (x.reshape(30), _step(x)), x)
    a = RNG.standard_normal((5, 6), dtype=np.float32)
    _core.plan_bind(plan, slot, hl.tensor(a)._h)
    _core.plan_run(plan)
    h, handed = _core.plan_take_output(plan, flat._h)
    assert not handed
    assert not np.shares_memory(_view(h), _view(flat._h))
    np.testing.assert_array_equal(_view(h), _view(flat._h))
    assert _core.plan_take_output(plan, y._h)[1]


def test_plan_outputs_fill_arrays_made_before_the_replay():
    """_core.PlanOutputs: arrays made before a replay over the memory it writes, handed that
    memory after it; an output something else views comes back as a copy instead."""
    x = hl.tensor(RNG.standard_normal((5, 6), dtype=np.float32))
    plan, (slot,), (y, z) = record(lambda: (_step(x), hl.exp(x)), x)
    seen = z.reshape(30)  # z's memory is seen from outside: z is copied, y handed over
    layouts = [_core.array_layout(t._h, np.dtype(np.float32)) for t in (y, z)]
    outputs = _core.PlanOutputs(plan, [y._h, z._h], layouts)
    kept = []
    for _ in range(3):
        a = RNG.standard_normal((5, 6), dtype=np.float32)
        _core.plan_bind(plan, slot, hl.tensor(a)._h)
        arrays = outputs.arrays()
        made = list(arrays)
        _core.plan_run(plan)
        outputs.take(arrays)
        assert arrays[0] is made[0] and arrays[1] is not made[1]
        assert not np.shares_memory(arrays[1], seen.numpy())
        np.testing.assert_array_equal(arrays[1].reshape(30), seen.numpy())
        kept.append((arrays, a))
    for (out_y, out_z), a in kept:
        np.testing.assert_allclose(out_y, _step_numpy(a), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out_z, np.exp(a), rtol=1e-6)


def test_small_outputs_are_copied_out_by_the_replays_call():
    """PlanOutputs.run_copy (hl_plan_run_copy): each replay's outputs in new arrays, copied
    right after the replay; earlier arrays keep their values, and an output whose memory a
    take moved in between is read where it now is."""
    x = hl.tensor(RNG.standard_normal((5, 6), dtype=np.float32))
    plan, (slot,), (y, z) = record(lambda: (_step(x), hl.exp(x)), x)
    layouts = [_core.array_layout(t._h, np.dtype(np.float32)) for t in (y, z)]
    outputs = _core.PlanOutputs(plan, [y._h, z._h], layouts)
    assert outputs.copies
    kept = []
    for k in range(4):
        a = RNG.standard_normal((5, 6), dtype=np.float32)
        _core.plan_bind(plan, slot, hl.tensor(a)._h)
        if k == 2:  # the Tensor path took y's memory: the plan writes fresh memory after it
            _core.plan_run(plan)
            taken, handed = _core.plan_take_output(plan, y._h)
            assert handed
            np.testing.assert_allclose(_view(taken), _step_numpy(a), rtol=1e-5, atol=1e-6)
        out_y, out_z = outputs.run_copy()
        assert out_y.shape == (5, 4) and out_z.shape == (5, 6)
        assert not np.shares_memory(out_y, _view(y._h))
        assert not np.shares_memory(out_z, _view(z._h))
        kept.append((out_y, out_z, a))
    for out_y, out_z, a in kept:
        np.testing.assert_allclose(out_y, _step_numpy(a), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(out_z, np.exp(a), rtol=1e-6)


def test_run_copy_refuses_a_wrong_size_or_a_strided_output_before_running():
    x = hl.tensor(RNG.standard_normal((5, 6), dtype=np.float32))
    plan, (slot,), (y, t) = record(lambda: (_step(x), hl.exp(x).transpose(1, 0)), x)
    dst = np.empty(64, np.float32)
    ts = _core.ffi.new("hl_tensor *[]", [y._h])
    ptrs = _core.ffi.new("void *[]", [_core.ffi.from_buffer(dst)])
    with pytest.raises(errors.HLError, match=r"plan_run_copy: output 0: expected a contiguous "
                                             r"CPU tensor of 64 bytes, got a tensor of 80"):
        _core.check(_core.lib.hl_plan_run_copy(plan, 1, ts, ptrs,
                                               _core.ffi.new("size_t[]", [64])))
    ts = _core.ffi.new("hl_tensor *[]", [t._h])
    with pytest.raises(errors.HLError, match="output 0: .* got a strided tensor of 120 bytes"):
        _core.check(_core.lib.hl_plan_run_copy(plan, 1, ts, ptrs,
                                               _core.ffi.new("size_t[]", [120])))
    with pytest.raises(errors.HLError, match="an array is NULL"):
        _core.check(_core.lib.hl_plan_run_copy(plan, 1, _core.ffi.NULL, ptrs,
                                               _core.ffi.new("size_t[]", [120])))
    with pytest.raises(errors.ValueError, match="has not run yet"):  # nothing ran
        _core.plan_take_output(plan, y._h)
