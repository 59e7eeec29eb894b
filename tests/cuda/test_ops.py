"""What the OpCase registry (tests/opcases: each op described once, run on every available
backend against the CPU, float64 gradients checked there, the ops a backend lacks refused with
the registry's message) does not say about cuda: float16/bfloat16 compute in the
element-wise kernels, which the CPU lacks."""
import numpy as np
import pytest

import hl
from tests.opcases import elementwise, families

pytestmark = pytest.mark.gpu


# ---- float16 and bfloat16 compute (element-wise ops; the CPU stores these dtypes only) ----
# The reference: the CPU computing in float32 on the same half-rounded inputs, rounded to the
# half type once. cuda computes in float and rounds once, so the two agree to one unit in
# the last place of the half type (libm's last float bits can move a rounding): rtol is that
# unit, 2^-10 for float16 and 2^-7 for bfloat16 (atol 1/64 of it for results near zero).
ELEMENTWISE = set(list(hl._core.OPS)[:hl._core.OPS["copy"]])
HALF_CASES = elementwise.CASES + [c for c in families.CASES
                                  if c.ops[0] in ELEMENTWISE and not c.name.endswith("int64")]
HALF_ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


def _inputs32(case):
    shape = None if case.backend_only else (case.grad_shapes[-1] if case.arity > 1 else (3, 4))
    return case.inputs(np.random.default_rng(0), np.float32, shape)


@pytest.mark.parametrize("dtype", sorted(HALF_ULP))
@pytest.mark.parametrize("case", HALF_CASES, ids=[c.name for c in HALF_CASES])
def test_half_types_compute_elementwise(case, dtype):
    arrays = _inputs32(case)
    hd = hl.dtype(dtype)

    def run(device):
        xs = [hl.tensor(a, device=device) for a in arrays]
        xs = [x.astype(hd) if x.dtype == hl.float32 else x for x in xs]
        if device == "cpu":  # the CPU has no half arithmetic: float32, rounded once at the end
            y = case.call(*[x.astype(hl.float32) if x.dtype == hd else x for x in xs])
            return y.astype(hd) if y.dtype == hl.float32 else y
        return case.call(*xs)

    want, got = run("cpu"), run("cuda")
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == hd:
        want, got = want.astype(hl.float32), got.astype(hl.float32)
    ulp = HALF_ULP[dtype]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=ulp, atol=ulp / 64,
                               err_msg=f"{case.name} in {dtype} on cuda vs float32 on the cpu")


@pytest.mark.parametrize("dtype", sorted(HALF_ULP))
def test_every_op_on_cuda_computes_in_the_half_types(dtype):
    """docs/amp.md's audit: every op cuda implements takes float16 and bfloat16 (element-wise
    ops here, the others through the op-case table's half_tol cases and test_half.py); the
    only ops without them are those that do not by design (the registry's NO_HALF)."""
    x = hl.ones((2, 3), device="cuda").astype(dtype)
    without = {op for op, code in hl._core.OPS.items() if not hl._core.computes(x._h, code)}
    assert without <= families.NO_HALF["cuda"], without - families.NO_HALF["cuda"]
    # what the CPU refuses, cuda computes: a half cumsum and argmax (op-case table's cases)
    assert hl.cumsum(x, axis=1).dtype is hl.dtype(dtype)
    assert hl.argmax(x, axis=1).dtype is hl.int64
    with pytest.raises(hl.errors.DTypeError, match=dtype):
        hl.cumsum(x.to("cpu"), axis=1)
