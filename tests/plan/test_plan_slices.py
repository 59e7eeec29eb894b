"""Runs of consecutive convolutions over large activations replay a slice of the batch at a
time (libcore/src/plan/slice.c): every layer of the run for the first samples, then for the
next ones. The sliced replay must equal the layer-by-layer one (PLAN_NO_SLICES) bit for bit,
at one and two threads, for a batch that the slices divide and one they do not; PyTorch in
float64 is the reference for the values. Intermediates only the run reads hold one slice
(the arena shrinks); one the caller holds keeps every sample."""

import numpy as np
import pytest

import hl
from hl import _core
from hl.ops.conv import conv_fused_forward, conv_pack

from .replaying import replay


@pytest.fixture(autouse=True)
def three_calls(monkeypatch):
    """The blocks' expansion and depthwise layer stay two calls (on AVX-512 CPUs a plan fuses
    them, plan/fuse.c's fuse_expand_dw): these tests count and time the sliced calls.
    test_plan_expand_dw.py slices fused blocks."""
    monkeypatch.setenv("HL_CONV_EXPAND_DW", "0")


def _block(rng, cin=16, mid=96, stride=1):
    """An inverted residual block's weights (1x1 expand, 3x3 depthwise, 1x1 project) as numpy
    arrays, and as hl tensors under "hl" with the 1x1 weights packed (before recording, as
    hl.onnx packs them at prepare())."""
    def w(*shape):
        return (rng.standard_normal(shape) / np.sqrt(np.prod(shape[1:]))).astype(np.float32)
    p = {"w1": w(mid, cin, 1, 1), "b1": w(mid), "wd": w(mid, 1, 3, 3), "bd": w(mid),
         "w2": w(cin, mid, 1, 1), "b2": w(cin), "stride": stride}
    t = {k: hl.tensor(v) for k, v in p.items() if k != "stride"}
    t["p1"], t["p2"] = conv_pack(t["w1"]), conv_pack(t["w2"])
    p["hl"] = t
    return p


def _hl_block(x, p, keep_expanded=False):
    t = p["hl"]
    a = conv_fused_forward(x, t["w1"], t["b1"], act="clip", alpha=0.0, beta=6.0,
                           packed=t["p1"])
    d = conv_fused_forward(a, t["wd"], t["bd"], stride=p["stride"], padding=1, groups=96,
                           act="clip", alpha=0.0, beta=6.0)
    res = x if p["stride"] == 1 else None
    y = conv_fused_forward(d, t["w2"], t["b2"], residual=res, packed=t["p2"])
    return (y, a) if keep_expanded else (y,)


def _torch_block(x, p):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    t = {k: torch.from_numpy(v).double() for k, v in p.items() if k not in ("stride", "hl")}
    x = torch.from_numpy(x).double()
    a = F.conv2d(x, t["w1"], t["b1"]).clamp(0, 6)
    d = F.conv2d(a, t["wd"], t["bd"], stride=p["stride"], padding=1, groups=96).clamp(0, 6)
    y = F.conv2d(d, t["w2"], t["b2"])
    return (y + x if p["stride"] == 1 else y).numpy(), a.numpy()


