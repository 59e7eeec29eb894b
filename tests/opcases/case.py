"""OpCase: one declarative record per op, from which tests/opcases/test_opcases.py derives
every standard test of that op.

A case says how to call the op on hl tensors, its numpy reference, how to draw inputs (per
dtype, inside the op's domain), which special values the kernel must get right, whether its
gradient is checked (and on which inputs, away from kinks), and its ONNX node (type,
attributes, opset) if ONNX has one. The derived tests are:

  - the kernel against the reference, per dtype, on contiguous, strided and transposed
    inputs, and on the special values (sign of zero included where numpy defines it);
  - a float64 central finite-difference check of the gradient (tolerances below);
  - ONNX import: a one-node model run by hl.onnx.prepare against onnxruntime, and trained
    through hl.onnx.ONNXModel, its gradient against float64 finite differences;
  - ONNX export round trip: hl -> hl.onnx.to_onnx -> onnxruntime equals hl;
  - every other available backend (CUDA when built, emulated in CI) against the CPU result,
    and the float64 gradient on that backend against its own central differences and the
    CPU's gradient.

A backend case (``reference`` None: tests/opcases/families.py, the families beyond the
element-wise ops) has the CPU kernel as its reference and feeds the backend tests only; its
``draw(rng, dtype, shapes)`` gives the inputs as they are (index arrays keep their dtype) and
``grad_args`` names the inputs whose gradient is checked.

``case.run(arrays, device)`` runs the op on any device, so a new backend tests itself against
the CPU by running every registered case. Adding an op means adding one OpCase.
"""
import dataclasses
from typing import Callable, Optional

import numpy as np

import hl


@dataclasses.dataclass(frozen=True)
class Onnx:
    """The op's one ONNX node: ``op_type`` with ``attrs``; ``consts`` are extra inputs given
    as initializers (Clip's bounds); ``opset`` the version the import test builds."""
    op_type: str
    attrs: dict = dataclasses.field(default_factory=dict)
    consts: tuple = ()
    opset: int = 18
    export: bool = True  # hl.onnx.to_onnx writes it (as this node or a composite)


# (rtol, atol) per tolerance kind, float32 then float64. "exact": one correctly rounded result
# (only the final rounding differs from float64, <= 6e-8); "libm": a few ulp; "composite":
# several libm calls, some cancelling (1 + erf(x) for x << 0), exact in absolute terms only.
TOLERANCES = {
    ("exact", np.float32): (1e-6, 0), ("libm", np.float32): (2e-6, 0),
    ("composite", np.float32): (1e-5, 1e-6),
    ("exact", np.float64): (1e-12, 0), ("libm", np.float64): (1e-12, 0),
    ("composite", np.float64): (1e-10, 1e-13),
    # a backend against the CPU's kernel: same formulas, other summation order (float64);
    # a GPU's libm and fused multiply-adds (float32)
    ("backend", np.float32): (2e-5, 1e-6), ("backend", np.float64): (1e-6, 1e-7),
}
# a backend's float64 gradient: against its own central differences (as above), and against
# the CPU's gradient (the same formulas: only summation order differs)
BACKEND_GRAD_RTOL, BACKEND_GRAD_ATOL = 1e-9, 1e-12
# gradient check: float64 central differences, eps 1e-6 (truncation ~1e-12, rounding ~1e-10)
GRAD_RTOL, GRAD_ATOL = 1e-5, 1e-6
# ONNX: float32 through onnxruntime's own kernels (other formulas, other rounding)
ONNX_RTOL, ONNX_ATOL = 1e-5, 1e-6
SPECIAL = (0.0, -0.0, np.inf, -np.inf, np.nan, 1.0, -1.0)
# the relative rounding of one result rounded to nearest: 2^-11 float16 (11-bit significand),
# 2^-8 bfloat16 (8 bits)
HALF_UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}


