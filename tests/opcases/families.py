"""OpCases beyond tests/opcases/elementwise.py: the element-wise rows it does not hold
(integer dtypes, predicates, comparisons, logical ops, relu_grad) and every other family of
libcore's op table: copies and casts, fills, where, reductions, matmul and gemm, softmax and
cross-entropy, gather, one_hot, convolution, pooling, normalisations, layout ops, scatter,
topk, nonzero and resize.

These are backend cases: ``reference`` is None, because the reference is the CPU kernel
(checked against numpy and PyTorch in tests/ops/ and tests/layers/). tests/opcases/
test_opcases.py runs each on every other available backend (CUDA, emulated in CI) against the
CPU in each dtype (float64 to rtol 1e-6 / atol 1e-7, float32 to 2e-5 / 1e-6: a GPU's libm and
fused multiply-adds differ in the last bits), and checks the float64 gradient of the inputs
``grad_args`` names against central differences of that backend's forward and against the
CPU's gradient. ``draw(rng, dtype)`` gives the numpy inputs (index arrays keep their dtype).

Every op of libcore is reached by a case here or in elementwise.py, is a gradient kernel whose
forward case checks it (GRADIENT_OPS), or is random (RANDOM_OPS, tests/cuda/test_device.py
checks the Philox stream): test_every_op_has_a_case fails for an op added to ops.h without one.
"""
import numpy as np

import hl
from hl import ops

from .case import OpCase

F32, F64 = np.float32, np.float64


def backend(op, call, draw, grad=(), dtypes=(F32, F64), ids="", half=None, atol32=None):
    """A case of libcore op `op` checked against the CPU on every other backend (and, with
    `half`, in float16 and bfloat16 to that many rounding units: case.py's half_tol; with
    `atol32`, float32 to that absolute tolerance: case.py's backend_atol32)."""
    return OpCase(f"{op}-{ids}" if ids else op, call, None, kind="backend", dtypes=dtypes,
                  special=False, grad=bool(grad), grad_args=tuple(grad), shapes=(None,),
                  draw=lambda rng, dtype, shapes: draw(rng, dtype), ops=(op,), half_tol=half,
                  backend_atol32=atol32)


def normal(*shape):
    return lambda r, dt: [r.standard_normal(shape).astype(dt)]


def within(lo, hi, *shape):
    return lambda r, dt: [r.uniform(lo, hi, shape).astype(dt)]


def _ints(*shape, low=-9, high=9):
    return lambda r, dt: [r.integers(low, high, shape)]


# the element-wise rows elementwise.py (float dtypes, numpy references) does not hold
CASES = [backend(name, getattr(hl, name), _ints(5), dtypes=(F64,), ids="int64")
         for name in ("neg", "abs", "sign", "square")]
CASES += [backend(name, getattr(hl, name), lambda r, dt: [
    np.array([0, 1.5, np.nan, np.inf, -np.inf, -2], dtype=dt)])
    for name in ("logical_not", "isnan", "isinf", "isfinite")]
