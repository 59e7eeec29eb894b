"""The backward walk, grad mode and placeholders, on small graphs whose gradients are known in
closed form (checked against numpy) or by finite differences."""
import gc
import threading
import weakref

import numpy as np
import pytest

import hl
from hl.autograd import Function
from tests.autograd.harness import check_grad, randn


def param(arr):
    t = hl.tensor(np.asarray(arr, np.float64), requires_grad=True)
    t.stores_grad = True
    return t


def test_generator_yields_each_stored_tensor_once_with_its_complete_gradient():
    a, b = param(randn(3, 4)), param(randn(4))
    x = hl.tensor(randn(3, 4))
    loss = ((a * x + b) * a + b).sum()   # a and b are each used twice
    got = {id(t): g.numpy() for t, g in hl.autograd.backward(loss)}
    assert set(got) == {id(a), id(b)}
    an, bn, xn = a.numpy(), b.numpy(), x.numpy()
    np.testing.assert_allclose(got[id(a)], 2 * an * xn + bn, rtol=1e-12)
    np.testing.assert_allclose(got[id(b)], (an + 1).sum(axis=0), rtol=1e-12)


def test_generator_skips_tensors_that_do_not_store_grads():
    a = hl.tensor(randn(3), requires_grad=True)   # requires_grad only: PyTorch-style leaf
    b = param(randn(3))
    pairs = list(hl.autograd.backward((a * b).sum()))
    assert [t is b for t, _ in pairs] == [True]


def test_backward_fills_and_accumulates_grad():
    a = hl.tensor(randn(2, 3), requires_grad=True)
    (a * a).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy())
    (a * 3.0).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * a.numpy() + 3.0)


def test_gradient_flows_through_a_diamond_and_a_reused_intermediate():
    check_grad(lambda a: (lambda h: h * h + h.exp())(a.sin()), [randn(4, 3)])
    check_grad(lambda a, b: (a + b) * (a - b) / (b * b + 1.0), [randn(5), randn(5)])


def test_second_walk_of_a_freed_graph_says_retain_graph():
    a = hl.tensor(randn(3), requires_grad=True)
    loss = (a.exp() * a).sum()
    loss.backward(retain_graph=True)
    loss.backward()
    np.testing.assert_allclose(a.grad.numpy(), 2 * (np.exp(a.numpy()) * (1 + a.numpy())))
    with pytest.raises(hl.errors.ValueError, match="retain_graph"):
        loss.backward()


def test_non_scalar_loss_needs_dy():
    a = hl.tensor(randn(3), requires_grad=True)
    y = a * 2.0
    with pytest.raises(hl.errors.ValueError, match="loss.backward\\(dy\\)"):
        y.backward()
    y.backward(hl.tensor(np.array([1.0, 2.0, 3.0])))
    np.testing.assert_allclose(a.grad.numpy(), [2.0, 4.0, 6.0])
    with pytest.raises(hl.errors.ShapeError):
        (a * 2.0).backward(hl.ones(4, dtype="float64"))


def test_loss_without_a_graph_raises():
    with pytest.raises(hl.errors.ValueError, match="requires a gradient"):
        hl.tensor(randn(3)).sum().backward()


def test_no_grad_records_nothing_and_nests():
    a = hl.tensor(randn(3), requires_grad=True)
    with hl.no_grad():
        y = a * 2.0
        with hl.enable_grad():
            z = a * 2.0
        w = a.exp()
    assert not y.requires_grad and y.creator is None and not w.requires_grad
    assert z.requires_grad and z.creator is not None
    assert hl.is_grad_enabled()

    @hl.no_grad()
    def f(t):
        return t * 2.0
    assert not f(a).requires_grad


def test_grad_mode_is_per_thread():
    a = hl.tensor(randn(3), requires_grad=True)
    seen = []
    with hl.no_grad():
        t = threading.Thread(target=lambda: seen.append((a * 2.0).requires_grad))
        t.start()
        t.join()
    assert seen == [True]


def test_retain_grad_keeps_an_intermediate_gradient():
    a = hl.tensor(randn(3), requires_grad=True)
    h = (a * 2.0).retain_grad()
    (h * h).sum().backward()
    np.testing.assert_allclose(h.grad.numpy(), 2 * h.numpy())


def test_in_place_change_of_a_recorded_tensor_raises():
    a = hl.tensor(randn(3), requires_grad=True)
    with pytest.raises(hl.errors.ValueError, match="no_grad"):
        a += 1.0
    with pytest.raises(hl.errors.ValueError, match="no_grad"):
        a[0] = 1.0
    with hl.no_grad():
        a += 1.0   # an optimiser's update
    assert a.requires_grad


def test_integer_paths_and_comparisons_pass_no_gradient():
    a = hl.tensor(randn(4), requires_grad=True)
    mask = a > 0.0                    # a comparison: not differentiable
    y = hl.where(mask, a * 3.0, a * -1.0).sum()
    y.backward()
    np.testing.assert_allclose(a.grad.numpy(), np.where(a.numpy() > 0, 3.0, -1.0))


