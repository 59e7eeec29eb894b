"""hl.singa.tensor, device and singa_wrap against SINGA's documented behaviour (python/singa/
tensor.py, device.py and the C++ Tensor they wrap); expected values from numpy."""

import numpy as np
import pytest

import hl
from hl import errors
from hl.singa import device, singa_wrap, tensor


def arr(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


# ---- construction ---------------------------------------------------------------------------

def test_tensor_forms_and_fields(rng):
    dev = device.get_default_device()
    t = tensor.Tensor((2, 3), dev, tensor.float32)
    assert t.shape == (2, 3) and t.dtype is tensor.float32 and t.device.id() == -1
    assert t.ndim() == 2 and t.size() == 6 and t.memsize() == 24  # SINGA's methods
    assert t.ndim == 2 and t.size == 6                              # still numbers for hl
    assert t.requires_grad and not t.stores_grad                   # SINGA's defaults
    np.testing.assert_array_equal(tensor.to_numpy(t), np.zeros((2, 3), np.float32))
    a = arr(rng, 4, 5)
    u = tensor.Tensor(device=dev, data=a)
    np.testing.assert_array_equal(tensor.to_numpy(u), a)
    assert tensor.Tensor((3,), dtype=tensor.int32).dtype is tensor.int32
    assert tensor.Tensor((3,), dtype=2).dtype is tensor.int32      # SINGA's core.proto codes
    assert isinstance(u, hl.Tensor)                                # hl's ops take it as it is
    assert isinstance(u.data, singa_wrap.Tensor) and u.data.shape() == (4, 5)
    assert u.grad is None


def test_from_numpy_narrows_like_singa(rng):
    """SINGA keeps float32, float16 and int32: float64 -> float32, int64 -> int32."""
    assert tensor.from_numpy(np.zeros(3)).dtype is tensor.float32
    assert tensor.from_numpy(np.zeros(3, np.int64)).dtype is tensor.int32
    assert tensor.from_numpy(np.zeros(3, np.float16)).dtype is tensor.float16
    with pytest.raises(errors.ValueError):
        tensor.from_numpy([1, 2])


def test_copy_from_numpy_copy_data_and_shallow_copy(rng):
    t = tensor.Tensor((2, 3))
    a = arr(rng, 2, 3)
    t.copy_from_numpy(a)
    np.testing.assert_array_equal(tensor.to_numpy(t), a)
    t.copy_from_numpy(np.array([7, 8], np.float32), offset=4)   # offset into the flat data
    assert tensor.to_numpy(t).reshape(-1)[4:].tolist() == [7, 8]
    with pytest.raises(errors.ShapeError):
        t.copy_from_numpy(np.zeros(7, np.float32))
    s = tensor.Tensor((3, 2))
    s.copy_data(t)                                              # same size, any shape
    np.testing.assert_array_equal(tensor.to_numpy(s).reshape(-1), tensor.to_numpy(t).reshape(-1))
    shallow, deep = t.copy(), t.deepcopy()                      # SINGA: copy() shares memory
    t += 1.0
    np.testing.assert_array_equal(tensor.to_numpy(shallow), tensor.to_numpy(t))
    np.testing.assert_array_equal(tensor.to_numpy(deep) + 1.0, tensor.to_numpy(t))


def test_in_place_and_operators_match_numpy(rng):
    a, b = arr(rng, 3, 4), arr(rng, 3, 4)
    x, y = tensor.from_numpy(a), tensor.from_numpy(b)
    w = tensor.from_numpy(a)
    w += 2.5                     # on a tensor that requires a gradient, as SINGA allows
    w *= y
    w -= 1
    w /= 4
    np.testing.assert_allclose(tensor.to_numpy(w), ((a + 2.5) * b - 1) / 4, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(x + y), a + b, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(2 - x), 2 - a, rtol=1e-6)
    np.testing.assert_allclose(tensor.to_numpy(2 / y), 2 / b, rtol=1e-5)
    lt = x < 0.1                 # SINGA's comparisons give 0/1 floats
    assert lt.dtype is tensor.float32
    np.testing.assert_array_equal(tensor.to_numpy(lt), (a < 0.1).astype(np.float32))
    assert (x == None) is False  # noqa: E711 - SINGA's __eq__ with None
    assert isinstance(x + y, tensor.Tensor)


def test_getitem_keeps_the_axis_like_singa(rng):
    a = arr(rng, 2, 3)
    x = tensor.from_numpy(a)
    assert x[0].shape == (1, 3)                   # SliceOn(key, key + 1): the axis stays
    np.testing.assert_array_equal(tensor.to_numpy(x[1, 1:]), a[1:2, 1:])


def test_random_fills(rng):
    device.get_default_device().SetRandSeed(3)
    x = tensor.Tensor((20000,)).gaussian(1.0, 0.5)
    v = tensor.to_numpy(x)
    assert abs(v.mean() - 1.0) < 0.02 and abs(v.std() - 0.5) < 0.02
    u = tensor.to_numpy(tensor.Tensor((20000,)).uniform(-2, 3))
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.05
    b = tensor.to_numpy(tensor.Tensor((20000,)).bernoulli(0.3))
    assert set(np.unique(b)) <= {0.0, 1.0} and abs(b.mean() - 0.3) < 0.02
    device.get_default_device().SetRandSeed(3)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.Tensor((5,)).gaussian(1.0, 0.5)),
                                  v[:5])              # seeded: the same draw again
    t = tensor.Tensor((4,))
    assert t.set_value(3) is t and tensor.to_numpy(t).tolist() == [3, 3, 3, 3]


