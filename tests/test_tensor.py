"""hl.Tensor: construction and dtype inference, numpy interop (zero-copy both ways, lifetime),
conversions, printing, devices, pickling, and the C-level plans (graph mode record/replay)."""
import gc
import os
import pickle
import subprocess
import sys
import weakref

import ml_dtypes
import numpy as np
import pytest

import hl
from hl import _core, errors

NP_DTYPES = [np.float32, np.float64, np.int32, np.int64, np.uint8, np.bool_, np.float16,
             ml_dtypes.bfloat16]


def _name(d):
    return np.dtype(d).name


# ---- construction -----------------------------------------------------------------------------

INFER = [
    (1, hl.int64, ()), (1.5, hl.float32, ()), (True, hl.bool, ()), ([1, 2], hl.int64, (2,)),
    ([1.0, 2], hl.float32, (2,)), ([[True], [False]], hl.bool, (2, 1)), ([], hl.float32, (0,)),
    ([[]], hl.float32, (1, 0)), (np.float64(2.0), hl.float64, ()), (np.float32(2), hl.float32, ()),
    (np.int32(3), hl.int32, ()), (np.int8(3), hl.int64, ()), (np.uint16(3), hl.int64, ()),
    (np.array([1, 2], np.int16), hl.int64, (2,)), (np.array([1], np.uint32), hl.int64, (1,)),
    (np.array([1.0]), hl.float64, (1,)), (np.zeros((2, 0, 3), np.float16), hl.float16, (2, 0, 3)),
    (np.array(5, np.uint8), hl.uint8, ()),
]


@pytest.mark.parametrize("data,dtype,shape", INFER, ids=[repr(d)[:30] for d, _, _ in INFER])
def test_dtype_inference(data, dtype, shape):
    """Python floats give float32 (PyTorch's default), Python ints int64, bools bool; numpy
    data keeps its dtype, except integer types hl lacks (int8, int16, uint16, uint32...),
    which become int64."""
    t = hl.tensor(data)
    assert t.dtype is dtype
    assert t.shape == shape
    np.testing.assert_array_equal(t.numpy(), np.asarray(data).astype(dtype.np))


@pytest.mark.parametrize("npd", NP_DTYPES, ids=_name)
def test_construction_from_numpy_every_dtype(npd, rng):
    x = (rng.standard_normal((3, 4)) * 10).astype(npd)
    t = hl.tensor(x)
    assert t.dtype.np == np.dtype(npd)
    np.testing.assert_array_equal(t.numpy(), x)
    assert not np.shares_memory(t.numpy(), x)          # hl.tensor copies
    t2 = hl.from_numpy(x)
    assert t2.dtype is t.dtype
    # non-contiguous and 0-d numpy input
    np.testing.assert_array_equal(hl.tensor(x.T[::-1]).numpy(), x.T[::-1])
    np.testing.assert_array_equal(hl.tensor(x[1, 2]).numpy(), x[1, 2])
    assert hl.tensor(x[1, 2]).shape == ()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "uint8", "bool",
                                   "float16", "bfloat16", "float", "double", "half", "long",
                                   np.float64, float, int, bool, hl.int32])
def test_explicit_dtypes(dtype):
    t = hl.tensor([0, 1, 1], dtype=dtype)
    assert t.dtype is hl.dtype(dtype)
    assert t.astype(hl.float64).numpy().tolist() == [0.0, 1.0, 1.0]


def test_construction_errors():
    with pytest.raises(errors.ShapeError, match="ragged"):
        hl.tensor([[1, 2], [3]])
    with pytest.raises(errors.ShapeError, match="at most 8 dimensions"):
        hl.tensor(np.zeros([1] * 9))
    with pytest.raises(errors.DTypeError, match="complex128 has no hl equivalent"):
        hl.tensor(np.array([1 + 2j]))
    with pytest.raises(errors.DTypeError, match="no hl equivalent"):
        hl.tensor(["a"])
    with pytest.raises(errors.DTypeError, match="unknown dtype 'float8'"):
        hl.tensor([1.0], dtype="float8")
    with pytest.raises(errors.ValueError, match="non-finite values to int32"):
        hl.tensor([1.0, float("nan")], dtype=hl.int32)
    with pytest.raises(errors.ValueError, match="do not fit in int64"):
        hl.tensor(np.array([2 ** 64 - 1], dtype=np.uint64))
    with pytest.raises(errors.ValueError, match="negative size"):
        hl.zeros(2, -1)
    with pytest.raises(errors.ShapeError, match="9 dimensions requested"):
        hl.zeros(*[1] * 9)