def test_cast_between_float_dtypes_is_recorded():
    a = hl.tensor(randn(3).astype(np.float32), requires_grad=True)
    b = hl.tensor(randn(3), requires_grad=True)          # float64
    (a * b).sum().backward()                              # a promotes to float64
    assert a.grad.dtype == hl.float32 and b.grad.dtype == hl.float64
    np.testing.assert_allclose(a.grad.numpy(), b.numpy(), rtol=1e-6)


class TwoOut(Function):
    """(x * 2, x * 3): a user-defined op with two outputs."""

    def forward(self, x):
        return x * 2.0, x * 3.0

    def backward(self, d2, d3):
        return d2 * 2.0 + d3 * 3.0

    def infer(self, x):
        return [(x.shape, x.dtype), (x.shape, x.dtype)]


def test_user_function_with_an_unused_output():
    a = hl.tensor(randn(3), requires_grad=True)
    y2, _ = TwoOut()(a)
    y2.sum().backward()                # the second output gets no gradient: zeros fill in
    np.testing.assert_allclose(a.grad.numpy(), np.full(3, 2.0))
    p2, p3 = TwoOut()(hl.Placeholder((5, 2), "float64"))
    assert p2.shape == p3.shape == (5, 2) and p3.dtype == hl.float64


def test_saved_tensors_are_freed_during_backward():
    a = hl.tensor(randn(1000), requires_grad=True)
    h = a.exp()
    ref = weakref.ref(h)
    loss = (h * h).sum()
    del h
    gc.collect()
    assert ref() is not None           # Mul keeps its inputs for backward
    loss.backward()
    assert ref() is None               # released as soon as Mul's backward ran, no gc needed


def test_placeholders_flow_through_element_wise_ops():
    p = hl.Placeholder((4, 1, 3))
    q = (p * hl.ones(5, 1) + 1.0).exp().sum(axis=0)
    assert isinstance(q, hl.Placeholder) and q.shape == (5, 3) and q.dtype == hl.float32
    with pytest.raises(hl.errors.ShapeError, match="broadcast"):
        p + hl.ones(2)
    with pytest.raises(hl.errors.ValueError, match="no values"):
        p.numpy()


def test_leaf_gradients_are_never_shared_or_broadcast_views():
    a, b = param(randn(3)), param(randn(3))
    grads = dict((id(t), g) for t, g in hl.autograd.backward((a + b).sum()))
    ga, gb = grads[id(a)], grads[id(b)]
    assert ga is not gb and ga.is_contiguous() and gb.is_contiguous()
    assert not ga.shares_memory(gb)
    with hl.no_grad():
        ga *= 2.0                       # an optimiser may scale a gradient in place
    np.testing.assert_array_equal(gb.numpy(), np.ones(3))


@pytest.mark.parametrize("graph", ["add_passes_dy_on", "reshape_view_of_shared_dy",
                                   "concat_slices", "user_dy"])
def test_writing_into_a_handed_gradient_changes_no_later_one(graph):
    """A receiver may write into each gradient as it is handed out, while the walk goes on
    (DistOpt reduces them in place on another thread): add's backward passes one dy both to
    a parameter and to the op before it, reshape's a view of a dy that other ops still use,
    concat's slices of one dy. The gradients must be those of an undisturbed walk, and
    those are checked against their closed forms (float64, 1e-12)."""
    w, v = param(randn(3, 4)), param(randn(12))
    x = hl.tensor(randn(3, 4))
    dy = None
    if graph == "add_passes_dy_on":
        y = x * w + v.reshape(3, 4)
        loss, expect = (y * y).sum(), lambda yn: {id(w): 2 * yn * x.numpy(), id(v): 2 * yn}
    elif graph == "reshape_view_of_shared_dy":
        y = v.reshape(3, 4) * x + v.reshape(3, 4)
        loss, expect = (y * y).sum(), lambda yn: {id(v): (2 * yn * (x.numpy() + 1))}
    elif graph == "concat_slices":
        y = hl.concat([w, v.reshape(3, 4)], axis=0) * 3.0
        loss, expect = (y * y).sum(), lambda yn: {id(w): 6 * yn[:3], id(v): 6 * yn[3:]}
    else:  # the caller's dy is the caller's: a gradient that is a view of it is a copy
        y = v.reshape(3, 4) + w
        loss, dy = y, hl.tensor(randn(3, 4))
        expect = lambda yn: {id(w): dy.numpy(), id(v): dy.numpy()}  # noqa: E731
    want = {k: np.asarray(e).reshape(-1) for k, e in expect(y.numpy()).items()}
    dy_before = None if dy is None else dy.numpy().copy()
    got = {}
    for t, g in hl.autograd.backward(loss, dy):
        got[id(t)] = g.numpy().copy().reshape(-1)
        g.numpy()[...] = 1e6            # the receiver overwrites it at once
    assert set(got) == set(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-12)
    if dy is not None:
        np.testing.assert_array_equal(dy.numpy(), dy_before)


def test_grad_mode_between_yielded_pairs_is_the_callers():
    a, b = param(randn(3)), param(randn(3))
    pairs = hl.autograd.backward((a * b).sum())
    next(pairs)
    assert hl.is_grad_enabled()           # a half-consumed walk does not switch recording off
    assert (a * 2.0).requires_grad
    list(pairs)