CASES += [backend(name, getattr(hl, name), lambda r, dt: [r.integers(-20, 20, (7,)),
                                                           r.integers(-5, 6, (7,))],
                  dtypes=(F64,), ids="int64")
          for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod", "fmod")]
CASES += [backend("relu_grad", ops.relu_grad, lambda r, dt: [
    r.standard_normal((3, 1, 4)).astype(dt), (r.standard_normal((2, 4)) + 2.5).astype(dt)])]
CASES += [backend(name, getattr(hl, name), lambda r, dt: [
    r.integers(-2, 3, (4, 5)).astype(dt), r.integers(-2, 3, (5,)).astype(dt)])
    for name in ("eq", "ne", "lt", "le", "gt", "ge")]
CASES += [backend(name, getattr(hl, name), lambda r, dt: [
    r.integers(0, 2, (4, 5)).astype(bool), r.integers(0, 2, (4, 5)).astype(bool)],
    dtypes=(F64,)) for name in ("logical_and", "logical_or", "logical_xor")]

CASES += [
    backend("copy", lambda x: x.T.contiguous(), normal(3, 5)),
    backend("copy", lambda x: x[:, ::2].contiguous() * 1, normal(4, 6), ids="strided"),
    backend("copy", lambda x: x.astype(hl.float16).astype(hl.float32), normal(4, 6),
                    dtypes=(F32,), ids="float16"),
    backend("copy", lambda x: x.astype(hl.bfloat16).astype(hl.float64), normal(4, 6),
                    dtypes=(F64,), ids="bfloat16"),
    backend("copy", lambda x: (x * 100).astype(hl.int32), normal(4, 6), ids="to_int32"),
    backend("copy", lambda x: x.astype(hl.uint8), lambda r, dt: [
          np.array([-3, 0.5, 2.7, 300, np.nan], dtype=dt)], ids="saturate"),
    backend("fill", lambda x: hl.full((2, 3), 1.25, dtype=x.dtype, device=x.device) + x,
                    normal(2, 3)),
    backend("arange", lambda x: hl.arange(0, 7, 0.5, dtype=x.dtype, device=x.device) * x,
                      normal(14), half=2),
    backend("eye", lambda x: hl.eye(3, 4, k=1, dtype=x.dtype, device=x.device) + x,
                   normal(3, 4), half=2),
    backend("where", lambda c, a, b: hl.where(c > 0, a, b), lambda r, dt: [
          r.standard_normal((3, 4)).astype(dt), r.standard_normal((3, 4)).astype(dt),
          r.standard_normal((4,)).astype(dt)], grad=(1, 2), half=2),
    backend("sum", lambda x: x.sum(axis=1), normal(3, 4, 5), grad=(0,), half=2),
    backend("sum", lambda x: x.sum(), normal(70, 100), grad=(), ids="block"),
    backend("sum", lambda x: (x > 0).sum(axis=0), normal(6, 5), ids="bool"),
    backend("mean", lambda x: x.mean(axis=(0, 2)), normal(3, 4, 5), grad=(0,)),
    backend("max", lambda x: x.max(axis=0), normal(5, 4), grad=(0,)),
    backend("max", lambda x: x.max(axis=1), lambda r, dt: [
          np.array([[1, np.nan, 3], [2, 5, 1]], dtype=dt)], ids="nan"),
    backend("min", lambda x: x.min(axis=1, keepdims=True), normal(4, 5), grad=(0,)),
    backend("prod", lambda x: x.prod(axis=0), within(0.5, 1.5, 4, 3), grad=(0,)),
    backend("l2", lambda x: hl.norm(x, axis=1), normal(4, 6), grad=(0,)),
    backend("logsumexp", lambda x: hl.logsumexp(x, axis=1), normal(3, 7), grad=(0,)),
    backend("logsumexp", lambda x: hl.logsumexp(x), normal(60, 90), ids="block"),
    backend("argmax", lambda x: x.argmax(axis=1), normal(5, 7), half=0),
    backend("argmin", lambda x: x.argmin(axis=0), normal(5, 7), half=0),
    backend("argmax", lambda x: x.argmax(axis=0), lambda r, dt: [
          np.array([[1, np.nan, 3], [np.nan, 5, 3]], dtype=dt)], ids="nan", half=0),
    backend("matmul", hl.matmul, lambda r, dt: [r.standard_normal((2, 3, 4)).astype(dt),
                                                r.standard_normal((4, 5)).astype(dt)],
                      grad=(0, 1)),
    backend("matmul", lambda a, b: a.T @ b, lambda r, dt: [r.standard_normal((4, 3)).astype(dt),
                                                           r.standard_normal((4, 2)).astype(dt)],
                      grad=(0, 1), ids="transposed"),
    backend("gemm", lambda a, b, c: hl.gemm(a, b, c, trans_b=True, alpha=0.5, beta=2.0),
                    lambda r, dt: [r.standard_normal((3, 4)).astype(dt),
                                   r.standard_normal((5, 4)).astype(dt),
                                   r.standard_normal((5,)).astype(dt)], grad=(0, 1, 2)),
    backend("softmax", lambda x: hl.softmax(x, axis=1), normal(3, 5, 2), grad=(0,)),
    backend("log_softmax", lambda x: hl.log_softmax(x, axis=-1), normal(4, 6), grad=(0,)),
    backend("softmax_cross_entropy", 
          lambda x, t: hl.softmax_cross_entropy(x, t, reduction="none"),
          lambda r, dt: [r.standard_normal((5, 4)).astype(dt), np.array([0, 3, 1, -100, 2])],
          grad=(0,)),
    backend("softmax_cross_entropy", 
          lambda x, t: hl.softmax_cross_entropy(x, t), lambda r, dt: [
              r.standard_normal((3, 4, 2)).astype(dt),
              np.abs(r.standard_normal((3, 4, 2))).astype(dt)], grad=(0, 1), ids="probs"),
    backend("gather", lambda x, i: hl.gather(x, i, axis=1), lambda r, dt: [
          r.standard_normal((3, 5)).astype(dt), np.array([[4, 0], [-1, 2]])], grad=(0,),
          half=2),
    # embedding's backward: many repeated rows, summed (in float32 for the half types)
    backend("gather", lambda w, i: hl.gather(w, i, axis=0), lambda r, dt: [
          r.standard_normal((6, 4)).astype(dt), r.integers(-6, 6, (40,))], grad=(0,),
          ids="embedding", half=2),
    backend("one_hot", lambda i: hl.one_hot(i, 5), lambda r, dt: [np.array([0, 4, -1, 2])]),
]
CASES += [
    backend("conv", lambda x, w, b: hl.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)),
                    lambda r, dt: [r.standard_normal((2, 3, 6, 7)).astype(dt),
                                   r.standard_normal((4, 3, 3, 2)).astype(dt),
                                   r.standard_normal((4,)).astype(dt)], grad=(0, 1, 2)),
    backend("conv", lambda x, w: hl.conv2d(x, w, groups=2, padding=(0, 1)),
                    lambda r, dt: [r.standard_normal((2, 4, 5, 5)).astype(dt),
                                   r.standard_normal((6, 2, 3, 3)).astype(dt)], grad=(0, 1),
                    ids="groups"),
    backend("conv", lambda x, w, b: hl.conv1d(x, w, b, stride=2, padding=2),
                    lambda r, dt: [r.standard_normal((2, 3, 9)).astype(dt),
                                   r.standard_normal((5, 3, 4)).astype(dt),
                                   r.standard_normal((5,)).astype(dt)], grad=(0, 1, 2),
                    ids="1d"),
    backend("conv_grad_input", 
          lambda x, w, b: hl.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
          lambda r, dt: [r.standard_normal((2, 3, 4, 4)).astype(dt),
                         r.standard_normal((3, 2, 3, 3)).astype(dt),
                         r.standard_normal((2,)).astype(dt)], grad=(0, 1, 2)),
    backend("max_pool", lambda x: hl.max_pool2d(x, 3, stride=2, padding=1, return_indices=True),
                        normal(2, 3, 7, 6), grad=(0,)),
    backend("max_pool", lambda x: hl.max_pool2d(x, 2, dilation=2, ceil_mode=True),
                        normal(1, 2, 7, 7), grad=(0,), ids="dilated-ceil"),
    backend("avg_pool", lambda x: hl.avg_pool2d(x, 3, stride=2, padding=1), normal(2, 3, 7, 6),
                        grad=(0,)),
    backend("avg_pool", lambda x: hl.avg_pool2d(x, (2, 3), padding=1, count_include_pad=False,
                                                ceil_mode=True), normal(2, 2, 5, 7), grad=(0,),
                        ids="exclude-pad"),
]
CASES += [
    backend("batch_norm", lambda x, g, b: hl.batch_norm(x, None, None, g, b, training=True),
                          lambda r, dt: [r.standard_normal((4, 3, 2, 2)).astype(dt),
                                         r.standard_normal((3,)).astype(dt),
                                         r.standard_normal((3,)).astype(dt)], grad=(0, 1, 2)),
    backend("batch_norm", lambda x, m, v: hl.batch_norm(x, m, v, training=False),
                          lambda r, dt: [r.standard_normal((4, 3, 5)).astype(dt),
                                         r.standard_normal((3,)).astype(dt),
                                         r.uniform(0.5, 2, (3,)).astype(dt)], grad=(0,),
                          ids="inference"),
    backend("layer_norm", lambda x, g, b: hl.layer_norm(x, (4, 5), g, b),
                          lambda r, dt: [r.standard_normal((3, 4, 5)).astype(dt),
                                         r.standard_normal((4, 5)).astype(dt),
                                         r.standard_normal((4, 5)).astype(dt)], grad=(0, 1, 2)),
    backend("concat", lambda a, b: hl.concat([a, b, a], 1), lambda r, dt: [
          r.standard_normal((2, 3)).astype(dt), r.standard_normal((2, 1)).astype(dt)],
          grad=(0, 1)),
    backend("pad", lambda x: hl.pad(x, (1, 2, 0, 1), value=0.5), normal(3, 4), grad=(0,)),
    backend("pad", lambda x: hl.pad(x, (2, 1, 1, 2), mode="reflect"), normal(4, 5), grad=(0,),
                   ids="reflect"),
    backend("pad", lambda x: hl.pad(x, (1, 0, -1, 2), mode="edge"), normal(4, 5), grad=(0,),
                   ids="edge-crop"),
    backend("tile", lambda x: hl.tile(x, (2, 3)), normal(2, 3), grad=(0,)),
    backend("triangle", lambda x: hl.tril(x, -1) + hl.triu(x.T, 1).T, normal(2, 4, 5),
                        grad=(0,)),
    backend("cumsum", lambda x: hl.cumsum(x, axis=1), normal(3, 4, 2), grad=(0,), half=2),
    backend("cumsum", lambda x: hl.cumsum(x, axis=0), within(0.9, 1.1, 100, 2), grad=(0,),
                      ids="long", half=2),
    backend("cumsum", lambda x: hl.cumsum(x, axis=0), lambda r, dt: [r.integers(-5, 5, (6, 2))],
                      dtypes=(F64,), ids="int64"),
]
CASES += [
    backend("gather_elements", lambda x, i: hl.gather_elements(x.T, i, axis=1), lambda r, dt: [
          r.standard_normal((5, 3)).astype(dt), np.array([[0, 4, -1], [2, 2, -5]])],
          grad=(0,), half=2),
    backend("scatter_elements", lambda x, i, u: hl.scatter_elements(x, i, u, axis=0),
                                lambda r, dt: [r.standard_normal((4, 3)).astype(dt),
                                               np.array([[1, 0, 3], [-1, 2, 0]]),
                                               r.standard_normal((2, 3)).astype(dt)],
                                grad=(0, 2), half=2),
    backend("scatter_elements", lambda x, i, u: hl.scatter_elements(x, i, u, axis=1,
                                                                    reduction="add"),
                                lambda r, dt: [r.standard_normal((2, 4)).astype(dt),
                                               np.array([[1, 1, 3], [0, -1, 0]]),
                                               r.standard_normal((2, 3)).astype(dt)],
                                ids="add", half=2),
    backend("scatter_elements", lambda x, i, u: hl.scatter_elements(x, i, u, axis=1,
                                                                    reduction="max"),
                                lambda r, dt: [r.integers(-9, 9, (2, 4)),
                                               np.array([[1, 1, 3], [0, -1, 0]]),
                                               r.integers(-9, 9, (2, 3))],
                                dtypes=(F64,), ids="max-int64"),
]
CASES += [
    backend("topk", lambda x: hl.topk(x, 3, axis=1), lambda r, dt: [
          np.array([[3, 1, np.nan, 3, -2], [0, -0.0, 5, 5, 1]], dtype=dt)], half=0),
    backend("topk", lambda x: hl.topk(x, 2, axis=0, largest=False), normal(4, 3, 2), grad=(0,),
                    ids="smallest", half=2),
    backend("nonzero", lambda x: hl.nonzero(x), lambda r, dt: [
          (r.integers(0, 3, (5, 4, 3)) * r.standard_normal((5, 4, 3))).astype(dt)], half=0),
    backend("nonzero", lambda x: hl.nonzero(x > 0.5), normal(5000, 3), ids="chunks"),
]
CASES += [
    backend("resize", lambda x: hl.interpolate(x, scale_factor=2), normal(1, 2, 3, 4),
                      grad=(0,), half=2),
    backend("resize", lambda x: hl.interpolate(x, size=(5, 7), mode="bilinear"),
                      normal(2, 1, 3, 4), grad=(0,), ids="bilinear", half=2),
    backend("resize", lambda x: hl.interpolate(x, size=(2, 6), mode="bilinear",
                                               align_corners=True), normal(1, 2, 4, 3),
                      grad=(0,), ids="align-corners"),
    backend("resize", lambda x: hl.interpolate((x > 0).astype(hl.uint8), scale_factor=3),
                      normal(1, 1, 2, 3), ids="nearest-uint8"),
]


