"""Writes into a broadcast view (a zero stride on an axis of size > 1) are refused.

Such a view has fewer memory elements than positions, so a kernel writing into it would hit
one element several times: `mul(e, 3.0, out=e)` on `e = ones(1).expand(4)` used to give 3**4.
numpy makes broadcast_to views read-only; libcore refuses them as outputs (hl_check_writable in
dispatch.c) with an hl.errors.ValueError, before anything is written. Writes into views whose
positions each have their own memory (transposed, strided, flipped, one row of a broadcast
view) keep working and are checked against numpy.
"""
import numpy as np
import pytest

import hl
from hl import errors

BROADCAST = r"is a broadcast view \(shape \(.*\), strides \(.*\)\): writing would hit one element"


def _base():
    """A (1, 3) float32 tensor every broadcast view below is made from."""
    return hl.tensor(np.array([[1.0, 2.0, 3.0]], dtype=np.float32))


# Broadcast views of shape (4, 3), each over _base()'s three elements.
VIEWS = {
    "expand": lambda b: b.expand(4, 3),
    "new axis": lambda b: b.reshape(3).expand(4, 3),
    "transposed": lambda b: b.reshape(3, 1).expand(3, 4).T,
    "strided slice": lambda b: b.expand(8, 3)[::2],
    "flipped": lambda b: b.expand(4, 3).flip(0),
    "reshaped": lambda b: b.expand(2, 2, 3).reshape(4, 3),
}

_x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
_i = np.array([[0, 2, 1], [1, 1, 0], [2, 0, 0], [0, 1, 2]], dtype=np.int64)


def _t(a):
    return hl.tensor(a)


# Every op with an out= (or another way to write into a given tensor), writing a (4, 3) float32.
WRITES = {
    "exp": lambda v: hl.exp(_t(_x), out=v),
    "relu (hl, differentiable namespace)": lambda v: hl.relu(_t(_x), out=v),
    "leaky_relu": lambda v: hl.leaky_relu(_t(_x), 0.1, out=v),
    "add": lambda v: hl.add(_t(_x), 1.0, out=v),
    "mul in place": lambda v: hl.mul(v, 3.0, out=v),
    "add (hl)": lambda v: hl.add(v, v, out=v),
    "maximum": lambda v: hl.maximum(_t(_x), _t(_x.T.copy()).T, out=v),
    "where": lambda v: hl.where(_t(_x > 0.5), _t(_x), 0.0, out=v),
    "clip": lambda v: hl.clip(_t(_x), 0.2, 0.8, out=v),
    "matmul": lambda v: hl.matmul(_t(np.ones((4, 5), np.float32)),
                                      _t(np.ones((5, 3), np.float32)), out=v),
    "gemm": lambda v: hl.gemm(_t(np.ones((4, 5), np.float32)),
                                  _t(np.ones((5, 3), np.float32)), v, beta=1.0, out=v),
    "dot": lambda v: hl.dot(_t(np.ones((4, 5), np.float32)),
                                _t(np.ones((5, 3), np.float32)), out=v),
    "sum": lambda v: hl.sum(_t(np.ones((4, 3, 2), np.float32)), axis=2, out=v),
    "mean": lambda v: hl.mean(_t(np.ones((4, 2, 3), np.float32)), axis=1, out=v),
    "max": lambda v: hl.max(_t(np.ones((4, 3, 2), np.float32)), axis=-1, out=v),
    "cumsum": lambda v: hl.cumsum(_t(_x), axis=0, out=v),
    "softmax": lambda v: hl.softmax(_t(_x), axis=1, out=v),
    "log_softmax": lambda v: hl.log_softmax(_t(_x), axis=0, out=v),
    "take": lambda v: hl.take(_t(np.ones((7, 3), np.float32)), _t(np.arange(4)), 0, out=v),
    "gather_elements": lambda v: hl.gather_elements(_t(_x), _t(_i), 1, out=v),
    "scatter_elements": lambda v: hl.scatter_elements(_t(_x), _t(_i), _t(_x), 1, out=v),
    "one_hot": lambda v: hl.ops.one_hot(_t(np.array([0, 1, 2, 0])), 3, out=v),
    "copy_": lambda v: v.copy_(_t(_x)),
    "copy_ of a scalar": lambda v: v.copy_(5.0),
    "fill_": lambda v: v.fill_(0.0),
    "setitem ...": lambda v: v.__setitem__(Ellipsis, 2.0),
    "setitem rows": lambda v: v.__setitem__(slice(1, 3), 2.0),
    "setitem column": lambda v: v.__setitem__((slice(None), 0), 2.0),
    "setitem mask": lambda v: v.__setitem__(_t(_x > 0.5), 2.0),
}


