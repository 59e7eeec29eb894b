"""hl.amp.autocast: which dtype each op computes in (PyTorch's documented CUDA op lists are the
reference: "CUDA Ops that can autocast to float16" and "... to float32"), gradients flowing
back to float32 parameters, the per-region cast cache, nesting, enabled=False, the decorator,
per-thread state, and the CPU's honest bfloat16 (checked against torch's CPU autocast)."""
import threading

import numpy as np
import pytest

import hl
from hl.amp import autocast
from hl.autograd import autocast as autocast_module
from hl.autograd import functional as F

gpu = pytest.mark.gpu
rng = np.random.default_rng(0)


def _t(shape, device="cpu", requires_grad=False):
    t = hl.tensor(rng.standard_normal(shape).astype(np.float32), device=device)
    t.requires_grad = requires_grad
    return t


def _ops(device):
    x4, w4 = _t((2, 3, 6, 6), device), _t((4, 3, 3, 3), device)
    x, w, b = _t((4, 8), device), _t((5, 8), device), _t((5,), device)
    labels = hl.tensor(np.array([0, 1, 2, 3]), device=device)
    rm, rv = hl.tensor(np.zeros(3, np.float32), device=device), hl.tensor(np.ones(3, np.float32), device=device)
    return {  # name: (call, what PyTorch's lists say: "half" or "float32")
        "matmul": (lambda: F.matmul(x, F.transpose(w)), "half"),
        "linear": (lambda: F.linear(x, w, b), "half"),
        "conv2d": (lambda: F.conv2d(x4, w4, padding=1), "half"),
        "softmax": (lambda: F.softmax(x), "float32"),
        "log_softmax": (lambda: F.log_softmax(x), "float32"),
        "cross_entropy": (lambda: F.softmax_cross_entropy(F.linear(x, w), labels), "float32"),
        "sum": (lambda: F.sum(F.linear(x, w)), "float32"),
        "mean": (lambda: F.mean(F.linear(x, w)), "float32"),
        "exp": (lambda: F.exp(F.linear(x, w)), "float32"),
        "log_of_half": (lambda: F.log(F.abs(F.linear(x, w))), "float32"),
        "layer_norm": (lambda: F.layer_norm(F.linear(x, w), (5,)), "float32"),
        "batch_norm": (lambda: F.batch_norm(F.conv2d(x4, w4[:, :3][:3]), rm, rv), "float32"),
        # neither list: runs in its input's dtype
        "relu_of_half": (lambda: F.relu(F.linear(x, w)), "half"),
        "relu_of_float": (lambda: F.relu(x), "float32"),
        "max_of_half": (lambda: F.max(F.linear(x, w)), "half"),
        "max_pool_of_half": (lambda: F.max_pool2d(F.conv2d(x4, w4), 2), "half"),
        "dropout": (lambda: F.dropout(F.linear(x, w), 0.5, training=True), "half"),
    }


@gpu
@pytest.mark.parametrize("dtype", [hl.float16, hl.bfloat16])
def test_op_dtype_table_on_cuda(dtype):
    for name, (call, kind) in _ops("cuda").items():
        with autocast("cuda", dtype=dtype):
            y = call()
        assert y.dtype is (dtype if kind == "half" else hl.float32), name
        assert F.relu(_t((2,), "cuda")).dtype is hl.float32  # outside: nothing changes


def test_cpu_bfloat16_computes_in_float32_on_rounded_operands():
    """The CPU has no bfloat16 arithmetic: the result is float32 holding bfloat16 values, the
    same numbers torch's CPU autocast gives (bfloat16 GEMM, float32 sums, rounded once)."""
    torch = pytest.importorskip("torch")
    x, w, b = _t((16, 40)), _t((24, 40)), _t((24,))
    with autocast("cpu", dtype=hl.bfloat16):
        y = F.linear(x, w, b)
        s = F.softmax(y)
    assert y.dtype is hl.float32 and s.dtype is hl.float32
    got = y.numpy()
    assert np.array_equal(got, got.astype(hl.bfloat16.np).astype(np.float32))  # bf16 values
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = torch.nn.functional.linear(*(torch.from_numpy(t.numpy()) for t in (x, w, b)))
    assert ref.dtype == torch.bfloat16
    ref = ref.float().numpy()
    # both round one float32 sum to bfloat16: at most one bfloat16 ulp apart (2^-7 relative)
    np.testing.assert_allclose(got, ref, rtol=2 ** -7, atol=1e-6)
    assert np.abs(got - F.linear(x, w, b).numpy()).max() > 0  # it did round


def test_float16_autocast_on_the_cpu_is_refused():
    with pytest.raises(hl.errors.UnsupportedError, match="no float16 arithmetic"):
        with autocast("cpu", dtype=hl.float16):
            pass
    with pytest.raises(hl.errors.DTypeError, match="float16 or bfloat16"):
        autocast("cuda", dtype=hl.float64)
    with pytest.raises(hl.errors.ValueError, match="device_type"):
        autocast("tpu")


