"""The op table the CUDA tests run: for every libcore op, how to call it and on what inputs.

Each entry of CASES is (op name as libcore lists it, Case). A Case's ``fn`` takes hl tensors
(all on one device) and returns a tensor or a tuple of them; ``inputs`` is a function of a
numpy generator and a float dtype giving the numpy inputs; ``grad`` marks which inputs get a
gradient check (float64 on cuda against central differences, and against the CPU's gradient);
``dtypes`` the float dtypes to run. tests/cuda/test_ops.py runs each case on the CPU and on
cuda and compares. NOT_ON_CUDA lists the ops the CUDA backend does not implement yet: each
must fail with "<op> is not implemented on cuda". Every op of libcore is in one of the two
(test_every_op_is_covered), so an op added to ops.h without a CUDA case fails the suite.

The OpCase registry (tests/opcases, issue 19) runs each of its cases on cuda too
(test_backend_matches_cpu, marked gpu); today it holds the element-wise ops only. As the other
families move into OpCases, their entries here become redundant and go: the entries map one
to one onto cases (a call, inputs per dtype, which inputs get a gradient check).
"""
from dataclasses import dataclass, field

import numpy as np

import hl
from hl import ops

F32, F64 = np.float32, np.float64


@dataclass
class Case:
    fn: object
    inputs: object
    grad: tuple = ()          # indices of inputs whose gradient is checked
    dtypes: tuple = (F32, F64)
    rtol: float = 1e-6        # float32 tolerances are widened in test_ops (device libm)
    atol: float = 1e-7
    ids: str = ""
    extra: dict = field(default_factory=dict)


def normal(*shape):
    return lambda r, dt: [r.standard_normal(shape).astype(dt)]


def within(lo, hi, *shape):
    return lambda r, dt: [r.uniform(lo, hi, shape).astype(dt)]


# Element-wise ops: domain of each unary float op (strided and broadcast inputs are exercised
# by the binary cases and test_views_and_broadcasting).
UNARY_DOMAIN = {
    "log": (0.1, 3), "sqrt": (0.1, 3), "rsqrt": (0.1, 3), "reciprocal": (0.5, 3),
    "asin": (-0.9, 0.9), "acos": (-0.9, 0.9), "atanh": (-0.9, 0.9), "acosh": (1.1, 3),
    "log1p": (-0.5, 3), "tan": (-1.2, 1.2),
}
NON_SMOOTH = {"floor", "ceil", "round", "trunc", "sign", "relu", "clip", "hard_sigmoid",
              "hard_swish", "abs", "leaky_relu", "elu", "celu", "selu"}
UNARY_CALL = {
    "leaky_relu": lambda x: hl.leaky_relu(x, 0.1), "elu": lambda x: hl.elu(x, 0.7),
    "celu": lambda x: hl.celu(x, 0.7), "selu": hl.selu,
    "hard_sigmoid": lambda x: hl.hard_sigmoid(x, 0.3, 0.4),
    "clip": lambda x: hl.clip(x, -0.5, 0.7),
}

CASES = []
for name in list(hl._core.OPS)[:hl._core.OPS["neg"]]:  # the float unary ops, in ops.h order
    lo, hi = UNARY_DOMAIN.get(name, (-2.5, 2.5))
    fn = UNARY_CALL.get(name, getattr(hl, name))
    CASES.append((name, Case(fn, within(lo, hi, 3, 4),
                             grad=() if name in NON_SMOOTH else (0,))))
for name in ("neg", "abs", "sign", "square"):
    CASES.append((name, Case(getattr(hl, name), normal(3, 4), grad=(0,) if name in
                             ("neg", "square") else ())))
    CASES.append((name, Case(getattr(hl, name), lambda r, dt: [r.integers(-9, 9, (5,))],
                             dtypes=(F64,), ids="int64")))
for name in ("logical_not", "isnan", "isinf", "isfinite"):
    CASES.append((name, Case(getattr(hl, name), lambda r, dt: [
        np.array([0, 1.5, np.nan, np.inf, -np.inf, -2], dtype=dt)])))

