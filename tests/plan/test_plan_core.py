"""libcore's plans at the binding level (hl._core): recording, replay, input slots and binding,
the host-read guard, planned memory (arena, in-place writes) and hl.reset_peak_memory_stats.
References: numpy on the same values, and the same plan replayed with its optimisations off
(HL_PLAN_NO_MEMORY / NO_IN_PLACE / NO_FUSION), which must agree bit for bit where no
arithmetic is reordered."""
import gc

import numpy as np
import pytest

import hl
from hl import _core, errors

from .replaying import record

RNG = np.random.default_rng(20)


def _t(a):
    return hl.tensor(np.asarray(a))


def _mlp(x, w1, b1, w2):
    """A chain with broadcasts, element-wise runs and a reduction."""
    h = hl.relu(x @ w1 + b1)
    h = hl.tanh(h * 0.5) * 2.0 - 1.0
    h = hl.exp(-(h * h)) + h
    return (h @ w2).sum(axis=1)


def _mlp_numpy(x, w1, b1, w2):
    h = np.maximum(x @ w1 + b1, 0)
    h = np.tanh(h * 0.5) * 2 - 1
    h = np.exp(-(h * h)) + h
    return (h @ w2).sum(axis=1)


def _weights(n_in=32, n_hidden=64, n_out=8):
    return (_t(RNG.standard_normal((n_in, n_hidden), dtype=np.float32) * 0.2),
            _t(RNG.standard_normal(n_hidden, dtype=np.float32) * 0.1),
            _t(RNG.standard_normal((n_hidden, n_out), dtype=np.float32) * 0.2))


def test_replay_matches_numpy_over_rebinds():
    w1, b1, w2 = _weights()
    x = _t(RNG.standard_normal((16, 32), dtype=np.float32))
    plan, (slot,), y = record(lambda: _mlp(x, w1, b1, w2), x)
    for _ in range(3):
        batch = RNG.standard_normal((16, 32), dtype=np.float32)
        _core.plan_bind(plan, slot, _t(batch)._h)
        _core.plan_run(plan)
        want = _mlp_numpy(batch, w1.numpy(), b1.numpy(), w2.numpy())
        np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("options", [_core.PLAN_NO_IN_PLACE, _core.PLAN_NO_FUSION, 0])
def test_optimised_replay_is_bitwise_the_plain_one(options):
    w1, b1, w2 = _weights()
    batch = RNG.standard_normal((16, 32), dtype=np.float32)
    results = []
    for opts in (_core.PLAN_NO_MEMORY | _core.PLAN_NO_FUSION, options):
        x = _t(batch)
        plan, _, y = record(lambda: _mlp(x, w1, b1, w2), x)
        _core.plan_set_options(plan, opts)
        _core.plan_run(plan)
        _core.plan_run(plan)
        results.append(y.numpy().copy())
    np.testing.assert_array_equal(results[0], results[1])


@pytest.mark.parametrize("fusion", [False, True])
def test_memory_is_planned_and_shared(fusion):
    w1, b1, w2 = _weights(64, 256, 8)
    x = _t(RNG.standard_normal((128, 64), dtype=np.float32))
    plan, _, y = record(lambda: _mlp(x, w1, b1, w2), x)
    if not fusion:
        _core.plan_set_options(plan, _core.PLAN_NO_FUSION)
    _core.plan_run(plan)  # the first replay measures the calls
    before = hl.memory_stats()["in_use"]
    _core.plan_run(plan)  # the memory plan, then the replay
    stats = _core.plan_stats(plan)
    after = hl.memory_stats()["in_use"]
    # the (128, 256) intermediates: x @ w1, + b1, relu, * 0.5, tanh, * 2, - 1, h * h, neg,
    # exp, + h; at most two alive at once (h is read twice)
    hidden = 128 * 256 * 4
    assert stats["prepared"] == 1 and stats["planned_tensors"] >= 10, stats
    assert stats["arena_bytes"] <= 2 * hidden + 128 * 8 * 4 + 4096, stats
    if fusion:  # one pass from + b1 to + h: its intermediates never reach memory
        assert stats["fused_groups"] == 1 and stats["fused_calls"] == 10, stats
    else:
        assert stats["planned_bytes"] >= 10 * hidden and stats["in_place"] >= 6, stats
    assert after < before - 5 * hidden  # the intermediates' own blocks went back
    want = _mlp_numpy(x.numpy(), w1.numpy(), b1.numpy(), w2.numpy())
    np.testing.assert_allclose(y.numpy(), want, rtol=1e-5, atol=1e-5)