def _conv_fused(act="none", alpha=0.0, beta=0.0, pack=None, **geometry):
    """conv_fused_forward(x, w, b, r) with this epilogue; pack: the weight packed first
    (conv_pack's layout, made on the device the call runs on)."""
    def call(x, w, b=None, r=None):
        packed = None if pack is None else ops.conv_pack(w, geometry.get("groups", 1), pack)
        return ops.conv_fused_forward(x, w, b, r, act=act, alpha=alpha, beta=beta,
                                      packed=packed, **geometry)
    return call


def _conv_inputs(x, w, out=None, bias=True):
    """x, w, the bias (when bias) and a residual of shape out (when given)."""
    def draw(r, dt):
        arrays = [r.standard_normal(x).astype(dt), r.standard_normal(w).astype(dt)]
        if bias:
            arrays.append(r.standard_normal((w[0],)).astype(dt))
        if out is not None:
            arrays.append(r.standard_normal(out).astype(dt))
        return arrays
    return draw


# conv_fused: conv, bias, residual and each activation in one pass (inference; no gradient)
CASES += [
    backend("conv_fused", _conv_fused("clip", -0.5, 0.5, padding=1),
            _conv_inputs((2, 3, 5, 4), (4, 3, 3, 3), (2, 4, 5, 4))),
    backend("conv_fused", _conv_fused("relu", stride=2),
            _conv_inputs((2, 3, 7, 6), (5, 3, 3, 3)), ids="relu"),
    backend("conv_fused", lambda x, w, r: ops.conv_fused_forward(x, w, None, r, groups=2,
                                                                 act="leaky_relu", alpha=0.1),
            _conv_inputs((1, 4, 5, 5), (6, 2, 1, 1), (1, 6, 5, 5), bias=False),
            ids="leaky-residual-groups"),
    backend("conv_fused", _conv_fused("hard_sigmoid", 0.2, 0.5, padding=2, dilation=2),
            _conv_inputs((2, 2, 6, 6), (3, 2, 3, 3)), ids="hard-sigmoid"),
    backend("conv_fused", _conv_fused(padding=1), _conv_inputs((2, 3, 9), (4, 3, 3), (2, 4, 9)),
            ids="1d-none"),
    backend("conv_fused", _conv_fused("relu", pack="panels"),
            _conv_inputs((2, 8, 4, 4), (13, 8, 1, 1), (2, 13, 4, 4)), dtypes=(F32,),
            ids="packed-panels"),
    backend("conv_fused", _conv_fused("clip", 0.0, 6.0, pack="winograd", padding=1),
            _conv_inputs((1, 8, 6, 6), (8, 8, 3, 3)), dtypes=(F32,), ids="packed-winograd"),
]
# conv_pack: the layouts of the CPU's packed convolution kernels (inference), the same bytes
# on every device
CASES += [backend("conv_pack", ops.conv_pack, normal(6, 1, 1, 1), dtypes=(F32,)),
          backend("conv_pack", lambda w: ops.conv_pack(w, groups=2), normal(14, 3, 3, 3),
                  dtypes=(F32,), ids="groups"),
          backend("conv_pack", lambda w: ops.conv_pack(w, layout="winograd"),
                  normal(5, 3, 3, 3), dtypes=(F32,), ids="winograd")]