BINARY_CALL = {"relu_grad": ops.relu_grad, "pow": hl.pow, "mod": hl.mod, "fmod": hl.fmod}
for name in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "mod", "fmod",
             "relu_grad"):
    fn = BINARY_CALL[name] if name in BINARY_CALL else getattr(hl, name)
    smooth = name in ("add", "sub", "mul", "div", "pow")
    if name == "pow":
        gen = lambda r, dt: [r.uniform(0.5, 2, (3, 4)).astype(dt),
                             r.uniform(-1.5, 1.5, (4,)).astype(dt)]
    else:  # (3, 1, 4) with (2, 4): broadcasting on both sides
        gen = lambda r, dt: [r.standard_normal((3, 1, 4)).astype(dt),
                             (r.standard_normal((2, 4)) + 2.5).astype(dt)]
    CASES.append((name, Case(fn, gen, grad=(0, 1) if smooth else ())))
    if name != "relu_grad":
        CASES.append((name, Case(fn, lambda r, dt: [r.integers(-20, 20, (7,)),
                                                    r.integers(-5, 6, (7,))],
                                 dtypes=(F64,), ids="int64")))
for name in ("eq", "ne", "lt", "le", "gt", "ge"):
    CASES.append((name, Case(getattr(hl, name), lambda r, dt: [
        r.integers(-2, 3, (4, 5)).astype(dt), r.integers(-2, 3, (5,)).astype(dt)])))
for name in ("logical_and", "logical_or", "logical_xor"):
    CASES.append((name, Case(getattr(hl, name), lambda r, dt: [
        r.integers(0, 2, (4, 5)).astype(bool), r.integers(0, 2, (4, 5)).astype(bool)],
        dtypes=(F64,))))