def test_tensors_the_caller_holds_keep_their_memory():
    x = _t(RNG.standard_normal(1000).astype(np.float32))
    kept = {}

    def f():
        a = hl.exp(x)
        kept["a"] = a          # held by the caller: an output of the plan
        b = a * 3.0
        c = hl.sqrt(b + 1.0)   # dropped: planned
        return c + a

    plan, _, y = record(f)
    _core.plan_run(plan)
    _core.plan_run(plan)
    a = np.exp(x.numpy())
    np.testing.assert_allclose(kept["a"].numpy(), a, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), np.sqrt(a * 3 + 1) + a, rtol=1e-6)
    assert _core.plan_stats(plan)["planned_tensors"] >= 2


def test_constants_written_while_recording_survive_replays():
    x = _t(np.arange(6, dtype=np.float32))

    def f():
        c = _t(np.full(6, 2.5, np.float32))  # written now, not a recorded call; then dropped
        return x * c + c

    plan, _, y = record(f)
    for _ in range(3):
        _core.plan_run(plan)
        np.testing.assert_array_equal(y.numpy(), np.arange(6) * 2.5 + 2.5)


def test_parameter_updated_in_place_stays_external():
    w = _t(np.ones(4, np.float32))
    g = _t(np.full(4, 0.5, np.float32))
    plan, _, _ = record(lambda: w.copy_(w - g * 0.1))  # an SGD step
    for k in range(1, 4):
        _core.plan_run(plan)
        np.testing.assert_allclose(w.numpy(), 1 - 0.05 * k, rtol=1e-6)


# ---- input slots ---------------------------------------------------------------------------

def test_bind_without_copy_redirects_views_made_while_recording():
    x = _t(np.zeros((4, 6), np.float32))
    plan, (slot,), y = record(lambda: x.reshape(2, 12) * 2.0, x)
    new = _t(RNG.standard_normal((4, 6), dtype=np.float32))
    _core.plan_bind(plan, slot, new._h)
    assert x.shares_memory(new)   # the slot's tensor now reads the bound memory
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), new.numpy().reshape(2, 12) * 2)
    new.numpy()[:] = 1.0           # no copy: later writes show through on the next run
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), np.full((2, 12), 2.0, np.float32))


def test_bind_of_other_strides_copies():
    x = _t(np.zeros((3, 5), np.float32))
    plan, (slot,), y = record(lambda: x + 1.0, x)
    src = RNG.standard_normal((5, 3), dtype=np.float32)
    transposed = _t(src).transpose(1, 0)
    _core.plan_bind(plan, slot, transposed._h)
    assert not x.shares_memory(transposed)
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), src.T + 1)


def test_slot_memory_is_given_back_while_bound_and_made_again_to_copy():
    """A plan bound without a copy holds the bound batch, not also its slot's own memory; a
    later bind that must copy gets slot memory again."""
    x = _t(np.zeros((256, 64), np.float32))  # 64 KiB: one allocator block
    plan, (slot,), y = record(lambda: x + 1.0, x)
    del x  # only the plan holds the slot's memory now
    gc.collect()
    new = _t(RNG.standard_normal((256, 64), dtype=np.float32))
    before = hl.memory_stats()["in_use"]
    _core.plan_bind(plan, slot, new._h)
    assert before - hl.memory_stats()["in_use"] == 256 * 64 * 4
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), new.numpy() + 1)
    src = RNG.standard_normal((64, 256), dtype=np.float32)
    _core.plan_bind(plan, slot, _t(src).transpose(1, 0)._h)  # other strides: copied
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), src.T + 1)


