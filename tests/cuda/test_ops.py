"""Every op on cuda against the CPU (tests/cuda/cases.py is the table), and gradients in
float64 on cuda against central differences.

Tolerances: float64 results must match the CPU to rtol 1e-6 / atol 1e-7 unless a case says
otherwise (the CUDA kernels use the CPU's formulas; only summation order differs); float32 to
rtol 2e-5 / atol 1e-6 (a GPU's libm and its fused multiply-adds differ in the last bits).
Gradients: rtol 1e-5 / atol 1e-7 against differences with eps 1e-6, as tests/autograd.
"""
import numpy as np
import pytest

import hl
from tests.cuda.cases import (CASES, GRADIENT_OPS, NOT_ON_CUDA, NOT_ON_CUDA_BACKWARD,
                              RANDOM_OPS)
from tests.ops.harness import numeric_grad

pytestmark = pytest.mark.gpu


def _outs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def _run(case, arrays, device, grad):
    xs = [hl.tensor(a, device=device, requires_grad=grad and i in case.grad)
          for i, a in enumerate(arrays)]
    ys = _outs(case.fn(*xs))
    return xs, ys


FORWARD = [(name, case, dt) for name, case in CASES for dt in case.dtypes]


def _id(name, case, dt=None):
    return "-".join(filter(None, [name, case.ids, dt and np.dtype(dt).name]))


@pytest.mark.parametrize("name,case,dt", FORWARD, ids=[_id(*f) for f in FORWARD])
def test_forward_matches_cpu(name, case, dt):
    arrays = case.inputs(np.random.default_rng(0), dt)
    _, want = _run(case, arrays, "cpu", False)
    _, got = _run(case, arrays, "cuda", False)
    rtol, atol = (case.rtol, case.atol) if dt == np.float64 else (2e-5, 1e-6)
    for w, g in zip(want, got):
        assert g.device == hl.device("cuda") and g.dtype == w.dtype and g.shape == w.shape
        np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{name} on cuda vs cpu")


GRAD_CASES = [(n, c) for n, c in CASES if c.grad and np.float64 in c.dtypes]


@pytest.mark.parametrize("name,case", GRAD_CASES, ids=[_id(n, c) for n, c in GRAD_CASES])
def test_gradients_float64(name, case):
    """cuda's backward against cuda's own forward by central differences, and against the
    CPU's backward."""
    rng = np.random.default_rng(1)
    arrays = case.inputs(np.random.default_rng(0), np.float64)
    xs, ys = _run(case, arrays, "cuda", True)
    dys = [rng.standard_normal(y.shape) for y in ys]
    total = sum((y * hl.tensor(d, device="cuda")).sum() for y, d in zip(ys, dys))
    total.backward()
    cx, cys = _run(case, arrays, "cpu", True)
    sum((y * hl.tensor(d)).sum() for y, d in zip(cys, dys)).backward()

    for i in case.grad:
        def f(v, i=i):
            args = [hl.tensor(v if j == i else a, device="cuda") for j, a in enumerate(arrays)]
            with hl.no_grad():
                return sum(float((o.numpy() * d).sum()) for o, d in zip(_outs(case.fn(*args)),
                                                                        dys))
        got = xs[i].grad.numpy()
        np.testing.assert_allclose(got, numeric_grad(f, arrays[i]), rtol=1e-5, atol=1e-7,
                                   err_msg=f"{name}: gradient of input {i} vs differences")
        np.testing.assert_allclose(got, cx[i].grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{name}: gradient of input {i} vs the CPU's")


def test_every_op_is_covered():
    covered = {n for n, _ in CASES} | set(GRADIENT_OPS) | RANDOM_OPS | set(NOT_ON_CUDA) | \
        NOT_ON_CUDA_BACKWARD
    assert set(hl._core.OPS) - covered == set()
    assert set(GRADIENT_OPS.values()) <= {n for n, _ in CASES}


def test_missing_kernels_say_so():
    """Every op without a CUDA kernel (none today) fails with the registry's message."""
    x = hl.tensor(np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32),
                  device="cuda")
    for name, call in NOT_ON_CUDA.items():
        with pytest.raises(hl.errors.UnsupportedError,
                           match=f"{name} is not implemented on cuda"):
            call(x)


# ---- float16 and bfloat16 compute (element-wise ops; the CPU stores these dtypes only) ----
# The reference: the CPU computing in float32 on the same half-rounded inputs, rounded to the
# half type once. cuda computes in float and rounds once, so the two agree to one unit in
# the last place of the half type (libm's last float bits can move a rounding): rtol is that
# unit, 2^-10 for float16 and 2^-7 for bfloat16 (atol 1/64 of it for results near zero).
ELEMENTWISE = list(hl._core.OPS)[:hl._core.OPS["copy"]]
HALF_CASES = [(n, c) for n, c in CASES if n in ELEMENTWISE and not c.ids]
HALF_ULP = {"float16": 2.0 ** -10, "bfloat16": 2.0 ** -7}


@pytest.mark.parametrize("dtype", sorted(HALF_ULP))
@pytest.mark.parametrize("name,case", HALF_CASES, ids=[n for n, _ in HALF_CASES])
def test_half_types_compute_elementwise(name, case, dtype):
    arrays = case.inputs(np.random.default_rng(0), np.float32)
    hd = hl.dtype(dtype)

    def run(device):
        xs = [hl.tensor(a, device=device) for a in arrays]
        xs = [x.astype(hd) if x.dtype == hl.float32 else x for x in xs]
        if device == "cpu":  # the CPU has no half arithmetic: float32, rounded once at the end
            y = case.fn(*[x.astype(hl.float32) if x.dtype == hd else x for x in xs])
            return y.astype(hd) if y.dtype == hl.float32 else y
        return case.fn(*xs)

    want, got = run("cpu"), run("cuda")
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype == hd:
        want, got = want.astype(hl.float32), got.astype(hl.float32)
    ulp = HALF_ULP[dtype]
    np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=ulp, atol=ulp / 64,
                               err_msg=f"{name} in {dtype} on cuda vs float32 on the cpu")


def test_half_types_are_refused_where_cuda_does_not_compute_them():
    x = hl.ones((2, 3), device="cuda").astype(hl.float16)
    # (matmul, conv, reductions, softmax, norms and pooling compute in them: test_half.py)
    with pytest.raises(hl.errors.DTypeError, match="float16"):
        hl.cumsum(x, axis=1)
    with pytest.raises(hl.errors.DTypeError, match="float16"):
        hl.argmax(x, axis=1)