def _matmul_fused(act="none", pack=False, trans_b=False, **kw):
    """matmul_fused_forward(a, b, bias?, residual?) with b packed first (gemm_pack_b, on the
    call's device) or read through its transpose."""
    def call(a, b, *extra):
        bias, residual = (list(extra) + [None, None])[:2] if kw.get("bias", True) else \
            (None, extra[0] if extra else None)
        if pack:
            b = ops.gemm_pack_b(b, trans_b=trans_b)
        elif trans_b:
            b = b.T
        return ops.matmul_fused_forward(a, b, bias, residual, act=act,
                                        alpha=kw.get("alpha", 0.0), beta=kw.get("beta", 0.0))
    return call


def _matmul_inputs(a, k, n, trans_b=False, bias=True, residual=False):
    def draw(r, dt):
        arrays = [r.standard_normal(a + (k,)).astype(dt),
                  r.standard_normal((n, k) if trans_b else (k, n)).astype(dt)]
        if bias:
            arrays.append(r.standard_normal((n,)).astype(dt))
        if residual:
            arrays.append(r.standard_normal(a + (n,)).astype(dt))
        return arrays
    return draw


# the packed B of inference products (the same bytes on every device) and their epilogue
CASES += [backend("gemm_pack_b", lambda b: ops.gemm_pack_b(b).data, normal(4, 2), dtypes=(F32,)),
          backend("gemm_pack_b", lambda b: ops.gemm_pack_b(b, trans_b=True).data,
                  normal(37, 300),
                  dtypes=(F32,), ids="two-blocks-transposed"),
          backend("matmul_fused", lambda a, b: ops.matmul_fused_forward(a, b, act="gelu"),
                  lambda r, dt: [r.standard_normal((3, 4)).astype(dt),
                                 r.standard_normal((4, 2)).astype(dt)], dtypes=(F32,)),
          backend("matmul_fused", _matmul_fused("gelu_tanh", trans_b=True),
                  _matmul_inputs((2, 3), 5, 7, trans_b=True, residual=True), ids="gelu-tanh"),
          # K = 300 normal products: |terms| sum to ~200, so another summation order (cuBLAS
          # on an H100) moves a result by up to ~3e-6 (seen), even where it is near zero
          backend("matmul_fused", _matmul_fused("relu", pack=True),
                  _matmul_inputs((9,), 300, 37, residual=True), dtypes=(F32,),
                  ids="packed-relu", atol32=2e-5),
          backend("matmul_fused", _matmul_fused("clip", pack=True, trans_b=True, alpha=-0.5,
                                                beta=1.0),
                  _matmul_inputs((4,), 17, 16, trans_b=True), dtypes=(F32,),
                  ids="packed-clip"),
          backend("matmul_fused", _matmul_fused("hard_sigmoid", bias=False, alpha=0.2,
                                                beta=0.5),
                  _matmul_inputs((2, 2), 6, 3, bias=False, residual=True), ids="hard-sigmoid"),
          backend("matmul_fused", _matmul_fused("leaky_relu", alpha=0.01),
                  _matmul_inputs((5,), 0, 3), ids="leaky-k0")]