def test_bind_of_a_plan_output_copies():
    x = _t(np.ones(4, np.float32))
    plan, (slot,), y = record(lambda: x * 2.0, x)
    _core.plan_run(plan)
    _core.plan_bind(plan, slot, y._h)   # y is memory the plan writes: copied
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), np.full(4, 4.0))


@pytest.mark.parametrize("bad, error, words", [
    (lambda: _t(np.zeros((3, 4), np.float32)), errors.ShapeError, ["slot 0", "(2, 3)", "(3, 4)"]),
    (lambda: _t(np.zeros((2, 3), np.float64)), errors.DTypeError, ["slot 0", "float32", "float64"]),
    (lambda: hl.empty((2, 3), device="meta"), errors.DeviceError, ["slot 0", "meta"]),
])
def test_bind_refuses_another_signature(bad, error, words):
    x = _t(np.zeros((2, 3), np.float32))
    plan, (slot,), _ = record(lambda: x + 1.0, x)
    with pytest.raises(error) as info:
        _core.plan_bind(plan, slot, bad()._h)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_bind_checks_the_slot_number():
    x = _t(np.zeros(2, np.float32))
    plan, _, _ = record(lambda: x + 1.0, x)
    with pytest.raises(errors.IndexError, match="slot 3 is out of range: the plan has 1"):
        _core.plan_bind(plan, 3, x._h)
    with pytest.raises(errors.IndexError):
        _core.plan_bind(plan, -1, x._h)


def test_input_must_come_from_outside():
    x = _t(np.zeros(2, np.float32))
    _core.plan_begin()
    try:
        y = x + 1.0
        with pytest.raises(errors.ValueError, match="computed by this recording"):
            _core.plan_input(y._h)
        _core.plan_input(x._h)
        with pytest.raises(errors.ValueError, match="shares its memory with input slot 0"):
            _core.plan_input(x.reshape(1, 2)._h)
    finally:
        _core.plan_end()
    with pytest.raises(errors.ValueError, match="no plan is being recorded"):
        _core.plan_input(x._h)


# ---- what recording refuses ----------------------------------------------------------------

def test_host_reads_of_recorded_values_fail_clearly():
    x = _t(np.arange(4, dtype=np.float32))
    _core.plan_begin()
    try:
        assert _core.plan_recording()
        s = (x * 2.0).sum()
        for read in (lambda: s.numpy(), lambda: s.item(), lambda: float(s), lambda: s.tolist()):
            with pytest.raises(errors.UnsupportedError, match=r"reading \(\) float32 .* while a "
                                                              r"plan is recorded"):
                read()
        # values the recording does not compute are real and may be read
        np.testing.assert_array_equal(x.numpy(), np.arange(4))
    finally:
        plan = _core.plan_end()
    assert not _core.plan_recording()
    _core.plan_run(plan)
    assert s.item() == 12.0


def test_run_and_bind_refused_while_recording_and_options_after_run():
    x = _t(np.zeros(2, np.float32))
    plan, (slot,), _ = record(lambda: x + 1.0, x)
    _core.plan_begin()
    try:
        with pytest.raises(errors.ValueError, match="being recorded"):
            _core.plan_run(plan)
        with pytest.raises(errors.ValueError, match="being recorded"):
            _core.plan_bind(plan, slot, x._h)
    finally:
        _core.plan_end()
    _core.plan_run(plan)
    with pytest.raises(errors.ValueError, match="already run"):
        _core.plan_set_options(plan, _core.PLAN_NO_MEMORY)
    with pytest.raises(errors.ValueError, match="unknown option"):
        _core.plan_set_options(record(lambda: x + 1.0)[0], 1 << 10)


# ---- memory statistics -----------------------------------------------------------------------

