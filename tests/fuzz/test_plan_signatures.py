"""Fuzz: tensors of random shapes, dtypes and layouts are bound to plans recorded for other
signatures. A plan must never replay on the wrong signature: binding refuses (ShapeError,
DTypeError) every mismatch, and every accepted binding replays to numpy's answer."""
import gc

import numpy as np
import pytest

import hl
from hl import _core, errors

DTYPES = [np.float32, np.float64, np.int32, np.int64]


def _random_array(rng, shapes):
    shape = shapes[rng.integers(len(shapes))]
    dtype = DTYPES[rng.integers(len(DTYPES))]
    return (rng.standard_normal(shape) * 4).astype(dtype)


def _record(a):
    x = hl.tensor(a)
    _core.plan_begin()
    try:
        slot = _core.plan_input(x._h)
        y = (x * x + x).sum(axis=-1)
    finally:
        plan = _core.plan_end()
    gc.collect(1)  # this recording's cyclic garbage (a full collection costs ~0.5 s late in the suite)
    return plan, slot, y


@pytest.mark.parametrize("seed", range(4))
def test_binding_never_replays_the_wrong_signature(seed):
    rng = np.random.default_rng(seed)
    shapes = [(3,), (2, 3), (3, 2), (1, 3), (2, 1, 3), (4, 3), ()][:3 + seed]
    plans = {}
    refused = accepted = 0
    for _ in range(80):
        a = _random_array(rng, shapes)
        key = (a.shape, a.dtype)
        if key not in plans or rng.random() < 0.1:
            plans[key] = _record(a)
        # bind to a plan of a random signature, the tensor sometimes a transposed view
        plan_key = key if rng.random() < 0.5 else list(plans)[rng.integers(len(plans))]
        plan, slot, y = plans[plan_key]
        t = hl.tensor(a)
        if a.ndim >= 2 and rng.random() < 0.3:
            t = hl.tensor(np.ascontiguousarray(np.swapaxes(a, 0, 1))).transpose(1, 0)
        if plan_key != key:
            want = errors.ShapeError if plan_key[0] != key[0] else errors.DTypeError
            with pytest.raises(want, match="slot 0"):
                _core.plan_bind(plan, slot, t._h)
            refused += 1
            continue
        _core.plan_bind(plan, slot, t._h)
        _core.plan_run(plan)
        got = y.numpy()
        want = (a * a + a).sum(axis=-1) if a.ndim else a * a + a
        if np.issubdtype(a.dtype, np.floating):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        else:
            np.testing.assert_array_equal(got, want)
        accepted += 1
    assert refused > 5 and accepted > 5
