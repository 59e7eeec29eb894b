"""Views (libcore tensor.c; hl/ops/shape.py): reshape / view, permute, transpose, T, squeeze,
unsqueeze, expand, flip, split, chunk, flatten against numpy. Views share storage (writes show
through both ways); reshape copies only when the strides leave no choice, by numpy's rule."""
import itertools

import numpy as np
import pytest

import hl
from hl import errors

from tests.ops.harness import LAYOUTS
from tests.ops.shapes import random_shape


def _same(t, a):
    assert t.shape == a.shape, (t.shape, a.shape)
    np.testing.assert_array_equal(t.numpy(), a)


def _data(shape, dtype=np.float32):
    return np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)


def _factorisations(n, rng, count=4):
    """Shapes with n elements, with -1 placed at random."""
    out = [(n,), (-1,), (1, n, 1)]
    for _ in range(count):
        dims, left = [], n
        for _ in range(int(rng.integers(1, 4))):
            divs = [d for d in range(1, left + 1) if left % d == 0] if left else [0, 1, 2]
            d = int(rng.choice(divs))
            dims.append(d)
            left = left // d if d else left
        dims.append(left if n else 3)
        if n and rng.random() < 0.5:
            dims[int(rng.integers(len(dims)))] = -1
        out.append(tuple(dims))
    return out


# ---- reshape / view -----------------------------------------------------------------------

@pytest.mark.parametrize("seed", range(6))
def test_reshape_matches_numpy(seed):
    rng = np.random.default_rng(seed)
    shape = random_shape(rng, 4, sizes=(1, 2, 3, 4))
    x = _data(shape)
    for layout, make in LAYOUTS.items():
        t = make(x)
        for new in _factorisations(x.size, rng):
            try:
                want = x.reshape(new)
            except ValueError:
                with pytest.raises(errors.HLError, match="reshape"):
                    t.reshape(*new)
                continue
            _same(t.reshape(*new), want)
            _same(t.reshape(new), want)


@pytest.mark.parametrize("seed", range(10))
def test_view_succeeds_exactly_when_numpy_needs_no_copy(seed):
    """For strided views of every kind, hl.view works iff numpy reshapes without a copy, and
    then it shares memory; hl.reshape always works, and shares memory in exactly those cases."""
    rng = np.random.default_rng(seed)
    base = _data((4, 6, 2))
    t_base = hl.tensor(base)
    views = [(lambda a: a), (lambda a: a[:, ::2]), (lambda a: a[1:3]),
             (lambda a: a.transpose(1, 0, 2)), (lambda a: a[::-1]), (lambda a: a[:, :3, :1]),
             (lambda a: a.transpose(2, 1, 0)[:, 1:5]),
             (lambda a: a[:1, :, ::-1]), (lambda a: a[0]), (lambda a: a[:, 0]),
             (lambda a: np.broadcast_to(a[:, :1], (4, 5, 2)))]
    for make in views:
        a = make(base)
        t = make_hl(t_base, make)
        for new in _factorisations(a.size, rng, 6):
            try:
                want = np.reshape(a, new, copy=False)
            except ValueError:
                with pytest.raises(errors.ValueError, match="cannot be viewed"):
                    t.view(*new)
                r = t.reshape(*new)
                _same(r, a.reshape(new))
                assert not r.shares_memory(t_base)
                continue
            v = t.view(*new)
            _same(v, want)
            assert v.shares_memory(t_base)


def make_hl(t, make):
    """Applies the numpy-style view recipe to an hl tensor (the same indexing works on both,
    except broadcast_to, which is expand in hl)."""
    if make.__code__.co_names and "broadcast_to" in make.__code__.co_names:
        return t[:, :1].expand(4, 5, 2)
    return make(t)


def test_reshape_view_versus_copy():
    t = hl.tensor(_data((3, 4)))
    r = t.reshape(2, 6)
    assert r.shares_memory(t)
    r[0, 0] = 100.0
    assert t.numpy()[0, 0] == 100.0
    c = t.T.reshape(12)
    assert not c.shares_memory(t)
    _same(c, t.numpy().T.reshape(12))
    with pytest.raises(errors.ValueError,
                       match=r"reshape: \(4, 3\) float32 with strides .* cannot be viewed as"):
        t.T.view(12)