def _replay_both(f):
    plan, sliced = replay(f)
    plain_plan, plain = replay(f, _core.PLAN_NO_SLICES)
    return plan, [t.numpy() for t in sliced], plain_plan, [t.numpy() for t in plain]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch,size,stride,sliced_calls", [
    (3, 96, 1, 3),   # one sample a slice (6.9 MB a sample in the depthwise call)
    (5, 64, 1, 3),   # two samples a slice, the last slice one: 5 = 2 + 2 + 1
    (4, 96, 2, 2),   # stride 2: the projection's 48x48 tensors are too small to join
])
def test_sliced_replay_equals_layer_by_layer_and_torch(rng, threads, batch, size, stride,
                                                      sliced_calls):
    p = _block(rng, stride=stride)
    x_np = rng.standard_normal((batch, 16, size, size)).astype(np.float32)
    x = hl.tensor(x_np)
    prev = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        plan, sliced, plain_plan, plain = _replay_both(lambda: _hl_block(x, p))
    finally:
        hl.set_num_threads(prev)
    stats, plain_stats = _core.plan_stats(plan), _core.plan_stats(plain_plan)
    assert stats["sliced_runs"] == 1 and stats["sliced_calls"] == sliced_calls, stats
    assert plain_stats["sliced_runs"] == 0
    # the expanded and depthwise tensors hold one slice: the arena is smaller
    assert stats["arena_bytes"] < plain_stats["arena_bytes"], (stats, plain_stats)
    np.testing.assert_array_equal(sliced[0], plain[0])
    want, _ = _torch_block(x_np, p)
    np.testing.assert_allclose(sliced[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_sliced_replay_is_the_same_at_one_and_two_threads(rng):
    p = _block(rng)
    x = hl.tensor(rng.standard_normal((3, 16, 96, 96)).astype(np.float32))
    prev = hl.get_num_threads()
    got = []
    try:
        for threads in (1, 2):
            hl.set_num_threads(threads)
            got.append(replay(lambda: _hl_block(x, p))[1][0].numpy())
    finally:
        hl.set_num_threads(prev)
    np.testing.assert_array_equal(got[0], got[1])


def test_an_intermediate_the_caller_holds_keeps_every_sample(rng):
    # the expanded tensor is an output of the plan: it is not planned memory, so the run
    # writes each slice of it at that slice's samples
    p = _block(rng)
    x_np = rng.standard_normal((3, 16, 96, 96)).astype(np.float32)
    x = hl.tensor(x_np)
    plan, sliced, _, plain = _replay_both(lambda: _hl_block(x, p, keep_expanded=True))
    assert _core.plan_stats(plan)["sliced_calls"] == 3
    for s, q in zip(sliced, plain):
        np.testing.assert_array_equal(s, q)
    want_y, want_a = _torch_block(x_np, p)
    np.testing.assert_allclose(sliced[1], want_a, rtol=1e-4, atol=1e-4 * np.abs(want_a).max())
    np.testing.assert_allclose(sliced[0], want_y, rtol=1e-4, atol=1e-4 * np.abs(want_y).max())


def test_small_batches_and_tensors_are_not_sliced(rng):
    p = _block(rng)
    for shape in [(1, 16, 96, 96), (4, 16, 16, 16)]:
        x = hl.tensor(rng.standard_normal(shape).astype(np.float32))
        plan, _ = replay(lambda: _hl_block(x, p))
        assert _core.plan_stats(plan)["sliced_runs"] == 0, shape


def test_profile_times_each_sliced_call(rng):
    p = _block(rng)
    x = hl.tensor(rng.standard_normal((3, 16, 96, 96)).astype(np.float32))
    plan, _ = replay(lambda: _hl_block(x, p))
    _core.plan_set_profiling(plan, True, 0)
    try:
        _core.plan_run(plan)
        timed, ops, first, ns = _core.plan_profile(plan)
    finally:
        _core.plan_set_profiling(plan, False, 0)
    assert timed == 1 and len(ns) == 3
    assert list(first) == [0, 1, 2] and all(t > 0 for t in ns), (first, ns)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("batch", [3, 4])
def test_two_blocks_share_one_slice_buffers_and_match(rng, threads, batch):
    # six calls in one run: the first block's one-slice buffers are dead when the second
    # block's are written (within each slice), so the memory plan lets them share bytes;
    # every slice still reads what its own earlier layers wrote.
    p, q = _block(rng), _block(rng)
    x_np = rng.standard_normal((batch, 16, 96, 96)).astype(np.float32)
    x = hl.tensor(x_np)
    prev = hl.get_num_threads()
    hl.set_num_threads(threads)
    try:
        plan, sliced, plain_plan, plain = _replay_both(
            lambda: _hl_block(_hl_block(x, p)[0], q))
    finally:
        hl.set_num_threads(prev)
    stats = _core.plan_stats(plan)
    assert stats["sliced_calls"] == 6, stats
    assert stats["arena_bytes"] < _core.plan_stats(plain_plan)["arena_bytes"] / 2, stats
    np.testing.assert_array_equal(sliced[0], plain[0])
    mid, _ = _torch_block(x_np, p)
    want, _ = _torch_block(mid.astype(np.float32), q)
    np.testing.assert_allclose(sliced[0], want, rtol=1e-3, atol=1e-3 * np.abs(want).max())