def test_tensor_of_a_tensor_copies():
    a = hl.tensor([1.0, 2.0])
    b = hl.Tensor(a)
    assert not b.shares_memory(a)
    c = hl.Tensor(a, dtype=hl.int32)
    assert c.dtype is hl.int32
    assert hl.as_tensor(a) is a
    assert hl.as_tensor(a, dtype=hl.float64).dtype is hl.float64


def test_creation_functions():
    assert hl.zeros(2, 3).shape == (2, 3) and hl.zeros((2, 3)).dtype is hl.float32
    np.testing.assert_array_equal(hl.ones(2, dtype=hl.int32).numpy(), [1, 1])
    assert hl.full((2,), 7).dtype is hl.int64
    assert hl.full((2,), True).dtype is hl.bool
    assert hl.full((2,), 0.5).dtype is hl.float32
    t = hl.tensor([[1, 2]], dtype=hl.uint8)
    for f in (hl.zeros_like, hl.ones_like, hl.empty_like):
        u = f(t)
        assert u.shape == t.shape and u.dtype is hl.uint8
    assert hl.full_like(t, 3).numpy().tolist() == [[3, 3]]
    np.testing.assert_allclose(hl.linspace(0, 1, 5).numpy(), np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_allclose(hl.linspace(0, 1, 4, endpoint=False).numpy(),
                               np.linspace(0, 1, 4, endpoint=False), rtol=1e-6)
    assert hl.linspace(0, 1, 0).shape == (0,)


# ---- numpy interop ------------------------------------------------------------------------------

@pytest.mark.parametrize("npd", NP_DTYPES, ids=_name)
def test_numpy_shares_memory_both_ways(npd):
    t = hl.zeros(2, 3, dtype=hl.dtype(np.dtype(npd)) if npd is not ml_dtypes.bfloat16
                 else hl.bfloat16)
    a = t.numpy()
    assert a.dtype == np.dtype(npd)
    a[1, 2] = 1
    assert t.astype(hl.float64).numpy()[1, 2] == 1        # numpy write seen by hl
    t.fill_(0)
    assert a[1, 2] == 0                                   # hl write seen by numpy
    assert np.shares_memory(a, t.numpy())


def test_numpy_of_views_has_the_views_strides():
    t = hl.tensor(np.arange(24.0).reshape(2, 3, 4))
    for v, ref in [(t.T, np.arange(24.0).reshape(2, 3, 4).T),
                   (t[:, ::-2, 1:], np.arange(24.0).reshape(2, 3, 4)[:, ::-2, 1:]),
                   (t[0].expand(5, 3, 4), np.broadcast_to(np.arange(12.0).reshape(3, 4),
                                                          (5, 3, 4)))]:
        a = v.numpy()
        np.testing.assert_array_equal(a, ref)
        assert np.shares_memory(a, t.numpy())


def test_numpy_array_keeps_the_storage_alive():
    t = hl.tensor(np.arange(1000.0))
    a = t.numpy()
    v = t[10:20].numpy()
    del t
    gc.collect()
    for _ in range(20):                   # churn the allocator: the block must not be reused
        hl.full((1000,), -1.0, dtype=hl.float64)
    gc.collect()
    np.testing.assert_array_equal(a, np.arange(1000.0))
    np.testing.assert_array_equal(v, np.arange(10.0, 20.0))
    a[0] = 5.0                            # still writable, still ours


def test_tensor_is_collected():
    t = hl.zeros(3)
    r = weakref.ref(t)
    del t
    gc.collect()
    assert r() is None


def test_array_protocol():
    t = hl.tensor([[1, 2], [3, 4]], dtype=hl.int32)
    a = np.asarray(t)
    assert a.dtype == np.int32 and np.shares_memory(a, t.numpy())
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    c = np.array(t)
    assert not np.shares_memory(c, t.numpy())
    assert np.sum(t) == 10
    assert t.tolist() == [[1, 2], [3, 4]]
    assert hl.zeros(0, 2).numpy().shape == (0, 2)


# ---- scalars, printing, iteration ---------------------------------------------------------------

def test_scalar_conversions():
    assert hl.tensor(2.5).item() == 2.5 and isinstance(hl.tensor(2.5).item(), float)
    assert hl.tensor([[7]]).item() == 7 and isinstance(hl.tensor([7]).item(), int)
    assert float(hl.tensor([1.5])) == 1.5
    assert int(hl.tensor(3.9)) == 3
    assert bool(hl.tensor([True])) is True and bool(hl.tensor(0.0)) is False
    assert [10, 20, 30][hl.tensor(1)] == 20       # __index__
    with pytest.raises(TypeError, match="integer tensors"):
        [1, 2][hl.tensor(1.0)]
    with pytest.raises(errors.ValueError, match="one element"):
        hl.tensor([1, 2]).item()
    with pytest.raises(errors.ValueError, match="ambiguous"):
        bool(hl.tensor([1, 2]))
    with pytest.raises(errors.ValueError, match="one element"):
        hl.zeros(0).item()


def test_len_and_iter():
    t = hl.tensor(np.arange(6).reshape(3, 2))
    assert len(t) == 3
    rows = list(t)
    assert len(rows) == 3 and rows[2].numpy().tolist() == [4, 5]
    assert rows[1].shares_memory(t)
    assert list(hl.zeros(0, 2)) == []
    with pytest.raises(TypeError, match="0-d"):
        len(hl.tensor(1.0))
    with pytest.raises(TypeError, match="0-d"):
        iter(hl.tensor(1.0)).__next__()


@pytest.mark.parametrize("npd", NP_DTYPES, ids=_name)
def test_repr(npd):
    t = hl.tensor(np.array([[1, 0], [2, 1]]).astype(npd))
    r = repr(t)
    assert r.startswith("tensor([[") and f"dtype={np.dtype(npd).name}" in r
    assert str(t) == r
    assert "shape=(0, 3)" in repr(hl.zeros(0, 3))
    assert repr(hl.tensor(3)) == "tensor(3, dtype=int64)"
    assert "requires_grad=True" in repr(hl.tensor([1.0], requires_grad=True))


def test_large_repr_is_summarised():
    assert "..." in repr(hl.zeros(10000))


def test_to_and_astype():
    t = hl.tensor([1.5, -2.5])
    assert t.to("cpu") is t and t.to(hl.cpu()) is t and t.cpu() is t
    assert t.to(hl.float32) is t
    for spec in (hl.float64, "float64", np.float64):
        assert t.to(spec).dtype is hl.float64
    u = t.to("cpu", hl.int32)
    assert u.dtype is hl.int32 and u.numpy().tolist() == [1, -2]
    assert t.to(device="cpu", dtype="int64").dtype is hl.int64
    assert t.astype("bool").numpy().tolist() == [True, True]
    with pytest.raises(TypeError, match="unexpected"):
        t.to(colour="red")


def test_methods_reach_every_op():
    t = hl.tensor([1.0, 4.0])
    np.testing.assert_allclose(t.sqrt().numpy(), [1, 2])
    np.testing.assert_allclose(t.maximum(2.0).numpy(), [2, 4])
    with pytest.raises(AttributeError, match="no attribute 'not_an_op'"):
        t.not_an_op()
    with pytest.raises(AttributeError):
        t._private_thing


def test_hash_is_identity_and_eq_is_elementwise():
    a, b = hl.tensor([1.0]), hl.tensor([1.0])
    assert len({a, b}) == 2
    assert (a == b).dtype is hl.bool


def test_metadata():
    t = hl.tensor(np.zeros((2, 3, 4), np.float32))
    assert (t.ndim, t.size, t.numel(), t.strides) == (3, 24, 24, (12, 4, 1))
    assert t.T.strides == (1, 4, 12) and not t.T.is_contiguous() and t.is_contiguous()
    assert t.device == hl.cpu() and t.device == "cpu"


# ---- devices -----------------------------------------------------------------------------------

def test_device_names():
    assert str(hl.device("cuda")) == "cuda:0"
    assert hl.device("cuda:2") == hl.cuda(2)
    assert hl.device("cpu") == hl.cpu() and hl.device(None) == hl.get_default_device()
    assert hl.cuda(1) != hl.cuda(0)
    assert pickle.loads(pickle.dumps(hl.cuda(3))) == hl.cuda(3)
    with pytest.raises(errors.DeviceError, match="unknown device kind 'tpu'"):
        hl.device("tpu")
    with pytest.raises(errors.DeviceError, match=">= 0"):
        hl.Device("cuda", -1)
    with pytest.raises(errors.DeviceError, match="expected a device"):
        hl.device(3.5)


def test_cuda_tensors_without_a_backend_raise_device_error():
    """In a process where no CUDA backend serves (HL_CUDA=0 switches it off, as on a machine
    without one; this process may run the emulated one)."""
    code = """if True:
    import pytest, hl
    from hl import errors
    assert not hl.cuda_available()
    with pytest.raises(errors.DeviceError, match="cuda:0 is not available: HL_CUDA=0"):
        hl.tensor([1.0], device="cuda")
    with pytest.raises(errors.DeviceError, match="cuda:1 is not available"):
        hl.zeros(3, device="cuda:1")
    with pytest.raises(errors.DeviceError, match="to_device: device cuda:0 is not available"):
        hl.tensor([1.0]).to("cuda")
    with pytest.raises(errors.DeviceError, match="memory_stats: no backend"):
        hl.memory_stats("cuda")
    """
    env = {k: v for k, v in os.environ.items() if k != "HL_CUDA_EMULATE"}
    r = subprocess.run([sys.executable, "-c", code], env=dict(env, HL_CUDA="0"),
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_memory_stats():
    s = hl.memory_stats()
    assert set(s) == {"in_use", "cached", "peak"} and s["peak"] >= s["in_use"] >= 0
    hl.empty_cache()
    assert hl.memory_stats()["cached"] == 0


def test_threads():
    n = hl.get_num_threads()
    try:
        hl.set_num_threads(1)
        assert hl.get_num_threads() == 1
        np.testing.assert_array_equal((hl.arange(100000) + 1).numpy(), np.arange(100000) + 1)
    finally:
        hl.set_num_threads(n)


# ---- pickling -----------------------------------------------------------------------------------

@pytest.mark.parametrize("npd", NP_DTYPES, ids=_name)
def test_pickle_round_trip(npd, rng):
    x = (rng.standard_normal((3, 4)) * 5).astype(npd)
    t = hl.tensor(x)
    for v in (t, t.T, t[::2, 1:]):
        u = pickle.loads(pickle.dumps(v))
        assert u.dtype is v.dtype and u.shape == v.shape
        np.testing.assert_array_equal(u.numpy(), v.numpy())
        assert not u.shares_memory(v)


def test_pickle_keeps_flags():
    t = hl.Tensor([1.0, 2.0], requires_grad=True, stores_grad=True, name="w")
    u = pickle.loads(pickle.dumps(t))
    assert (u.requires_grad, u.stores_grad, u.name) == (True, True, "w")
    assert pickle.loads(pickle.dumps(hl.float16)) is hl.float16


# ---- plans: graph mode at the C level -----------------------------------------------------------

def _record(f):
    _core.plan_begin()
    try:
        out = f()
    finally:
        plan = _core.plan_end()
    return plan, out


def test_plan_records_and_replays():
    x = hl.tensor(np.array([1.0, 2.0, 3.0], np.float32))
    w = hl.tensor(np.array([0.5, -1.0, 2.0], np.float32))
    plan, y = _record(lambda: hl.exp(x * w + 1.0).sqrt())
    # mul, add, exp, sqrt (the scalar 1.0 is a constant 0-d tensor, written at once)
    assert _core.plan_size(plan) == 4
    y.fill_(-1.0)                       # recording allocated y but computed nothing
    _core.plan_run(plan)
    want = np.sqrt(np.exp(x.numpy() * w.numpy() + 1))
    np.testing.assert_allclose(y.numpy(), want, rtol=2e-6)
    # new inputs, written into the same tensors, give new results on replay
    x.copy_(np.array([0.0, -1.0, 4.0]))
    _core.plan_run(plan)
    np.testing.assert_allclose(y.numpy(), np.sqrt(np.exp(x.numpy() * w.numpy() + 1)), rtol=2e-6)


def test_plan_outputs_untouched_before_run():
    x = hl.tensor([1.0, 2.0])
    out = hl.full((2,), -7.0)
    plan, _ = _record(lambda: hl.add(x, x, out=out))
    with pytest.raises(errors.UnsupportedError, match="before the plan that computes it"):
        out.numpy()  # what a plan writes has no value until it runs (issue 24)
    _core.plan_run(plan)
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])
    out.fill_(0)
    _core.plan_run(plan)
    _core.plan_run(plan)
    np.testing.assert_array_equal(out.numpy(), [2.0, 4.0])