def test_reshape_errors():
    t = hl.tensor(_data((2, 3)))
    with pytest.raises(errors.ShapeError,
                       match=r"cannot reshape \(2, 3\) float32 \(6 elements\) into \(4,\)"):
        t.reshape(4)
    with pytest.raises(errors.ValueError, match="only one dimension can be -1"):
        t.reshape(-1, -1)
    with pytest.raises(errors.ValueError, match="negative size"):
        t.reshape(-2, 3)
    with pytest.raises(errors.ShapeError, match="cannot reshape"):
        t.reshape(-1, 4)
    with pytest.raises(errors.ShapeError, match="cannot reshape"):
        hl.zeros(0, 3).reshape(0, -1)      # -1 is ambiguous with zero elements (as in numpy)
    with pytest.raises(errors.ShapeError, match="9 dimensions requested"):
        t.reshape(*[1] * 7, 2, 3)


def test_reshape_of_empty_and_scalar():
    _same(hl.zeros(0, 3).reshape(3, 0, 5), np.zeros((3, 0, 5), np.float32))
    _same(hl.tensor(5.0).reshape(1, 1), np.full((1, 1), 5.0, np.float32))
    _same(hl.tensor([5.0]).reshape(()), np.array(5.0, np.float32))
    _same(hl.tensor(5.0).reshape(-1), np.array([5.0], np.float32))


@pytest.mark.parametrize("shape,start,end", [((2, 3, 4), 0, -1), ((2, 3, 4), 1, 2), ((5,), 0, 0),
                                              ((), 0, -1), ((2, 0, 3), 0, 1), ((2, 3), -1, -1)])
def test_flatten(shape, start, end):
    x = _data(shape)
    s = start % max(x.ndim, 1)
    e = end % max(x.ndim, 1)
    want = x.reshape(x.shape[:s] + (-1,) + x.shape[e + 1:]) if x.ndim and x.size else (
        x.reshape(x.shape[:s] + (int(np.prod(x.shape[s:e + 1])),) + x.shape[e + 1:]) if x.ndim
        else x.reshape(1))
    _same(hl.tensor(x).flatten(start, end), want)


# ---- permute / transpose -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (1, 5), (3,), (), (2, 0, 3), (1, 2, 1, 2, 1)])
def test_permute_every_order(shape):
    x = _data(shape)
    t = hl.tensor(x)
    for perm in itertools.islice(itertools.permutations(range(x.ndim)), 24):
        v = t.permute(*perm)
        _same(v, x.transpose(perm))
        assert v.shares_memory(t)
        neg = [p - x.ndim for p in perm]
        _same(t.permute(neg), x.transpose(perm))


def test_transpose_forms():
    x = _data((2, 3, 4))
    t = hl.tensor(x)
    _same(t.T, x.T)
    _same(t.transpose(), x.transpose())
    _same(t.transpose(0, 2), x.swapaxes(0, 2))          # PyTorch: two axes swap
    _same(t.transpose(-1, 0), x.swapaxes(-1, 0))
    _same(t.transpose((2, 0, 1)), x.transpose(2, 0, 1))  # numpy: a permutation
    m = hl.tensor(_data((3, 5)))
    _same(m.transpose(1, 0), _data((3, 5)).T)
    _same(hl.tensor(4.0).T, np.array(4.0, np.float32))


def test_permute_errors():
    t = hl.tensor(_data((2, 3, 4)))
    with pytest.raises(errors.IndexError, match=r"permute: \(0, 0, 1\) is not a permutation"):
        t.permute(0, 0, 1)
    with pytest.raises(errors.IndexError, match="not a permutation"):
        t.permute(0, 1, 3)
    with pytest.raises(errors.IndexError, match="not a permutation"):
        t.permute(0, 1, -4)
    with pytest.raises(errors.ValueError, match="2 axes given for a tensor of 3"):
        t.permute(0, 1)
    with pytest.raises(errors.IndexError, match="transpose: axis 3"):
        t.transpose(0, 3)