@dataclasses.dataclass(frozen=True)
class OpCase:
    name: str
    call: Callable                  # hl tensors -> hl tensor
    reference: Optional[Callable]   # float64 numpy arrays -> numpy array; None: the CPU's
    low: float = -5.0               # inputs drawn uniformly from [low, high]
    high: float = 5.0
    arity: int = 1
    kind: str = "composite"         # the tolerance (TOLERANCES)
    dtypes: tuple = (np.float32, np.float64)
    out_dtype: Optional[type] = None  # None: the input's dtype
    special: bool = True            # check SPECIAL values against the reference
    numpy_defined: bool = False     # numpy's answer on SPECIAL is the law (sign of zero too)
    grad: bool = True
    kinks: tuple = ()               # points where the derivative jumps: gradient inputs avoid
    onnx: Optional[Onnx] = None
    shapes: tuple = ((17, 5), (3, 1, 4), (), (0, 3), (1,))  # arity > 1: a tuple per input
    grad_shapes: tuple = ((3, 4),)  # arity > 1: broadcasting pairs, so sum_to is checked
    grad_range: Optional[tuple] = None  # (low, high) for the gradient inputs, if narrower
    draw: Optional[Callable] = None  # (rng, dtype, shapes) -> arrays, for a joint domain
    ops: tuple = ()                 # the libcore ops it reaches (default: its name)
    grad_args: Optional[tuple] = None  # inputs whose gradient is checked (None: all)
    # float16/bfloat16 on other backends (test_backend_half_matches_cpu): the float inputs
    # rounded to the half type, run there in it, against the CPU in float32 on the same
    # values. half_tol: the allowed difference of float outputs and gradients in units of the
    # half type's rounding (HALF_UNIT) times the largest magnitude; integer outputs (indices)
    # must be equal. None: the op does not compute in half.
    half_tol: Optional[float] = None
    # the absolute tolerance on other backends in float32, where the table's is too tight: a
    # long sum (a product over K terms) in another order errs by ~K * 2^-24 * |term|, however
    # small cancellation leaves the result. None: the table's.
    backend_atol32: Optional[float] = None

    def __str__(self):
        return self.name

    # ---- inputs ------------------------------------------------------------------------
    @property
    def backend_only(self):
        return self.reference is None

    def grad_indices(self, n_inputs):
        return tuple(range(n_inputs)) if self.grad_args is None else self.grad_args

    def inputs(self, rng, dtype, shape):
        shapes = shape if self.arity > 1 else (shape,)
        if self.backend_only:
            return [np.asarray(a) for a in self.draw(rng, dtype, shapes)]
        if self.draw is not None:
            return [np.asarray(a).astype(dtype) for a in self.draw(rng, dtype, shapes)]
        return [rng.uniform(self.low, self.high, size=s).astype(dtype) for s in shapes]

    def grad_inputs(self, rng, shape):
        """float64 inputs for the gradient check, at least 0.05 from every kink."""
        if self.grad_range is not None:
            low, high = self.grad_range
            shapes = shape if self.arity > 1 else (shape,)
            xs = [rng.uniform(low, high, size=s) for s in shapes]
        else:  # the drawing range cut to [-4, 4]: far out, exp-like terms swamp the sum whose
            # finite differences are taken (its rounding error grows with its largest term)
            low, high = max(self.low, -4.0), min(self.high, 4.0)
            shapes = shape if self.arity > 1 else (shape,)
            xs = self.inputs(rng, np.float64, shape) if self.draw else \
                [rng.uniform(low, high, size=s) for s in shapes]
        for k in self.kinks:
            xs = [np.where(np.abs(x - k) < 0.05, k + 0.3, x) for x in xs]
        return xs

    # ---- running -----------------------------------------------------------------------
    def run(self, arrays, device="cpu"):
        """The op on `device`, its result as numpy (the hook every backend's test uses)."""
        return self.call(*[hl.tensor(a, device=device) for a in arrays]).numpy()

    def run_all(self, arrays, device="cpu", requires_grad=()):
        """The op on `device`: its input tensors (those in requires_grad tracking gradients)
        and its outputs, a list (an op may give several: topk, max_pool's indices)."""
        xs = [hl.tensor(a, device=device, requires_grad=i in requires_grad)
              for i, a in enumerate(arrays)]
        ys = self.call(*xs)
        return xs, list(ys) if isinstance(ys, (tuple, list)) else [ys]

    def expected(self, arrays):
        dtype = self.out_dtype or arrays[0].dtype
        with np.errstate(all="ignore"):
            return np.asarray(self.reference(*[a.astype(np.float64) for a in arrays])
                              ).astype(dtype)

    def tolerance(self, dtype):
        rtol, atol = TOLERANCES[(self.kind, np.dtype(dtype).type)]
        if self.backend_atol32 is not None and np.dtype(dtype) == np.float32:
            atol = self.backend_atol32
        return rtol, atol