def test_reset_peak_memory_stats():
    big = hl.empty((1 << 20,), dtype="float32")
    del big
    hl.reset_peak_memory_stats()
    s = hl.memory_stats()
    assert s["peak"] == s["in_use"]
    t = hl.empty((1 << 18,), dtype="float32")
    assert hl.memory_stats()["peak"] >= s["in_use"] + (1 << 20)
    del t


# ---- graph_alg='topological' ---------------------------------------------------------------

def test_topological_order_gives_exactly_the_sequence_results():
    """Two independent branches, and a tensor read, written in place, then read again (the
    order between those three must hold)."""
    rng = np.random.default_rng(7)
    x_np = rng.standard_normal((8, 16)).astype(np.float32)
    w_np = rng.standard_normal((16, 16)).astype(np.float32)
    results = []
    for options in (0, _core.PLAN_TOPOLOGICAL, _core.PLAN_TOPOLOGICAL | _core.PLAN_NO_FUSION):
        x, w = _t(x_np), _t(w_np)

        def step():
            left = hl.tanh(x @ w) * 2.0          # branch 1 reads w
            right = hl.exp(x * 0.1).sum(axis=1)  # branch 2, independent of w
            w.copy_(w + 1.0)                     # then w changes in place
            again = (x @ w).sum(axis=1)          # and is read again
            return left.sum(axis=1) + right + again

        plan, _, y = record(step)
        _core.plan_set_options(plan, options)
        outs = []
        for _ in range(2):
            _core.plan_run(plan)
            outs.append(y.numpy().copy())
        results.append((outs, w.numpy().copy()))
    for outs, w_after in results[1:]:
        np.testing.assert_array_equal(outs[0], results[0][0][0])
        np.testing.assert_array_equal(outs[1], results[0][0][1])
        np.testing.assert_array_equal(w_after, results[0][1])
    w1 = w_np + 1
    want = (np.tanh(x_np @ w_np) * 2).sum(1) + np.exp(x_np * 0.1).sum(1) + (x_np @ w1).sum(1)
    np.testing.assert_allclose(results[0][0][0], want, rtol=1e-4)
    np.testing.assert_allclose(results[0][1], w_np + 2, rtol=1e-6)


def test_kernel_scratch_is_served_from_the_arena(monkeypatch):
    """conv's work buffers: measured on the first replay, in the arena from the second; the
    values stay those of the unplanned replay, bit for bit. im2col's columns (the 5x5 layer
    would otherwise run straight from its planes, cpu/conv_direct.c, with 8 KiB of scratch)."""
    monkeypatch.setenv("HL_CONV_DIRECT", "0")
    rng = np.random.default_rng(11)
    x_np = rng.standard_normal((4, 3, 12, 12)).astype(np.float32)
    w_np = rng.standard_normal((6, 3, 5, 5)).astype(np.float32)
    results = []
    for options in (0, _core.PLAN_NO_MEMORY | _core.PLAN_NO_FUSION):
        x, w = _t(x_np), _t(w_np)
        plan, _, y = record(lambda: hl.relu(hl.autograd.conv2d(x, w, padding=2)).sum(axis=1))
        _core.plan_set_options(plan, options)
        for _ in range(3):
            _core.plan_run(plan)
        results.append((y.numpy().copy(), _core.plan_stats(plan)))
    (planned, stats), (plain, plain_stats) = results
    np.testing.assert_array_equal(planned, plain)
    assert stats["memory_planned"] and stats["scratch_bytes"] >= 3 * 25 * 4 * 144, stats
    assert stats["arena_bytes"] >= stats["scratch_bytes"]
    assert plain_stats["scratch_bytes"] == 0 and plain_stats["arena_bytes"] == 0
    import torch
    want = torch.relu(torch.nn.functional.conv2d(torch.from_numpy(x_np), torch.from_numpy(w_np),
                                                 padding=2)).sum(1).numpy()
    np.testing.assert_allclose(planned, want, rtol=1e-4, atol=1e-4)
