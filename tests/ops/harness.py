"""The shared op-test harness.

An op test names a function on hl tensors, the numpy reference, the inputs and the tolerance;
``check_op`` then runs it on contiguous inputs, on non-contiguous views of the same values
(transposed, strided and offset storage) and compares each with numpy. ``check_guard`` checks
that an op writing into a caller's output touches nothing past it. ``numeric_grad`` gives
central finite differences in float64 for the gradient checks of the autograd layer.

Tolerances: float32 results compare with rtol 1e-5 / atol 1e-6 unless the op says otherwise
(transcendental ops 1e-5 relative; sums of many terms scale atol with the count).
"""
import numpy as np

import hl


def noncontiguous(arr):
    """An hl tensor with arr's values whose storage is not contiguous: the values sit at every
    second element of a larger buffer, with the last axis reversed and restored."""
    arr = np.asarray(arr)
    if arr.ndim == 0:
        return hl.tensor(arr)
    big_shape = arr.shape[:-1] + (arr.shape[-1] * 2 + 1,)
    big = np.zeros(big_shape, dtype=arr.dtype)
    big[..., 1::2] = arr
    t = hl.tensor(big)[..., 1::2]
    assert not t.is_contiguous() or arr.shape[-1] <= 1
    return t


def transposed(arr):
    """An hl tensor with arr's values held in transposed (column-major) storage."""
    arr = np.asarray(arr)
    if arr.ndim < 2:
        return noncontiguous(arr)
    axes = tuple(reversed(range(arr.ndim)))
    return hl.tensor(np.ascontiguousarray(arr.transpose(axes))).permute(*axes)


LAYOUTS = {
    "contiguous": lambda a: hl.tensor(np.asarray(a)),
    "strided": noncontiguous,
    "transposed": transposed,
}


def assert_close(got, want, rtol=1e-5, atol=1e-6, what=""):
    got = np.asarray(got.numpy() if isinstance(got, hl.Tensor) else got)
    want = np.asarray(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != numpy's {want.shape}"
    if want.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)


def check_op(hl_fn, np_fn, inputs, rtol=1e-5, atol=1e-6, layouts=tuple(LAYOUTS), check_dtype=True):
    """hl_fn(*tensors) against np_fn(*arrays), for every layout of the inputs."""
    want = np_fn(*inputs)
    for name in layouts:
        tensors = [LAYOUTS[name](a) if isinstance(a, np.ndarray) else a for a in inputs]
        got = hl_fn(*tensors)
        if isinstance(want, tuple):
            for g, w in zip(got, want):
                assert_close(g, w, rtol, atol, f"{name} inputs")
        else:
            if check_dtype and isinstance(got, hl.Tensor):
                assert got.dtype.np == np.asarray(want).dtype, \
                    f"{name}: dtype {got.dtype} != numpy's {np.asarray(want).dtype}"
            assert_close(got, want, rtol, atol, f"{name} inputs")


def check_guard(write_into, shape, dtype=hl.float32, guard=17):
    """write_into(out) must fill exactly out: the elements of the buffer around the view are
    left as they were. Returns the output view for further checks."""
    n = int(np.prod(shape))
    buf = hl.full((n + 2 * guard,), -12345 if dtype is not hl.bool else True, dtype=dtype)
    # what the guard holds after the fill (-12345 saturates in uint8, is True in bool)
    want = buf.numpy().copy()
    out = buf[guard:guard + n].reshape(*shape)
    write_into(out)
    got = buf.numpy()
    assert (got[:guard] == want[:guard]).all() and (got[guard + n:] == want[guard + n:]).all(), \
        "op wrote outside its output"
    return out


def numeric_grad(f, x, eps=1e-6):
    """Central finite differences of the scalar function f at the float64 array x."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):  # (np.nditer refuses empty arrays)
        old = x[i]
        x[i] = old + eps
        fp = f(x)
        x[i] = old - eps
        fm = f(x)
        x[i] = old
        g[i] = (fp - fm) / (2 * eps)
    return g