# ---- squeeze / unsqueeze ----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(1, 3, 1, 2), (1,), (), (3,), (1, 1), (0, 1)])
def test_squeeze(shape):
    x = _data(shape)
    t = hl.tensor(x)
    _same(t.squeeze(), x.squeeze())
    for ax in range(-x.ndim, x.ndim):
        if x.shape[ax] == 1:
            _same(t.squeeze(ax), x.squeeze(ax))
            _same(hl.squeeze(t, [ax]), x.squeeze((ax,)))
        else:
            with pytest.raises(errors.ShapeError, match=f"squeeze: axis {ax} .* not 1"):
                t.squeeze(ax)
    ones = tuple(i for i, d in enumerate(x.shape) if d == 1)
    _same(t.squeeze(ones), x.squeeze(ones))
    assert t.squeeze().shares_memory(t)


def test_squeeze_errors():
    t = hl.zeros(1, 3, 1)
    with pytest.raises(errors.IndexError, match="squeeze: axis 3 is out of range"):
        t.squeeze(3)
    with pytest.raises(errors.IndexError, match="squeeze: axis -4"):
        t.squeeze(-4)
    with pytest.raises(errors.ValueError, match="squeeze: axis .* repeated"):
        t.squeeze((0, -3))
    with pytest.raises(errors.IndexError, match="squeeze"):
        hl.tensor(1.0).squeeze(0)


@pytest.mark.parametrize("shape", [(2, 3), (), (4,), (0, 2), (1, 2, 1, 2, 1, 2, 1)])
def test_unsqueeze(shape):
    x = _data(shape)
    t = hl.tensor(x)
    for ax in range(-x.ndim - 1, x.ndim + 1):
        u = t.unsqueeze(ax)
        _same(u, np.expand_dims(x, ax))
        assert u.shares_memory(t)
        assert hl.expand_dims(t, ax).shape == np.expand_dims(x, ax).shape
    # the views stay usable after a transpose, where the new axis' stride matters
    _same(t.T.unsqueeze(0).squeeze(0), x.T)


def test_unsqueeze_errors():
    with pytest.raises(errors.IndexError, match="unsqueeze: axis 3 is out of range"):
        hl.zeros(2, 3).unsqueeze(3)
    with pytest.raises(errors.IndexError, match="unsqueeze: axis -4"):
        hl.zeros(2, 3).unsqueeze(-4)
    with pytest.raises(errors.ShapeError, match="unsqueeze: .* already has the most dimensions"):
        hl.zeros(*[1] * 8).unsqueeze(0)


# ---- expand -----------------------------------------------------------------------------------

EXPAND = [((3, 1), (3, 4)), ((1,), (2, 3, 5)), ((), (2, 2)), ((2, 1, 3), (4, 2, 5, 3)),
          ((1, 1), (0, 3)), ((3,), (3,)), ((1, 4), (-1, 4)), ((2, 1), (-1, 6)),
          ((0,), (2, 0)), ((1,), (1, 1, 1, 1, 1, 1, 1, 7))]


@pytest.mark.parametrize("src,dst", EXPAND)
def test_expand(src, dst):
    x = _data(src)
    t = hl.tensor(x)
    target = tuple(s if s != -1 else src[i - (len(dst) - len(src))] for i, s in enumerate(dst))
    for layout, make in LAYOUTS.items():
        v = make(x).expand(*dst)
        _same(v, np.broadcast_to(x, target))
    assert t.expand(dst).shares_memory(t)
    assert hl.broadcast_to(t, dst).shape == target


@pytest.mark.parametrize("src,dst", [((3,), (4,)), ((2, 3), (3,)), ((2, 3), (3, 3)),
                                     ((1,), (-1, 3)), ((3,), (-2,)), ((1,), (2,) * 9)])
def test_expand_errors(src, dst):
    with pytest.raises((errors.ShapeError, errors.ValueError), match="expand"):
        hl.zeros(*src).expand(*dst)


