"""Gradients of the shape ops (views, indexing, split/concat/stack, pad, tile) against finite
differences (float64) and PyTorch (float32), that views stay views while recording, and shape
inference with placeholders. Tolerances are the harness's."""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad, check_torch, randn
from tests.autograd.infer_check import check_infer

F = hl.autograd.functional

# name: (hl function, torch function, input shapes); each also runs on a transposed input
VIEWS = {
    "reshape": (lambda a: a.reshape(4, -1), lambda a: a.reshape(4, -1), (2, 3, 4)),
    "reshape_tuple": (lambda a: a.reshape((6, 4)), lambda a: a.reshape(6, 4), (2, 3, 4)),
    "view": (lambda a: a.view(6, 4), lambda a: a.reshape(6, 4), (2, 3, 4)),
    "flatten": (lambda a: a.flatten(), lambda a: a.flatten(), (2, 3, 4)),
    "flatten_1": (lambda a: a.flatten(1), lambda a: a.flatten(1), (2, 3, 4)),
    "flatten_0_1": (lambda a: a.flatten(0, 1), lambda a: a.flatten(0, 1), (2, 3, 4)),
    "permute": (lambda a: a.permute(2, 0, 1), lambda a: a.permute(2, 0, 1), (2, 3, 4)),
    "permute_neg": (lambda a: a.permute(-1, 0, -2), lambda a: a.permute(-1, 0, -2), (2, 3, 4)),
    "transpose_all": (lambda a: a.transpose(), lambda a: a.permute(2, 1, 0), (2, 3, 4)),
    "transpose_pair": (lambda a: a.transpose(0, -1), lambda a: a.transpose(0, -1), (2, 3, 4)),
    "transpose_perm": (lambda a: a.transpose((1, 2, 0)), lambda a: a.permute(1, 2, 0),
                       (2, 3, 4)),
    "T": (lambda a: a.T, lambda a: a.T, (3, 4)),
    "squeeze_all": (lambda a: a.squeeze(), lambda a: a.squeeze(), (1, 3, 1, 4)),
    "squeeze_one": (lambda a: a.squeeze(2), lambda a: a.squeeze(2), (1, 3, 1, 4)),
    "squeeze_two": (lambda a: a.squeeze((0, 2)), lambda a: a.squeeze((0, 2)), (1, 3, 1, 4)),
    "unsqueeze": (lambda a: a.unsqueeze(1), lambda a: a.unsqueeze(1), (3, 4)),
    "unsqueeze_end": (lambda a: a.unsqueeze(-1), lambda a: a.unsqueeze(-1), (3, 4)),
    "expand": (lambda a: a.expand(2, 3, 4), lambda a: a.expand(2, 3, 4), (3, 1)),
    "expand_keep": (lambda a: a.expand(5, -1, 4), lambda a: a.expand(5, -1, 4), (1, 3, 1)),
    "broadcast_to": (lambda a: a.broadcast_to((2, 3, 4)), lambda a: a.broadcast_to((2, 3, 4)),
                     (4,)),
    "flip_all": (lambda a: a.flip(), lambda a: a.flip(tuple(range(a.ndim))), (2, 3, 4)),
    "flip_one": (lambda a: a.flip(1), lambda a: a.flip(1), (2, 3, 4)),
    "flip_two": (lambda a: a.flip((0, 2)), lambda a: a.flip((0, 2)), (2, 3, 4)),
}


def _transposed(f):
    """f applied to a transposed (non-contiguous) view of the input."""
    return lambda a: f(a.permute(*reversed(range(a.ndim))))


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views(name):
    f, t, shape = VIEWS[name]
    x = randn(*shape, seed=1)
    check_grad(f, [x])
    check_torch(f, t, [x])
    check_infer(f, [x])
    if name not in ("view",) and len(shape) > 1:  # the same on a non-contiguous input
        xt = np.ascontiguousarray(x.transpose(*reversed(range(x.ndim))))
        check_grad(_transposed(f), [xt])
        check_torch(_transposed(f), _transposed(t), [xt])


