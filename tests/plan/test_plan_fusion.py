"""Fusion of element-wise runs in libcore's plans: a fused replay must equal the unfused one
bit for bit (each step is the call's own row function), whatever the broadcasts, held
intermediates, in-place parameter updates and views; numpy is the reference for the values."""

import numpy as np
import pytest

import hl
from hl import _core

from .replaying import replay

UNARY = {"exp": (hl.exp, np.exp), "tanh": (hl.tanh, np.tanh), "neg": (lambda t: -t, np.negative),
         "relu": (hl.relu, lambda a: np.maximum(a, 0)), "sigmoid": (hl.sigmoid, lambda a: 1 / (1 + np.exp(-a))),
         "abs": (abs, np.abs)}
BINARY = {"add": (lambda a, b: a + b, np.add), "sub": (lambda a, b: a - b, np.subtract),
          "mul": (lambda a, b: a * b, np.multiply), "maximum": (hl.maximum, np.maximum)}


def _random_chain(rng, shape, operands, steps):
    """A recipe: each step applies a unary op to the running value or a binary op with it and
    one operand (full shape, a row, a column or a scalar)."""
    recipe = []
    for _ in range(steps):
        if rng.random() < 0.5:
            recipe.append(("u", list(UNARY)[rng.integers(len(UNARY))], None))
        else:
            recipe.append(("b", list(BINARY)[rng.integers(len(BINARY))],
                           int(rng.integers(len(operands)))))
    return recipe


def _apply(recipe, x, operands, lib):
    v = x
    for kind, name, k in recipe:
        if kind == "u":
            v = (UNARY[name][0] if lib == "hl" else UNARY[name][1])(v)
        else:
            v = (BINARY[name][0] if lib == "hl" else BINARY[name][1])(v, operands[k])
    return v


@pytest.mark.parametrize("seed", range(6))
def test_random_chains_fused_equal_unfused_bitwise(seed):
    rng = np.random.default_rng(seed)
    shape = (7, 33)
    dtype = np.float32 if seed % 2 == 0 else np.float64
    x_np = rng.standard_normal(shape).astype(dtype)
    ops_np = [rng.standard_normal(shape).astype(dtype), rng.standard_normal(33).astype(dtype),
              rng.standard_normal((7, 1)).astype(dtype), np.array(0.75, dtype)]
    x = hl.tensor(x_np)
    ops = [hl.tensor(o) for o in ops_np]
    recipe = _random_chain(rng, shape, ops, 12)
    fused_plan, fused = replay(lambda: _apply(recipe, x, ops, "hl"), 0)
    _, plain = replay(lambda: _apply(recipe, x, ops, "hl"),
                        _core.PLAN_NO_FUSION | _core.PLAN_NO_MEMORY)
    assert _core.plan_stats(fused_plan)["fused_calls"] >= 2
    np.testing.assert_array_equal(fused.numpy(), plain.numpy())
    with np.errstate(over="ignore"):
        want = _apply(recipe, x_np, ops_np, "np")
    np.testing.assert_allclose(fused.numpy(), want, rtol=2e-5 if dtype == np.float32 else 1e-12,
                               atol=1e-6)


def test_intermediates_held_outside_are_written():
    x = hl.tensor(np.linspace(-2, 2, 1000, dtype=np.float32))
    held = {}

    def f():
        a = hl.exp(x)
        held["b"] = a * 2.0      # the caller keeps it: the pass writes it to memory
        return hl.tanh(held["b"]) + a

    plan, y = replay(f, 0)
    assert _core.plan_stats(plan)["fused_groups"] == 1
    eager_b = (hl.exp(x) * 2.0).numpy()       # the same kernels, run one by one
    np.testing.assert_array_equal(held["b"].numpy(), eager_b)
    a = np.exp(x.numpy())
    np.testing.assert_allclose(held["b"].numpy(), a * 2, rtol=1e-6)
    np.testing.assert_allclose(y.numpy(), np.tanh(a * 2) + a, rtol=1e-6)


def test_momentum_update_in_place_fuses_and_matches():
    """v = 0.9 v + g; w = w - 0.1 v: written in place into tensors the caller holds."""
    w0 = np.random.default_rng(3).standard_normal(500).astype(np.float32)
    results = []
    for options in (0, _core.PLAN_NO_FUSION | _core.PLAN_NO_MEMORY):
        w = hl.tensor(w0)
        v = hl.tensor(np.zeros(500, np.float32))
        g = hl.tensor(np.ones(500, np.float32))
        plan, _ = replay(lambda: (v.copy_(v * 0.9 + g), w.copy_(w - v * 0.1)), options, runs=5)
        results.append(w.numpy().copy())
    np.testing.assert_array_equal(results[0], results[1])
    v_ref, w_ref = np.zeros(500, np.float32), w0
    for _ in range(5):
        v_ref = v_ref * np.float32(0.9) + 1
        w_ref = w_ref - v_ref * np.float32(0.1)
    np.testing.assert_allclose(results[0], w_ref, rtol=1e-6)


def test_a_transposed_read_of_written_memory_splits_the_run():
    """w is written, then read transposed: element i of one is not element i of the other."""
    base = np.arange(16, dtype=np.float32).reshape(4, 4)
    results = []
    for options in (0, _core.PLAN_NO_FUSION | _core.PLAN_NO_MEMORY):
        w = hl.tensor(base)
        plan, y = replay(lambda: (w.copy_(w * 2.0), w.transpose(1, 0) + w)[1], options, runs=1)
        results.append(y.numpy().copy())
    np.testing.assert_array_equal(results[0], results[1])
    np.testing.assert_array_equal(results[0], (base * 2).T + base * 2)