def _iadd(v):
    v += 1.0


def _isub(v):
    v -= 1.0


def _imul(v):
    v *= 2.0


def _idiv(v):
    v /= 2.0


WRITES.update({"+=": _iadd, "-=": _isub, "*=": _imul, "/=": _idiv})


@pytest.mark.parametrize("view", list(VIEWS))
@pytest.mark.parametrize("write", list(WRITES))
def test_writes_into_a_broadcast_view_are_refused(view, write):
    base = _base()
    before = base.numpy().copy()
    v = VIEWS[view](base)
    assert v.shape == (4, 3) and 0 in v.strides
    with pytest.raises(errors.ValueError, match=BROADCAST):
        WRITES[write](v)
    np.testing.assert_array_equal(base.numpy(), before)  # nothing was written


def test_the_message_names_the_op_shape_and_strides():
    e = hl.ones(1).expand(4)
    with pytest.raises(errors.ValueError) as info:
        hl.mul(e, 3.0, out=e)
    assert str(info.value).startswith(
        "mul: the output is a broadcast view (shape (4,), strides (0,)): writing would hit one "
        "element several times")
    assert "x.contiguous()" in str(info.value)
    np.testing.assert_array_equal(e.numpy(), [1, 1, 1, 1])


def test_batch_norm_refuses_broadcast_running_statistics_when_training():
    x = _t(np.random.default_rng(0).standard_normal((5, 3)).astype(np.float32))
    mean, var = hl.zeros(1), hl.ones(3)
    with pytest.raises(errors.ValueError, match="batch_norm: running_mean " + BROADCAST):
        hl.ops.batch_norm_forward(x, mean.expand(3), var, training=True)
    np.testing.assert_array_equal(mean.numpy(), [0])
    np.testing.assert_array_equal(var.numpy(), [1, 1, 1])
    # inference only reads them: a broadcast view is fine there
    got = hl.ops.batch_norm_forward(x, mean.expand(3), var, training=False)
    want = hl.ops.batch_norm_forward(x, hl.zeros(3), var, training=False)
    np.testing.assert_array_equal(got.numpy(), want.numpy())


def test_numpy_view_of_a_broadcast_view_is_read_only():
    base = _base()
    arr = base.expand(4, 3).numpy()
    assert not arr.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        arr[0, 0] = 9
    assert base.numpy().flags.writeable  # an ordinary tensor's view stays writable
    np.testing.assert_array_equal(base.numpy(), [[1, 2, 3]])


# ---- what still works ------------------------------------------------------------------------

def _strided_views():
    """(name, hl view, numpy view of the same memory layout) over a fresh (4, 6) tensor each."""
    def make(f):
        a = np.arange(24, dtype=np.float32).reshape(4, 6)
        t = hl.tensor(a)
        return t, f(t), a, f(a)
    return {
        "transposed": make(lambda a: a.T),
        "strided slice": make(lambda a: a[::2, 1::2]),
        "negative step": make(lambda a: a[::-1, ::-3]),
        "column": make(lambda a: a[:, 4]),
    }