def _attention_inputs(r, dt):
    """q, k, v (2, 3, 5 or 7, 4) and a (2, 1, 5, 7) mask with a hidden key per row and a
    fully hidden row."""
    mask = np.where(r.random((2, 1, 5, 7)) < 0.3, -np.inf, 0.0)
    mask[1, 0, 2] = -np.inf
    return [r.standard_normal((2, 3, 5, 4)).astype(dt), r.standard_normal((2, 3, 7, 4)).astype(dt),
            r.standard_normal((2, 3, 7, 4)).astype(dt), mask.astype(dt)]


# fused attention (inference, CPU only: NOT_ON below)
CASES += [backend("attention", lambda q, k, v, m: ops.attention_forward(
                      q, k, v, m, scale=0.5, nan_to_zero=True, merge_heads=True),
                  _attention_inputs, dtypes=(F32,))]


def _optim_case(rule, n_states, step_values, hyper, flags=(), ids=""):
    """One step of the one-pass optimiser kernel on copies (it updates in place) from a
    parameter, its gradient and the rule's states (non-negative where they are sums of
    squares); every updated tensor is an output."""
    def call(p, g, *states):
        p = p.clone()
        states = [s.abs() for s in states]
        ops.optim_update(rule, p, g, states, step_values, hyper, flags)
        return (p, *states)

    def draw(r, dt):
        return [r.standard_normal((3, 5)).astype(dt) for _ in range(2 + n_states)]
    return backend("optim_update", call, draw, ids=ids)