def test_plan_keeps_its_tensors_alive():
    x = hl.tensor([1.0, 2.0])
    out = hl.zeros(2)
    keep = out.numpy()
    plan, _ = _record(lambda: hl.neg(hl.exp(x), out=out))
    del x
    gc.collect()
    _core.plan_run(plan)
    np.testing.assert_allclose(keep, -np.exp([1.0, 2.0]), rtol=1e-6)
    del plan
    gc.collect()                                          # releases its references


def test_plan_errors():
    a, b = hl.zeros(2), hl.zeros(3)
    with pytest.raises(errors.ValueError, match="plan_end: no plan is being recorded"):
        _core.plan_end()
    _core.plan_begin()
    try:
        with pytest.raises(errors.ValueError, match="already being recorded"):
            _core.plan_begin()
        # argument checks still run while recording
        with pytest.raises(errors.ShapeError, match="add"):
            a + b
    finally:
        plan = _core.plan_end()
    assert _core.plan_size(plan) == 0
    _core.plan_run(plan)                                  # an empty plan runs
    with pytest.raises(errors.ValueError, match="plan_run: plan is NULL"):
        _core.plan_run(_core.ffi.NULL)
    assert _core.plan_size(_core.ffi.NULL) == 0


def test_plan_with_copies_and_views():
    x = hl.tensor(np.arange(6.0, dtype=np.float32).reshape(2, 3))
    y = hl.zeros(3, 2)
    plan, _ = _record(lambda: y.copy_(x.T * 2))
    with pytest.raises(errors.UnsupportedError, match="before the plan that computes it"):
        y.numpy()
    _core.plan_run(plan)
    np.testing.assert_array_equal(y.numpy(), np.arange(6.0).reshape(2, 3).T * 2)