@pytest.mark.parametrize("name", ["transposed", "strided slice", "negative step", "column"])
def test_writes_into_strided_views_still_work(name):
    t, v, a, av = _strided_views()[name]
    assert not v.is_contiguous() and 0 not in v.strides
    src = np.linspace(-1, 1, av.size, dtype=np.float32).reshape(av.shape)
    steps = [
        (lambda: hl.mul(v, 3.0, out=v), lambda: np.multiply(av, 3.0, out=av)),
        (lambda: hl.add(_t(src), v, out=v), lambda: np.add(src, av, out=av)),
        (lambda: v.__iadd__(1.0), lambda: av.__iadd__(1.0)),
        (lambda: v.__setitem__(Ellipsis, v * 2.0), lambda: av.__setitem__(Ellipsis, av * 2.0)),
        (lambda: hl.exp(_t(src), out=v), lambda: np.exp(src, out=av)),
        (lambda: v.fill_(-2.0), lambda: av.fill(-2.0)),
        # a broadcast *source* is fine
        (lambda: v.copy_(_t(src[..., :1])), lambda: av.__setitem__(Ellipsis, src[..., :1])),
    ]
    for hl_step, np_step in steps:
        hl_step()
        np_step()
        np.testing.assert_allclose(t.numpy(), a, rtol=1e-6, atol=0)


def test_writes_touching_each_element_once_are_allowed():
    # A size-1 axis may have stride 0; a view with no elements writes nothing; one row of a
    # broadcast view is an ordinary view of the base (the write shows through all rows).
    base = _base()
    hl.zeros(3).expand(1, 3).fill_(1.0)  # stride 0 on a size-1 axis
    empty = hl.ones(1).expand(0)
    hl.mul(empty, 2.0, out=empty)
    e = base.expand(4, 3)
    e[2] = _t(np.array([7, 8, 9], dtype=np.float32))
    np.testing.assert_array_equal(base.numpy(), [[7, 8, 9]])
    np.testing.assert_array_equal(e.numpy(), np.tile([[7, 8, 9]], (4, 1)))
    e[1, 1] = 0.0
    np.testing.assert_array_equal(base.numpy(), [[7, 0, 9]])


def test_only_zero_strides_make_views_overlap(rng):
    """The core only checks zero strides because hl's views cannot make positions overlap any
    other way (there is no as_strided): random chains of views over an arange either have a
    zero stride on an axis of size > 1 or read distinct elements."""
    for _ in range(300):
        t = hl.arange(2 * 3 * 4 * 5, dtype=hl.float32).reshape(2, 3, 4, 5)
        for _ in range(int(rng.integers(1, 6))):
            t = _random_view(t, rng)
        broadcast = any(s == 0 and d > 1 for d, s in zip(t.shape, t.strides))
        values = t.numpy().ravel()
        assert broadcast or len(set(values.tolist())) == values.size, (t.shape, t.strides)
        if not broadcast and t.size:
            t.fill_(-1.0)  # accepted: every position has its own element


def _random_view(t, rng):
    kind = rng.integers(6) if t.ndim else 5
    if kind == 0:
        return t.permute(*rng.permutation(t.ndim).tolist())
    if kind == 1:
        key = []
        for d in t.shape:
            step = int(rng.choice([1, 2, 3, -1, -2]))
            key.append(slice(None, None, step) if d else slice(None))
        return t[tuple(key)]
    if kind == 2:
        return t.flip(int(rng.integers(t.ndim)))
    if kind == 3:
        return t[int(rng.integers(t.shape[0]))] if t.shape[0] else t
    if kind == 4 and t.ndim < 6:
        shape = list(t.shape)
        ones = [i for i, d in enumerate(shape) if d == 1]
        if ones and rng.random() < 0.5:
            shape[int(rng.choice(ones))] = int(rng.integers(2, 4))
            return t.expand(*shape)
        return t.unsqueeze(int(rng.integers(t.ndim + 1)))
    try:  # a reshape that stays a view, when the strides allow one
        return t.view(-1) if t.ndim else t.reshape(1)
    except errors.ValueError:
        return t