@pytest.mark.parametrize("f", [lambda a: a.reshape(6, 4), lambda a: a.permute(2, 0, 1),
                               lambda a: a[1:, ::2], lambda a: a.expand(5, 2, 3, 4),
                               lambda a: a.flip(1), lambda a: a.squeeze(), lambda a: a[0],
                               lambda a: F.split(a, 3, axis=1)[1], lambda a: a.T])
def test_views_stay_views_while_recording(f):
    x = hl.tensor(randn(2, 3, 4), requires_grad=True)
    y = f(x)
    assert y.requires_grad and y.creator is not None
    assert y.shares_memory(x)


# keys that torch indexes the same way (no negative steps there)
KEYS = [1, -1, (0, 2), (slice(None), 1), (slice(1, None), None, slice(None, None, 2)),
        (Ellipsis, 1), (None, Ellipsis, slice(0, 3)), (1, slice(None), -2), slice(0, 0),
        [0, 1, 1, 0, 1], (slice(None), [2, 0, 2]), (Ellipsis, [[1, 1], [3, 0]]),
        (slice(None), 1, [0, 0, 3])]


def _torch_key(key):
    import torch
    if isinstance(key, list):
        return torch.tensor(key)
    if isinstance(key, tuple):
        return tuple(torch.tensor(k) if isinstance(k, list) else k for k in key)
    return key


@pytest.mark.parametrize("key", KEYS, ids=[str(k) for k in KEYS])
def test_getitem(key):
    x = randn(2, 3, 4, seed=2)
    check_grad(lambda a: a[key], [x])
    check_torch(lambda a: a[key], lambda a: a[_torch_key(key)], [x])
    check_infer(lambda a: a[key], [x])


@pytest.mark.parametrize("key", [(slice(None, None, -1),), (slice(None), slice(None, None, -2)),
                                 (slice(3, 0, -2), [1, 0, 1]), ([2, 0], slice(None), 1),
                                 (1, [0, 2], slice(None, None, -1)),
                                 (1, slice(None), [0, 0, 3]), (0, slice(None), [1, 1])],
                         ids=str)
def test_getitem_negative_steps_and_separated_arrays(key):
    """Keys torch does not take, or reads differently from numpy (an int and an array apart
    put the array's axes first in numpy, not in torch): against numpy's forward and finite
    differences."""
    x = randn(4, 3, 4, seed=3)
    np.testing.assert_array_equal(hl.tensor(x)[key].numpy(), x[key])
    check_grad(lambda a: a[key], [x])
    check_infer(lambda a: a[key], [x])


def test_getitem_of_transposed_input():
    x = randn(4, 3, seed=4)
    check_grad(lambda a: a.T[1:, [0, 0, 3]], [x])
    check_torch(lambda a: a.T[1:, [0, 0, 3]], lambda a: a.T[1:, _torch_key([0, 0, 3])], [x])


def test_getitem_repeated_indices_accumulate():
    t = hl.tensor(np.arange(4.0), requires_grad=True)
    t[[1, 1, 3, 1]].sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [0, 3, 0, 1])


@pytest.mark.parametrize("mask_shape", [(3, 4), (3,)])
def test_getitem_bool_mask(mask_shape):
    x = randn(3, 4, seed=5)
    mask = np.random.default_rng(6).random(mask_shape) > 0.5
    check_grad(lambda a: a[mask], [x])
    check_torch(lambda a: a[hl.tensor(mask)], lambda a: a[__import__("torch").tensor(mask)], [x])
    check_infer(lambda a: a[mask], [x])


def test_getitem_with_tensor_index():
    idx = hl.tensor(np.array([2, 0, 2]))
    check_grad(lambda a: a[:, idx], [randn(2, 3, seed=7)])
    check_infer(lambda a: a[:, idx], [randn(2, 3)])