def test_plan_defers_fills_of_new_tensors():
    """Tensors created while recording are allocated at once but filled on replay: a fill is
    a call like any other."""
    _core.plan_begin()
    try:
        z = hl.full((3,), 5.0)
    finally:
        plan = _core.plan_end()
    assert _core.plan_size(plan) == 1
    with pytest.raises(errors.UnsupportedError, match="before the plan that computes it"):
        z.numpy()  # allocated, not filled: no value until the plan runs
    _core.plan_run(plan)
    np.testing.assert_array_equal(z.numpy(), [5.0, 5.0, 5.0])


def test_ops_are_methods_but_constructors_are_not():
    x = hl.tensor(np.array([[1.0, -2.0], [3.0, 4.0]], dtype=np.float32))
    np.testing.assert_allclose(x.exp().numpy(), np.exp(x.numpy()), rtol=1e-6)
    np.testing.assert_array_equal(x.sum(axis=0).numpy(), x.numpy().sum(axis=0))
    np.testing.assert_array_equal(x.triu().numpy(), np.triu(x.numpy()))
    for name in ("zeros", "ones", "arange", "eye", "randn", "rand", "full", "linspace"):
        assert not hasattr(x, name), name
    with pytest.raises(AttributeError, match="no attribute 'no_such_op'"):
        x.no_such_op()


