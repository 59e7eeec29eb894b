"""The gradient-check harness for autograd ops.

``check_grad(f, inputs)`` runs ``f`` on float64 tensors, walks back with a random output
gradient ``dy`` and compares each input's gradient with central finite differences of
``sum(f(x) * dy)`` (eps 1e-6; rtol 1e-5, atol 1e-7 unless a case says otherwise).

``check_torch(f_hl, f_torch, inputs)`` runs the same computation in float32 through hl and
through PyTorch CPU (skipped where torch is missing) and compares outputs and gradients
(rtol 1e-4, atol 1e-5 unless a case says otherwise).

Inputs are numpy arrays; ``grad_of`` picks which of them get gradients (all float arrays by
default). Integer arrays (indices, labels) pass through unchanged.
"""
import numpy as np
import pytest

import hl
from tests.ops.harness import numeric_grad  # noqa: F401 - central differences, shared

RNG = np.random.default_rng(0)


def _wants(inputs, grad_of):
    if grad_of is None:
        return [np.asarray(a).dtype.kind == "f" for a in inputs]
    return [i in grad_of for i in range(len(inputs))]


def _outputs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def check_grad(f, inputs, grad_of=None, eps=1e-6, rtol=1e-5, atol=1e-7, seed=0):
    """Finite-difference check of f's gradients with respect to the float inputs, float64."""
    rng = np.random.default_rng(seed)
    inputs = [np.asarray(a) for a in inputs]
    inputs = [a.astype(np.float64) if a.dtype.kind == "f" else a for a in inputs]
    wants = _wants(inputs, grad_of)
    xs = [hl.tensor(a, requires_grad=w) for a, w in zip(inputs, wants)]
    ys = _outputs(f(*xs))
    dys = [rng.standard_normal(y.shape) for y in ys]
    total = ys[0] * hl.tensor(dys[0])
    total = total.sum() if total.ndim else total
    for y, dy in zip(ys[1:], dys[1:]):
        total = total + (y * hl.tensor(dy)).sum()
    total.backward()

    def scalar(i):
        def g(v):
            args = [hl.tensor(v) if j == i else hl.tensor(a) for j, a in enumerate(inputs)]
            with hl.no_grad():
                outs = _outputs(f(*args))
            return sum(float((np.asarray(o.numpy(), dtype=np.float64) * d).sum())
                       for o, d in zip(outs, dys))
        return g

    for i, (x, w) in enumerate(zip(xs, wants)):
        if not w:
            continue
        want = numeric_grad(scalar(i), inputs[i], eps)
        assert x.grad is not None, f"input {i} got no gradient"
        assert x.grad.shape == x.shape, f"input {i}: grad shape {x.grad.shape} != {x.shape}"
        np.testing.assert_allclose(x.grad.numpy(), want, rtol=rtol, atol=atol,
                                   err_msg=f"gradient of input {i}")


def check_torch(f_hl, f_torch, inputs, grad_of=None, rtol=1e-4, atol=1e-5, seed=1):
    """Forward and backward of f_hl (hl, float32) against f_torch (PyTorch CPU, float32)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(seed)
    inputs = [np.asarray(a) for a in inputs]
    inputs = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in inputs]
    wants = _wants(inputs, grad_of)
    hx = [hl.tensor(a, requires_grad=w) for a, w in zip(inputs, wants)]
    tx = [torch.tensor(a, requires_grad=bool(w)) for a, w in zip(inputs, wants)]
    hy, ty = _outputs(f_hl(*hx)), _outputs(f_torch(*tx))
    assert len(hy) == len(ty)
    for i, (a, b) in enumerate(zip(hy, ty)):
        np.testing.assert_allclose(a.numpy(), b.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"forward output {i}")
    dys = [rng.standard_normal(tuple(b.shape)).astype(np.float32) for b in ty]
    h_total = None
    for y, dy in zip(hy, dys):
        term = (y * hl.tensor(dy)).sum()
        h_total = term if h_total is None else h_total + term
    h_total.backward()
    t_total = sum((y * torch.tensor(dy)).sum() for y, dy in zip(ty, dys))
    t_total.backward()
    for i, (a, b, w) in enumerate(zip(hx, tx, wants)):
        if w:
            assert a.grad is not None, f"input {i} got no gradient"
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=rtol, atol=atol,
                                       err_msg=f"gradient of input {i}")


def randn(*shape, seed=None):
    return (RNG if seed is None else np.random.default_rng(seed)).standard_normal(shape)