def test_norms_are_singas(rng):
    a = arr(rng, 4, 5)
    x = tensor.from_numpy(a)
    # SINGA's Tensor::l1 is sum|x| / size, l2 is ||x||_2 / size (tensor.cc)
    assert x.l1() == pytest.approx(np.abs(a).sum() / a.size, rel=1e-5)
    assert x.l2() == pytest.approx(np.sqrt((a.astype(np.float64) ** 2).sum()) / a.size,
                                   rel=1e-5)


def test_module_functions_match_numpy(rng):
    a, b, c = arr(rng, 3, 4), arr(rng, 4, 5), arr(rng, 3, 5)
    x, w, m = tensor.from_numpy(a), tensor.from_numpy(b), tensor.from_numpy(c)
    close = np.testing.assert_allclose
    close(tensor.to_numpy(tensor.mult(x, w)), a @ b, rtol=1e-5, atol=1e-6)
    out = tensor.from_numpy(c)
    r = tensor.mult(x, w, out, alpha=2.0, beta=0.5)              # C = alpha A B + beta C
    assert r is out
    close(tensor.to_numpy(out), 2 * a @ b + 0.5 * c, rtol=1e-5, atol=1e-5)
    close(tensor.to_numpy(tensor.add(x, x)), a + a)
    close(tensor.to_numpy(tensor.sub(x, 1.0)), a - 1)
    close(tensor.to_numpy(tensor.eltwise_mult(x, x)), a * a, rtol=1e-6)
    close(tensor.to_numpy(tensor.div(x, 2.0)), a / 2)
    close(tensor.to_numpy(tensor.sum(x, 0)), a.sum(0), rtol=1e-5, atol=1e-6)
    close(tensor.to_numpy(tensor.sum(x)), a.sum(), rtol=1e-5, atol=1e-5)
    assert tensor.average(x) == pytest.approx(a.mean(), rel=1e-5, abs=1e-6)
    close(tensor.to_numpy(tensor.average(x, 1)), a.mean(1), rtol=1e-5, atol=1e-6)
    e = np.exp(a - a.max(1, keepdims=True))
    close(tensor.to_numpy(tensor.softmax(x)), e / e.sum(1, keepdims=True), rtol=1e-5)
    close(tensor.to_numpy(tensor.reshape(x, (4, 3))), a.reshape(4, 3))
    close(tensor.to_numpy(tensor.transpose(x)), a.T)
    close(tensor.to_numpy(x.transpose((1, 0))), a.T)
    close(tensor.to_numpy(x.T()), a.T)
    for f, g in ((tensor.exp, np.exp), (tensor.abs, np.abs), (tensor.tanh, np.tanh),
                 (tensor.sign, np.sign), (tensor.square, np.square), (tensor.ceil, np.ceil)):
        close(tensor.to_numpy(f(x)), g(a), rtol=1e-5, atol=1e-6)
    close(tensor.to_numpy(tensor.pow(tensor.abs(x), 1.5)), np.abs(a) ** 1.5, rtol=1e-5)
    p = tensor.from_numpy(np.abs(a) + 0.5)
    close(tensor.to_numpy(tensor.log(p)), np.log(np.abs(a) + 0.5), rtol=1e-5)
    close(tensor.to_numpy(tensor.sqrt(p)), np.sqrt(np.abs(a) + 0.5), rtol=1e-5)
    close(tensor.to_numpy(tensor.sigmoid(x)), 1 / (1 + np.exp(-a)), rtol=1e-5)
    for f, g in ((tensor.lt, np.less), (tensor.le, np.less_equal), (tensor.gt, np.greater),
                 (tensor.ge, np.greater_equal), (tensor.eq, np.equal)):
        np.testing.assert_array_equal(tensor.to_numpy(f(x, 0.2)), g(a, 0.2).astype(np.float32))
    big = arr(rng, 2, 3, 4)
    close(tensor.to_numpy(tensor.tensordot(tensor.from_numpy(big), tensor.from_numpy(b), 1)),
          np.tensordot(big, b, 1), rtol=1e-5, atol=1e-5)
    close(tensor.to_numpy(tensor.tensordot(tensor.from_numpy(big), tensor.from_numpy(big),
                                           ([1, 2], [1, 2]))),
          np.tensordot(big, big, ([1, 2], [1, 2])), rtol=1e-4, atol=1e-4)
    close(tensor.to_numpy(tensor.einsum("ij,jk->ik", x, w)), a @ b, rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(tensor.to_numpy(tensor.repeat(x, 2, 1)), np.repeat(a, 2, 1))
    np.testing.assert_array_equal(tensor.to_numpy(x.repeat([1, 2, 1], 0)),
                                  np.repeat(a, [1, 2, 1], 0))
    close(tensor.to_numpy(tensor.concatenate([x, x], 1)), np.concatenate([a, a], 1))
    close(tensor.to_numpy(tensor.sum_columns(x)), a.sum(1, keepdims=True), rtol=1e-5)
    close(tensor.to_numpy(tensor.sum_rows(x)), a.sum(0, keepdims=True), rtol=1e-5, atol=1e-6)
    v, r = rng.standard_normal(3).astype(np.float32), rng.standard_normal(4).astype(np.float32)
    mm = tensor.from_numpy(a)
    tensor.add_column(2.0, tensor.from_numpy(v), 0.5, mm)     # M = alpha v + beta M per column
    close(tensor.to_numpy(mm), 0.5 * a + 2 * v[:, None], rtol=1e-5)
    mm = tensor.from_numpy(a)
    tensor.add_row(2.0, tensor.from_numpy(r), 0.5, mm)
    close(tensor.to_numpy(mm), 0.5 * a + 2 * r, rtol=1e-5)
    yy = tensor.from_numpy(a)
    tensor.axpy(3.0, x, yy)                                    # y += alpha x
    close(tensor.to_numpy(yy), 4 * a, rtol=1e-6)
    assert tensor.product((2, 3, 4)) == 24 and tensor.sizeof(tensor.float16) == 2
    np.testing.assert_array_equal(tensor.to_numpy(tensor.zeros((2, 2))), np.zeros((2, 2)))
    np.testing.assert_array_equal(tensor.to_numpy(tensor.ones_like(x)), np.ones((3, 4)))


def test_copy_data_to_from_and_raw_tensors(rng):
    t, s = tensor.Tensor((2, 3)).set_value(1.0), tensor.Tensor((2, 3)).set_value(5.0)
    tensor.copy_data_to_from(t, s, 2)              # the first 2 elements only
    assert tensor.to_numpy(t).reshape(-1).tolist() == [5, 5, 1, 1, 1, 1]
    tensor.copy_data_to_from(t, s, 2, dst_offset=4, src_offset=1)
    assert tensor.to_numpy(t).reshape(-1).tolist() == [5, 5, 1, 1, 5, 5]
    raw = singa_wrap.Tensor([2, 2])
    singa_wrap.Gaussian(0.0, 1.0, raw)
    assert raw.shape() == (2, 2) and raw.nDim() == 2 and raw.Size() == 4
    x = tensor.from_raw_tensor(raw)                # shares the memory
    x += 1.0
    np.testing.assert_array_equal(np.asarray(raw), tensor.to_numpy(x))
    assert raw.device().id() == -1 and raw.data_type() is tensor.float32


def test_to_device_and_as_type(rng):
    x = tensor.from_numpy(arr(rng, 2, 2))
    x.to_device(device.create_cpu_device())
    assert x.device.id() == -1
    y = x.as_type(tensor.int32)
    assert y.dtype is tensor.int32 and x.dtype is tensor.float32
    x.to_type(tensor.float16)
    assert x.dtype is tensor.float16


# ---- device ----------------------------------------------------------------------------------

def test_devices():
    cpu = device.create_cpu_device()
    assert cpu is device.get_default_device() and cpu.id() == -1
    assert isinstance(cpu, hl.Device) and cpu == hl.cpu()
    if not hl.cuda_available():
        for make in (device.create_cuda_gpu, lambda: device.create_cuda_gpu_on(0)):
            with pytest.raises(errors.DeviceError, match="CUDA"):
                make()
        assert singa_wrap.USE_CUDA is False and device.get_num_gpus() == 0
    cpu.Sync()
    cpu.SetVerbosity(1)
    assert cpu.verbosity() == 1
    cpu.SetVerbosity(0)