def test_writes_through_an_expanded_view_reach_the_base():
    t = hl.zeros(3)
    e = t.expand(2, 3)                  # both rows alias t's three elements
    t.copy_(hl.tensor([1.0, 2.0, 3.0]))
    _same(e, np.array([[1, 2, 3], [1, 2, 3]], np.float32))


# ---- flip ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(2, 3, 4), (5,), (), (0, 3), (1, 4)])
def test_flip(shape):
    x = _data(shape)
    t = hl.tensor(x)
    _same(t.flip(), np.flip(x))
    for ax in range(-x.ndim, x.ndim):
        _same(t.flip(ax), np.flip(x, ax))
    for axes in itertools.combinations(range(x.ndim), 2):
        _same(t.flip(axes), np.flip(x, axes))
        _same(t.T.flip(axes), np.flip(x.T, axes))
    assert t.flip().shares_memory(t)
    _same(t.flip().flip(), x)


def test_flip_errors():
    t = hl.zeros(2, 3)
    with pytest.raises(errors.IndexError, match="flip: axis 2 is out of range"):
        t.flip(2)
    with pytest.raises(errors.ValueError, match="flip: axis .* repeated"):
        t.flip((0, 0))
    with pytest.raises(errors.IndexError, match="flip"):
        hl.tensor(1.0).flip(0)


# ---- split / chunk ----------------------------------------------------------------------------

@pytest.mark.parametrize("shape,sections,axis", [((6, 4), 3, 0), ((6, 4), 2, 1), ((2, 9), 3, -1),
                                                 ((0, 4), 2, 0), ((4,), 1, 0), ((4,), 4, 0)])
def test_split_sections(shape, sections, axis):
    x = _data(shape)
    t = hl.tensor(x)
    parts = hl.split(t, sections, axis)
    want = np.split(x, sections, axis)
    assert len(parts) == len(want)
    for p, w in zip(parts, want):
        _same(p, w)
        assert p.shares_memory(t)


@pytest.mark.parametrize("sizes", [[1, 2, 3], [6], [0, 6], [2, 0, 4], [3, 3]])
def test_split_sizes(sizes):
    x = _data((6, 2))
    parts = hl.split(hl.tensor(x).T, sizes, axis=1)
    want = np.split(x.T, np.cumsum(sizes)[:-1], axis=1)
    for p, w in zip(parts, want):
        _same(p, w)


@pytest.mark.parametrize("n,chunks", [(6, 3), (7, 3), (5, 2), (1, 4), (3, 3), (10, 4)])
def test_chunk_like_pytorch(n, chunks):
    torch = pytest.importorskip("torch")
    x = _data((n, 2))
    got = hl.chunk(hl.tensor(x), chunks)
    want = torch.chunk(torch.from_numpy(x), chunks)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        _same(g, w.numpy())


def test_split_errors():
    t = hl.zeros(6, 4)
    with pytest.raises(errors.ShapeError, match="split: axis 0 of size 6 does not divide into 4"):
        hl.split(t, 4)
    with pytest.raises(errors.ShapeError, match=r"split: sizes sum to 5 but axis 0 of \(6, 4\)"):
        hl.split(t, [2, 3])
    with pytest.raises(errors.ValueError, match="split: negative size -1"):
        hl.split(t, [7, -1])
    with pytest.raises(errors.IndexError, match="split: axis 2"):
        hl.split(t, 2, axis=2)
    with pytest.raises(errors.ShapeError, match="does not divide into 0"):
        hl.split(t, 0)


# ---- views compose and keep their storage ---------------------------------------------------

def test_chain_of_views_writes_through():
    t = hl.zeros(4, 5, 6)
    v = t.permute(2, 0, 1)[1:5:2].flip(1).unsqueeze(0).squeeze(0)[:, 1]
    v.fill_(3.0)
    want = np.zeros((4, 5, 6), np.float32)
    np.flip(want.transpose(2, 0, 1)[1:5:2], 1)[:, 1] = 3.0
    _same(t, want)


def test_views_outlive_their_base():
    import gc
    t = hl.tensor(_data((3, 4)))
    v = t.T[1:]
    del t
    gc.collect()
    _same(v, _data((3, 4)).T[1:])
