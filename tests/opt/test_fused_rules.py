"""The one-pass optimiser kernel (hl.ops.optim_update, libcore's hl_optim_update) against the
element-wise sequence of each rule in hl/opt/rules.py, which it must equal bit for bit: the
kernel performs each element's float operations in the sequence's order and dtype. Every
configuration of tests/opt/common.py (each optimiser and option: momentum, dampening,
Nesterov, L2 and decoupled decay, AMSGrad, centered, lr decay), float32 and float64, small
tensors and one large enough for the kernel's threaded loop, gradients holding zeros, huge
and tiny values, NaN and infinities. torch.optim agreement of the same optimisers is tests/opt/test_against_torch.py.
"""
import numpy as np
import pytest

import hl
from hl import errors

from .common import CONFIG_IDS, CONFIGS, assert_same_trajectory, hard_grads, trajectory

STEPS = 4
# one small shape, a 0-d one, and one over the kernel's threading threshold (2**15 elements)
SHAPES = [(3, 5), (), (200, 170)]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_kernel_equals_the_elementwise_sequence_bitwise(rng, monkeypatch, hl_name, torch_name,
                                                        kw, dtype):
    values = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = hard_grads(rng, dtype, SHAPES, STEPS)
    kernel = trajectory(hl_name, kw, values, grads, monkeypatch)
    sequence = trajectory(hl_name, kw, values, grads, monkeypatch, fused=False)
    assert_same_trajectory(kernel, sequence)
    for a, v in zip(kernel[0], values):
        assert a.dtype == dtype and not np.array_equal(a, v)
    assert kernel[1] or kw.keys() <= {"lr", "weight_decay"}  # plain SGD keeps no state


def test_kernel_runs_where_available_and_the_sequence_elsewhere():
    p = hl.tensor(np.ones((4, 3), np.float32))
    assert hl.ops.optim_update_available(p)
    assert not hl.ops.optim_update_available(p.transpose())  # not contiguous: the sequence
    assert not hl.ops.optim_update_available(hl.tensor(np.ones(3, np.int64)))
    assert not hl.ops.optim_update_available(p, p[1:])  # the gradient shares its memory
    # a parameter that is its own gradient (sequence) moves as torch's does: p -= lr * p
    q = hl.tensor(np.full(3, 2.0, np.float32))
    hl.opt.SGD(lr=0.25).update(q, q)
    np.testing.assert_array_equal(q.numpy(), np.full(3, 1.5, np.float32))
    # a non-contiguous parameter still gets torch's update (through the sequence)
    base = hl.tensor(np.arange(12, dtype=np.float32).reshape(3, 4))
    view = base.transpose()
    hl.opt.SGD(lr=0.5).update(view, hl.tensor(np.ones((4, 3), np.float32)))
    np.testing.assert_array_equal(base.numpy(), np.arange(12, dtype=np.float32).reshape(3, 4) - 0.5)


def _call(rule="sgd", param=None, grad=None, states=(), values=(-0.1,), hyper=(0, 0, 1),
          flags=()):
    param = hl.zeros((2, 3)) if param is None else param
    grad = hl.zeros((2, 3)) if grad is None else grad
    hl.ops.optim_update(rule, param, grad, list(states), list(values), list(hyper), flags)


@pytest.mark.parametrize("kwargs,error,words", [
    (dict(grad=hl.zeros((3, 2))), errors.ShapeError, ["grad", "(3, 2)", "(2, 3)"]),
    (dict(grad=hl.zeros((2, 3), dtype="float64")), errors.DTypeError, ["grad", "float64"]),
    (dict(param=hl.zeros((2, 3), dtype="int32"), grad=hl.zeros((2, 3), dtype="int32")),
     errors.DTypeError, ["optim_update", "int32"]),
    (dict(states=[hl.zeros((2, 2))], flags=("init",)), errors.ShapeError, ["a state", "(2, 2)"]),
    (dict(states=[hl.zeros((3, 2)).transpose()], flags=("init",)), errors.ValueError,
     ["contiguous"]),
    (dict(flags=("nesterov",)), errors.ValueError, ["momentum buffer"]),
    (dict(rule="adam"), errors.ValueError, ["adam", "state tensors"]),
    (dict(hyper=(0, 0)), errors.ValueError, ["constants", "expected 3"]),
    (dict(flags=("centered",)), errors.ValueError, ["flags"]),
])
def test_bad_arguments_raise_naming_what_is_wrong(kwargs, error, words):
    with pytest.raises(error) as e:
        _call(**kwargs)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_overlapping_tensors_are_refused():
    p = hl.zeros((2, 3))
    with pytest.raises(errors.ValueError, match="overlap"):
        _call(param=p, grad=p)
    with pytest.raises(errors.ValueError, match="overlap"):
        _call(param=p, states=[p], flags=("init",))


def test_a_per_step_scalar_must_be_a_0d_tensor_of_the_parameters_dtype():
    with pytest.raises(errors.ValueError, match="0-d tensor"):
        _call(values=[hl.zeros((1,))])
    with pytest.raises(errors.ValueError, match="0-d tensor"):
        _call(values=[hl.tensor(np.float64(0.1))])


@pytest.mark.parametrize("method", ["momentum", "adam", "adagrad", "rmsprop"])
def test_v2_rules_with_the_kernel_equal_the_sequence_bitwise(rng, monkeypatch, method):
    """hl.v2's Momentum and Adam run the kernel (v2_momentum, v2_adam); the adaptive rules end
    with v2's momentum descent through it. Per-parameter rates, L2 decay, momentum and
    clipping from tests/v2's configurations."""
    from hl.v2 import optimizer as v2opt
    from tests.v2.test_optimizer import (BATCH_SIZES, CLIP, IDS, L2, METHODS, build,
                                         make_params, random_problem, train)
    cls, kw, _, follows = METHODS[IDS.index(method)]
    values, grads = random_problem(rng)
    out = []
    for fused in (True, False):
        with monkeypatch.context() as m:
            if not fused:
                m.setattr(hl.ops, "optim_update_available", lambda param, grad=None: False)
            params = make_params(values)
            opt = build(cls, kw, follows, regularization=v2opt.L2Regularization(L2),
                        gradient_clipping_threshold=CLIP, warn_l2=method == "adam")
            train(opt, params, grads, BATCH_SIZES)
            out.append({k: p.numpy().copy() for k, p in params.items()})
    for k in values:
        np.testing.assert_array_equal(out[0][k], out[1][k], err_msg=k)