# optim_update: the one-pass optimiser update (hl.opt runs each rule op by op where it is not)
CASES += [
    _optim_case("adam", 2, [-0.01, 0.9], [0.0, 0.1, 0.999, 0.001, 1e-8]),
    _optim_case("adam", 3, [-0.01, 0.9, 0.99], [0.0, 0.1, 0.999, 0.001, 1e-8], ["decoupled"],
                ids="adamw-amsgrad"),
    _optim_case("adam", 2, [-0.01, 0.9], [0.1, 0.1, 0.999, 0.001, 1e-8], ids="l2"),
    _optim_case("sgd", 0, [-0.1], [0.01, 0.0, 1.0], ids="sgd"),
    _optim_case("sgd", 1, [-0.1], [0.0, 0.9, 0.8], ids="momentum-dampening"),
    _optim_case("sgd", 1, [-0.1], [0.01, 0.9, 1.0], ["nesterov", "init"], ids="nesterov-init"),
    _optim_case("rmsprop", 1, [-0.01], [0.0, 0.99, 0.01, 1e-8, 0.0], ids="rmsprop"),
    _optim_case("rmsprop", 3, [-0.01], [0.1, 0.99, 0.01, 1e-8, 0.9], ["centered", "momentum"],
                ids="rmsprop-centered-momentum"),
    _optim_case("adagrad", 1, [-0.1], [0.01, 1e-10], ids="adagrad"),
    _optim_case("v2_momentum", 1, [-0.1], [0.01, 0.9], ids="v2-momentum"),
    _optim_case("v2_adam", 2, [-0.01], [0.9, 0.1, 0.999, 0.001, 1e-8], ids="v2-adam"),
]
# backward kernels are covered by the gradient checks of the cases above
GRADIENT_OPS = {"softmax_grad": "softmax", "log_softmax_grad": "log_softmax",
                "conv_grad_weight": "conv", "max_pool_grad": "max_pool",
                "avg_pool_grad": "avg_pool", "batch_norm_grad": "batch_norm",
                "layer_norm_grad": "layer_norm", "resize_grad": "resize",
                "softmax_cross_entropy_grad": "softmax_cross_entropy",
                "gather_grad": "gather"}
RANDOM_OPS = {"random_uniform", "random_normal", "random_bernoulli"}

# Ops a backend does not implement yet (an op added to ops.h goes here until the backend has
# a kernel): their cases must fail there with the registry's "<op> is not implemented on
# <backend>". Every op of the table runs on cuda but fused attention (an inference kernel of
# the CPU's; hl.onnx fuses attention on the CPU only).
NOT_ON = {"cuda": {"attention"}}
# Ops that do not compute in float16/bfloat16 on a backend by design (docs/amp.md gives the
# reasons): the packed inference layouts and their fused products are float32 kernels, and
# the optimiser's one-pass update keeps float32 master weights (mixed precision never updates
# half parameters). Every other op a backend has takes the half types there.
NO_HALF = {"cuda": {"conv_fused", "conv_pack", "gemm_pack_b", "matmul_fused", "optim_update",
                    "attention"}}  # attention: no cuda kernel at all (NOT_ON)