@pytest.mark.parametrize("shapes,axis", [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 2)], -1),
                                         ([(2, 0, 2), (2, 3, 2)], 1), ([(3,)], 0)])
def test_concat(shapes, axis):
    xs = [randn(*s, seed=i) for i, s in enumerate(shapes)]
    f = lambda *a: F.concat(list(a), axis)  # noqa: E731
    check_grad(f, xs)
    check_torch(f, lambda *a: __import__("torch").cat(a, axis), xs)
    check_infer(f, xs)
    if xs[0].ndim == 2:  # the same on transposed views
        check_grad(lambda *a: F.concat([t.T for t in a], axis), [np.ascontiguousarray(x.T)
                                                               for x in xs])


def test_concat_one_input_not_requiring_grad():
    a = hl.tensor(randn(2, 3), requires_grad=True)
    y = F.cat([a, hl.tensor(randn(1, 3))], 0)
    y.sum().backward()
    np.testing.assert_array_equal(a.grad.numpy(), np.ones((2, 3)))


@pytest.mark.parametrize("shape,axis", [((2, 3), 0), ((2, 3), 2), ((2, 3), -1), ((), 0)])
def test_stack(shape, axis):
    xs = [randn(*shape, seed=i) for i in range(3)]
    f = lambda *a: F.stack(list(a), axis)  # noqa: E731
    check_grad(f, xs)
    check_torch(f, lambda *a: __import__("torch").stack(a, axis), xs)
    check_infer(f, xs)


@pytest.mark.parametrize("parts,axis,torch_parts", [(3, 1, 2), ([1, 4, 1], 1, [1, 4, 1]),
                                                    (2, 0, 2), ([0, 2, 1], -1, [0, 2, 1])])
def test_split(parts, axis, torch_parts):
    x = randn(4, 6, 3, seed=8) if axis != -1 else randn(2, 3, seed=8)
    f = lambda a: F.split(a, parts, axis)  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: a.split(torch_parts, axis), [x])
    check_infer(f, [x])


@pytest.mark.parametrize("chunks,axis", [(3, 1), (4, 1), (2, 0), (5, -1)])
def test_chunk(chunks, axis):
    x = randn(3, 5, 2, seed=9)
    f = lambda a: F.chunk(a, chunks, axis)  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: a.chunk(chunks, axis), [x])
    check_infer(f, [x])


def test_unused_outputs_get_zeros():
    """Only one part of a split is used (the others are gone by backward)."""
    x = hl.tensor(randn(4, 3), requires_grad=True)
    y = F.split(x, 2)[1] * 2.0
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[0] * 3] * 2 + [[2] * 3] * 2)


PADS = [([(1, 2)], "constant", 0.0), ([(0, 1), (2, 0)], "constant", 1.5),
        ([1, 0, 0, 2], "constant", 0.0), ([(-1, 1), (1, -2)], "constant", 0.0),
        ([(-1, 2), (0, -1)], "constant", 0.0),
        (1, "reflect", 0.0), ([(2, 1), (0, 3)], "reflect", 0.0),
        ([(-1, 1), (2, 2)], "reflect", 0.0),
        (2, "edge", 0.0), ([(0, 3), (1, 0)], "edge", 0.0), ([(3, -1), (-2, 4)], "replicate", 0.0)]


@pytest.mark.parametrize("pads,mode,value", PADS, ids=[f"{p}-{m}" for p, m, _ in PADS])
def test_pad(pads, mode, value):
    x = randn(4, 5, seed=10)
    f = lambda a: F.pad(a, pads, mode, value)  # noqa: E731
    np.testing.assert_allclose(f(hl.tensor(x)).numpy(), _np_pad(x, pads, mode, value))
    check_grad(f, [x])
    check_infer(f, [x])
    check_grad(lambda a: F.pad(a.T, pads, mode, value), [np.ascontiguousarray(x.T)])