CASES += [
    ("copy", Case(lambda x: x.T.contiguous(), normal(3, 5))),
    ("copy", Case(lambda x: x[:, ::2].contiguous() * 1, normal(4, 6), ids="strided")),
    ("copy", Case(lambda x: x.astype(hl.float16).astype(hl.float32), normal(4, 6),
                  dtypes=(F32,), ids="float16")),
    ("copy", Case(lambda x: x.astype(hl.bfloat16).astype(hl.float64), normal(4, 6),
                  dtypes=(F64,), ids="bfloat16")),
    ("copy", Case(lambda x: (x * 100).astype(hl.int32), normal(4, 6), ids="to_int32")),
    ("copy", Case(lambda x: x.astype(hl.uint8), lambda r, dt: [
        np.array([-3, 0.5, 2.7, 300, np.nan], dtype=dt)], ids="saturate")),
    ("fill", Case(lambda x: hl.full((2, 3), 1.25, dtype=x.dtype, device=x.device) + x,
                  normal(2, 3))),
    ("arange", Case(lambda x: hl.arange(0, 7, 0.5, dtype=x.dtype, device=x.device) * x,
                    normal(14))),
    ("eye", Case(lambda x: hl.eye(3, 4, k=1, dtype=x.dtype, device=x.device) + x,
                 normal(3, 4))),
    ("where", Case(lambda c, a, b: hl.where(c > 0, a, b), lambda r, dt: [
        r.standard_normal((3, 4)).astype(dt), r.standard_normal((3, 4)).astype(dt),
        r.standard_normal((4,)).astype(dt)], grad=(1, 2))),
    ("sum", Case(lambda x: x.sum(axis=1), normal(3, 4, 5), grad=(0,))),
    ("sum", Case(lambda x: x.sum(), normal(70, 100), grad=(), ids="block")),
    ("sum", Case(lambda x: (x > 0).sum(axis=0), normal(6, 5), ids="bool")),
    ("mean", Case(lambda x: x.mean(axis=(0, 2)), normal(3, 4, 5), grad=(0,))),
    ("max", Case(lambda x: x.max(axis=0), normal(5, 4), grad=(0,))),
    ("max", Case(lambda x: x.max(axis=1), lambda r, dt: [
        np.array([[1, np.nan, 3], [2, 5, 1]], dtype=dt)], ids="nan")),
    ("min", Case(lambda x: x.min(axis=1, keepdims=True), normal(4, 5), grad=(0,))),
    ("prod", Case(lambda x: x.prod(axis=0), within(0.5, 1.5, 4, 3), grad=(0,))),
    ("l2", Case(lambda x: hl.norm(x, axis=1), normal(4, 6), grad=(0,))),
    ("logsumexp", Case(lambda x: hl.logsumexp(x, axis=1), normal(3, 7), grad=(0,))),
    ("logsumexp", Case(lambda x: hl.logsumexp(x), normal(60, 90), ids="block")),
    ("argmax", Case(lambda x: x.argmax(axis=1), normal(5, 7))),
    ("argmin", Case(lambda x: x.argmin(axis=0), normal(5, 7))),
    ("matmul", Case(hl.matmul, lambda r, dt: [r.standard_normal((2, 3, 4)).astype(dt),
                                              r.standard_normal((4, 5)).astype(dt)],
                    grad=(0, 1))),
    ("matmul", Case(lambda a, b: a.T @ b, lambda r, dt: [r.standard_normal((4, 3)).astype(dt),
                                                         r.standard_normal((4, 2)).astype(dt)],
                    grad=(0, 1), ids="transposed")),
    ("gemm", Case(lambda a, b, c: hl.gemm(a, b, c, trans_b=True, alpha=0.5, beta=2.0),
                  lambda r, dt: [r.standard_normal((3, 4)).astype(dt),
                                 r.standard_normal((5, 4)).astype(dt),
                                 r.standard_normal((5,)).astype(dt)], grad=(0, 1, 2))),
    ("softmax", Case(lambda x: hl.softmax(x, axis=1), normal(3, 5, 2), grad=(0,))),
    ("log_softmax", Case(lambda x: hl.log_softmax(x, axis=-1), normal(4, 6), grad=(0,))),
    ("softmax_cross_entropy", Case(
        lambda x, t: hl.softmax_cross_entropy(x, t, reduction="none"),
        lambda r, dt: [r.standard_normal((5, 4)).astype(dt), np.array([0, 3, 1, -100, 2])],
        grad=(0,))),
    ("softmax_cross_entropy", Case(
        lambda x, t: hl.softmax_cross_entropy(x, t), lambda r, dt: [
            r.standard_normal((3, 4, 2)).astype(dt),
            np.abs(r.standard_normal((3, 4, 2))).astype(dt)], grad=(0, 1), ids="probs")),
    ("gather", Case(lambda x, i: hl.gather(x, i, axis=1), lambda r, dt: [
        r.standard_normal((3, 5)).astype(dt), np.array([[4, 0], [-1, 2]])], grad=(0,))),
    ("one_hot", Case(lambda i: hl.one_hot(i, 5), lambda r, dt: [np.array([0, 4, -1, 2])])),
]
CASES += [
    ("conv", Case(lambda x, w, b: hl.conv2d(x, w, b, stride=(2, 1), padding=1, dilation=(1, 2)),
                  lambda r, dt: [r.standard_normal((2, 3, 6, 7)).astype(dt),
                                 r.standard_normal((4, 3, 3, 2)).astype(dt),
                                 r.standard_normal((4,)).astype(dt)], grad=(0, 1, 2))),
    ("conv", Case(lambda x, w: hl.conv2d(x, w, groups=2, padding=(0, 1)),
                  lambda r, dt: [r.standard_normal((2, 4, 5, 5)).astype(dt),
                                 r.standard_normal((6, 2, 3, 3)).astype(dt)], grad=(0, 1),
                  ids="groups")),
    ("conv", Case(lambda x, w, b: hl.conv1d(x, w, b, stride=2, padding=2),
                  lambda r, dt: [r.standard_normal((2, 3, 9)).astype(dt),
                                 r.standard_normal((5, 3, 4)).astype(dt),
                                 r.standard_normal((5,)).astype(dt)], grad=(0, 1, 2),
                  ids="1d")),
    ("conv_grad_input", Case(
        lambda x, w, b: hl.conv_transpose2d(x, w, b, stride=2, padding=1, output_padding=1),
        lambda r, dt: [r.standard_normal((2, 3, 4, 4)).astype(dt),
                       r.standard_normal((3, 2, 3, 3)).astype(dt),
                       r.standard_normal((2,)).astype(dt)], grad=(0, 1, 2))),
    ("max_pool", Case(lambda x: hl.max_pool2d(x, 3, stride=2, padding=1, return_indices=True),
                      normal(2, 3, 7, 6), grad=(0,))),
    ("max_pool", Case(lambda x: hl.max_pool2d(x, 2, dilation=2, ceil_mode=True),
                      normal(1, 2, 7, 7), grad=(0,), ids="dilated-ceil")),
    ("avg_pool", Case(lambda x: hl.avg_pool2d(x, 3, stride=2, padding=1), normal(2, 3, 7, 6),
                      grad=(0,))),
    ("avg_pool", Case(lambda x: hl.avg_pool2d(x, (2, 3), padding=1, count_include_pad=False,
                                              ceil_mode=True), normal(2, 2, 5, 7), grad=(0,),
                      ids="exclude-pad")),
]
CASES += [
    ("batch_norm", Case(lambda x, g, b: hl.batch_norm(x, None, None, g, b, training=True),
                        lambda r, dt: [r.standard_normal((4, 3, 2, 2)).astype(dt),
                                       r.standard_normal((3,)).astype(dt),
                                       r.standard_normal((3,)).astype(dt)], grad=(0, 1, 2))),
    ("batch_norm", Case(lambda x, m, v: hl.batch_norm(x, m, v, training=False),
                        lambda r, dt: [r.standard_normal((4, 3, 5)).astype(dt),
                                       r.standard_normal((3,)).astype(dt),
                                       r.uniform(0.5, 2, (3,)).astype(dt)], grad=(0,),
                        ids="inference")),
    ("layer_norm", Case(lambda x, g, b: hl.layer_norm(x, (4, 5), g, b),
                        lambda r, dt: [r.standard_normal((3, 4, 5)).astype(dt),
                                       r.standard_normal((4, 5)).astype(dt),
                                       r.standard_normal((4, 5)).astype(dt)], grad=(0, 1, 2))),
    ("concat", Case(lambda a, b: hl.concat([a, b, a], 1), lambda r, dt: [
        r.standard_normal((2, 3)).astype(dt), r.standard_normal((2, 1)).astype(dt)],
        grad=(0, 1))),
    ("pad", Case(lambda x: hl.pad(x, (1, 2, 0, 1), value=0.5), normal(3, 4), grad=(0,))),
    ("pad", Case(lambda x: hl.pad(x, (2, 1, 1, 2), mode="reflect"), normal(4, 5), grad=(0,),
                 ids="reflect")),
    ("pad", Case(lambda x: hl.pad(x, (1, 0, -1, 2), mode="edge"), normal(4, 5), grad=(0,),
                 ids="edge-crop")),
    ("tile", Case(lambda x: hl.tile(x, (2, 3)), normal(2, 3), grad=(0,))),
    ("triangle", Case(lambda x: hl.tril(x, -1) + hl.triu(x.T, 1).T, normal(2, 4, 5),
                      grad=(0,))),
    ("cumsum", Case(lambda x: hl.cumsum(x, axis=1), normal(3, 4, 2), grad=(0,))),
    ("cumsum", Case(lambda x: hl.cumsum(x, axis=0), lambda r, dt: [r.integers(-5, 5, (6, 2))],
                    dtypes=(F64,), ids="int64")),
]
CASES += [
    ("gather_elements", Case(lambda x, i: hl.gather_elements(x.T, i, axis=1), lambda r, dt: [
        r.standard_normal((5, 3)).astype(dt), np.array([[0, 4, -1], [2, 2, -5]])],
        grad=(0,))),
    ("scatter_elements", Case(lambda x, i, u: hl.scatter_elements(x, i, u, axis=0),
                              lambda r, dt: [r.standard_normal((4, 3)).astype(dt),
                                             np.array([[1, 0, 3], [-1, 2, 0]]),
                                             r.standard_normal((2, 3)).astype(dt)],
                              grad=(0, 2))),
    ("scatter_elements", Case(lambda x, i, u: hl.scatter_elements(x, i, u, axis=1,
                                                                  reduction="add"),
                              lambda r, dt: [r.standard_normal((2, 4)).astype(dt),
                                             np.array([[1, 1, 3], [0, -1, 0]]),
                                             r.standard_normal((2, 3)).astype(dt)],
                              ids="add")),
    ("scatter_elements", Case(lambda x, i, u: hl.scatter_elements(x, i, u, axis=1,
                                                                  reduction="max"),
                              lambda r, dt: [r.integers(-9, 9, (2, 4)),
                                             np.array([[1, 1, 3], [0, -1, 0]]),
                                             r.integers(-9, 9, (2, 3))],
                              dtypes=(F64,), ids="max-int64")),
]
CASES += [
    ("topk", Case(lambda x: hl.topk(x, 3, axis=1), lambda r, dt: [
        np.array([[3, 1, np.nan, 3, -2], [0, -0.0, 5, 5, 1]], dtype=dt)])),
    ("topk", Case(lambda x: hl.topk(x, 2, axis=0, largest=False), normal(4, 3, 2), grad=(0,),
                  ids="smallest")),
    ("nonzero", Case(lambda x: hl.nonzero(x), lambda r, dt: [
        (r.integers(0, 3, (5, 4, 3)) * r.standard_normal((5, 4, 3))).astype(dt)])),
    ("nonzero", Case(lambda x: hl.nonzero(x > 0.5), normal(5000, 3), ids="chunks")),
]
CASES += [
    ("resize", Case(lambda x: hl.interpolate(x, scale_factor=2), normal(1, 2, 3, 4),
                    grad=(0,))),
    ("resize", Case(lambda x: hl.interpolate(x, size=(5, 7), mode="bilinear"),
                    normal(2, 1, 3, 4), grad=(0,), ids="bilinear")),
    ("resize", Case(lambda x: hl.interpolate(x, size=(2, 6), mode="bilinear",
                                             align_corners=True), normal(1, 2, 4, 3),
                    grad=(0,), ids="align-corners")),
    ("resize", Case(lambda x: hl.interpolate((x > 0).astype(hl.uint8), scale_factor=3),
                    normal(1, 1, 2, 3), ids="nearest-uint8")),
]
# backward kernels are covered by the gradient checks of the cases above
GRADIENT_OPS = {"softmax_grad": "softmax", "log_softmax_grad": "log_softmax",
                "conv_grad_weight": "conv", "max_pool_grad": "max_pool",
                "avg_pool_grad": "avg_pool", "batch_norm_grad": "batch_norm",
                "layer_norm_grad": "layer_norm", "resize_grad": "resize",
                "softmax_cross_entropy_grad": "softmax_cross_entropy",
                "gather_grad": "gather"}
RANDOM_OPS = {"random_uniform", "random_normal", "random_bernoulli"}  # test_random_streams

# Ops the CUDA backend does not implement yet, each with a call that reaches it (an op added to
# ops.h goes here, with its call, until it has a CUDA kernel). conv_fused: the inference
# epilogue of ONNX's Conv + Add + activation; the CUDA conv kernel does not read it yet.
NOT_ON_CUDA = {
    "conv_fused": lambda x: hl.ops.conv_fused_forward(
        hl.zeros((1, 1, 3, 3), device=x.device), hl.zeros((1, 1, 1, 1), device=x.device),
        act="relu"),
    # conv_pack: the layouts of the CPU's packed convolution kernels (inference)
    "conv_pack": lambda x: hl.ops.conv_pack(hl.zeros((6, 1, 1, 1), device=x.device)),
}
# reached only through their forward op, which fails first on cuda
NOT_ON_CUDA_BACKWARD = set()