def test_plan_replays_draw_fresh_random_numbers_reproducibly():
    def record():
        hl.manual_seed(7)
        return _record(lambda: hl.rand(1000))

    plan, y = record()
    runs = []
    for _ in range(3):
        _core.plan_run(plan)
        runs.append(y.numpy().copy())
    # the first run draws what an eager call with the same seed draws
    hl.manual_seed(7)
    np.testing.assert_array_equal(runs[0], hl.rand(1000).numpy())
    # later runs draw new numbers (a dropout mask changes every step)...
    assert not np.array_equal(runs[0], runs[1]) and not np.array_equal(runs[1], runs[2])
    assert abs(np.corrcoef(runs[0], runs[1])[0, 1]) < 0.1
    # ...and the same plan recorded again replays the same sequence
    plan2, y2 = record()
    for want in runs:
        _core.plan_run(plan2)
        np.testing.assert_array_equal(y2.numpy(), want)


def test_python_scalars_are_reused_constants_that_keep_their_value():
    x = hl.tensor(np.array([1.0, -2.0], np.float32))
    # 0.0 and -0.0 are different constants (the sign shows in 1 / (x * 0.0))
    np.testing.assert_array_equal(np.signbit((x * 0.0).numpy()), [False, True])
    np.testing.assert_array_equal(np.signbit((x * -0.0).numpy()), [True, False])
    assert np.isnan((x + float("nan")).numpy()).all()
    # an in-place op with a scalar leaves the shared constant alone
    y = hl.tensor(np.array([5.0, 6.0], np.float32))
    y += 2.0
    y *= 2.0
    np.testing.assert_array_equal((x + 2.0).numpy(), [3.0, 0.0])
    np.testing.assert_array_equal(y.numpy(), [14.0, 16.0])
    # a constant first made while a plan records holds its value for eager use afterwards
    plan, _ = _record(lambda: x * 3.25)
    np.testing.assert_array_equal((x * 3.25).numpy(), [3.25, -6.5])
    # integer scalars stay exact and range-checked
    big = hl.tensor(np.array([2**62], np.int64))
    assert (big + 1).item() == 2**62 + 1
    with pytest.raises(hl.errors.ValueError, match="out of range"):
        hl.tensor(np.array([1], np.int32)) + 2**40