def _np_pad(x, pads, mode, value):
    flat = hl.ops.shape.pad_amounts(pads, x.ndim)
    b, e = flat[:x.ndim], flat[x.ndim:]
    x = x[tuple(slice(max(-i, 0), x.shape[d] - max(-j, 0)) for d, (i, j) in enumerate(zip(b, e)))]
    grow = [(max(i, 0), max(j, 0)) for i, j in zip(b, e)]
    if mode == "constant":
        return np.pad(x, grow, mode, constant_values=value)
    return np.pad(x, grow, "edge" if mode == "replicate" else mode)


@pytest.mark.parametrize("mode,torch_mode", [("constant", "constant"), ("reflect", "reflect"),
                                             ("edge", "replicate")])
def test_pad_against_torch(mode, torch_mode):
    x = randn(2, 3, 4, 5, seed=11)
    pads = [(0, 0), (0, 0), (1, 2), (2, 1)]  # torch pads the last axes, listed from the end
    check_torch(lambda a: F.pad(a, pads, mode),
                lambda a: __import__("torch").nn.functional.pad(a, (2, 1, 1, 2), torch_mode), [x])


def test_pad_edge_gradient_counts_copies():
    t = hl.tensor(np.zeros(3), requires_grad=True)
    F.pad(t, (2, 1), "edge").sum().backward()
    np.testing.assert_array_equal(t.grad.numpy(), [3, 1, 2])


@pytest.mark.parametrize("shape,reps", [((3,), 2), ((2, 3), (2, 1)), ((2, 3), (3,)),
                                        ((2, 3), (2, 1, 2)), ((2, 1, 3), (1, 3, 0)),
                                        ((2, 2, 1, 1, 1, 1, 1, 2), (1, 2, 1, 1, 1, 1, 2, 1))])
def test_tile(shape, reps):
    x = randn(*shape, seed=12)
    f = lambda a: F.tile(a, reps)  # noqa: E731
    check_grad(f, [x])
    check_torch(f, lambda a: a.tile(reps if isinstance(reps, tuple) else (reps,)), [x])
    check_infer(f, [x])


def test_tile_of_transposed_input():
    check_grad(lambda a: F.tile(a.T, (2, 3)), [randn(3, 2, seed=13)])


@pytest.mark.parametrize("f,err,match", [
    (lambda p: p.reshape(5, -1), hl.errors.ShapeError, "reshape: cannot reshape"),
    (lambda p: p.permute(0, 1), hl.errors.ValueError, "permute"),
    (lambda p: p.squeeze(1), hl.errors.ShapeError, "squeeze: axis 1"),
    (lambda p: p.expand(3, 3, 4), hl.errors.ShapeError, "expand"),
    (lambda p: p[0, 0, 0, 0], hl.errors.IndexError, "too many indices"),
    (lambda p: p[5], hl.errors.IndexError, "out of bounds"),
    (lambda p: F.concat([p, p.reshape(2, 4, 3)], 2), hl.errors.ShapeError, "concat"),
    (lambda p: F.split(p, 2, 1), hl.errors.ShapeError, "split"),
    (lambda p: F.pad(p, 3, "reflect"), hl.errors.ValueError, "reflect padding"),
    (lambda p: F.pad(p, [(-3, 0)] * 3), hl.errors.ShapeError, "crop more"),
    (lambda p: F.tile(p, [-1, 1, 1]), hl.errors.ValueError, "negative repeat"),
])
def test_infer_bad_arguments(f, err, match):
    """Placeholders raise what the real op raises."""
    with pytest.raises(err, match=match):
        f(hl.Placeholder((2, 3, 4)))
    with pytest.raises(err, match=match):
        f(hl.tensor(np.zeros((2, 3, 4)), requires_grad=True))


def test_placeholder_methods_go_through_functional():
    p = hl.Placeholder((2, 3, 4))
    assert p.reshape(4, 6).shape == (4, 6)
    assert p.T.shape == (4, 3, 2)
    assert p.flatten(1).unsqueeze(0).shape == (1, 2, 12)
    assert p[..., None, :2].shape == (2, 3, 1, 2)