@gpu
def test_gradients_reach_float32_parameters():
    """The half copy is a recorded cast: d(loss)/dW arrives in float32 and equals the float32
    computation on the same half-rounded operands (the CPU) to float16's precision."""
    x, w, b = _t((6, 10), "cuda"), _t((4, 10), "cuda", True), _t((4,), "cuda", True)
    with autocast("cuda", dtype=hl.float16):
        loss = F.sum(F.relu(F.linear(x, w, b)))
    loss.backward()
    assert w.grad.dtype is hl.float32 and b.grad.dtype is hl.float32
    xc, wc, bc = (hl.tensor(t.astype("float16").astype("float32").numpy()) for t in (x, w, b))
    wc.requires_grad = bc.requires_grad = True
    F.sum(F.relu(F.linear(xc, wc, bc))).backward()
    # dW = sum over rows of x where the unit is active: x is exact in half, the sum of 6
    # float16-rounded ... computed in float32 by the GEMM and rounded once to float16
    np.testing.assert_allclose(w.grad.numpy(), wc.grad.numpy(), rtol=2 ** -10, atol=1e-3)
    np.testing.assert_allclose(b.grad.numpy(), bc.grad.numpy(), rtol=2 ** -10)


def test_parameter_cast_once_per_region(monkeypatch):
    calls = []
    real = autocast_module.cast
    monkeypatch.setattr(autocast_module, "cast", lambda x, d: calls.append(d) or real(x, d))
    x, w = _t((3, 8)), _t((5, 8), requires_grad=True)
    with autocast("cpu", dtype=hl.bfloat16):
        F.linear(x, w)
        F.linear(x, w)  # w's bfloat16 copy is reused; x (no gradient) is cast again
    # per call: x -> bf16 (+ back to float32, the CPU's emulation), output rounded twice;
    # w -> bf16 once for both calls (+ back to float32 each time)
    assert calls.count(hl.bfloat16) == 2 * 1 + 1 + 2 * 1
    calls.clear()
    with autocast("cpu", dtype=hl.bfloat16):
        F.linear(x, w)  # a new region: a new cast
    assert calls.count(hl.bfloat16) == 3
    assert autocast_module.state.cache is None  # dropped on leaving


@gpu
def test_nested_disabled_and_decorator():
    x, w = _t((3, 8), "cuda"), _t((5, 8), "cuda")
    with autocast("cuda", dtype=hl.float16):
        assert F.linear(x, w).dtype is hl.float16
        with autocast("cuda", enabled=False):
            assert F.linear(x, w).dtype is hl.float32
            with autocast("cuda", dtype=hl.bfloat16):
                assert F.linear(x, w).dtype is hl.bfloat16
            assert F.linear(x, w).dtype is hl.float32
        assert F.linear(x, w).dtype is hl.float16
        assert hl.amp.get_autocast_dtype("cuda") is hl.float16
        assert not hl.amp.is_autocast_enabled("cpu")
        assert F.linear(_t((3, 8)), _t((5, 8))).dtype is hl.float32  # cpu tensors: not cast
    assert F.linear(x, w).dtype is hl.float32

    @autocast("cuda", dtype=hl.bfloat16)
    def forward(a, depth):
        return forward(a, depth - 1) if depth else F.linear(a, w)
    assert forward(x, 3).dtype is hl.bfloat16
    assert F.linear(x, w).dtype is hl.float32
    with hl.no_grad(), autocast("cuda"):  # inference (no recording) is cast as well
        assert F.matmul(x, F.transpose(w)).dtype is hl.float16


@gpu
def test_autocast_state_is_per_thread():
    x, w = _t((3, 8), "cuda"), _t((5, 8), "cuda")
    inside, other_done = threading.Event(), threading.Event()
    seen = {}

    def other():
        inside.wait()
        seen["other"] = F.linear(x, w).dtype  # while the main thread is in a region
        seen["other_enabled"] = hl.amp.is_autocast_enabled("cuda")
        other_done.set()

    t = threading.Thread(target=other)
    t.start()
    with autocast("cuda", dtype=hl.float16):
        inside.set()
        other_done.wait()
        seen["main"] = F.linear(x, w).dtype
    t.join()
    assert seen == {"other": hl.float32, "other_enabled": False, "main": hl.float16}


@gpu
def test_one_autocast_object_entered_on_two_threads():
    """The saved state is per thread too: a shared `with region:` on two threads, entered and
    left in an interleaved order, restores each thread's own state."""
    region = autocast("cuda", dtype=hl.bfloat16)
    x, w = _t((3, 8), "cuda"), _t((5, 8), "cuda")
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    seen = {}

    def a():
        with autocast("cuda", dtype=hl.float16):
            with region:
                a_in.set()
                b_in.wait()
            seen["a"] = F.linear(x, w).dtype  # back to this thread's float16
        a_out.set()

    def b():
        a_in.wait()
        with region:
            b_in.set()
            a_out.wait()
            seen["b_inside"] = F.linear(x, w).dtype
        seen["b"] = F.linear(x, w).dtype

    ts = [threading.Thread(target=f) for f in (a, b)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert seen == {"a": hl.float16, "b_inside": hl.bfloat16, "b": hl.float32}
