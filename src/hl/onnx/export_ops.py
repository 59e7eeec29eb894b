"""The export table: one rule per hl.autograd Function class, writing that op as ONNX nodes.

A rule is ``rule(g, f, xs, ys)``: ``g`` the Builder of export.py (``g.op``, ``g.const``,
``g.ints``, ``g.reduce``, ``g.reshape``, ``g.opset``...), ``f`` the Function's arguments
(``f.axis``, ``f.eps``: what its __init__ stored, as it was before forward), ``xs`` the input
values and ``ys`` the output values (export.Val: ``.name``, ``.shape``, ``.dtype``, ``.sig``;
None for an omitted input). The rule must produce each ``ys[i].name``. Where hl's op and the
ONNX operator differ (dtypes, an axis None meaning "flattened", PyTorch rounding) the rule
writes the few extra nodes that make them agree.

To add an op: its Function class, a rule here (``@exports(Class)``), and its import handler
(hl/onnx/ops). tests/onnx/test_export.py fails for a Function class without a rule.
"""
import math

import numpy as np

from .. import dtypes as _dt
from ..autograd.conv import Conv, ConvTranspose
from ..autograd.creation import Triangle
from ..autograd.binary import (Add, Cast, Clip, Compare, Div, Fmod, Maximum, Minimum, Mod, Mul,
                               Pow, Sub, Where)
from ..autograd.elementwise import Unary
from ..autograd.index import Gather, GatherElements, ScatterElements, TopK
from ..autograd.linalg import Gemm, Linear, MatMul
from ..autograd.normalization import BatchNorm, GroupNorm, LayerNorm
from ..autograd.pool import AvgPool, MaxPool
from ..autograd.random import Dropout
from ..autograd.reduce import (CumSum, Extreme, LogSumExp, Mean, Prod, ShapeOnly, Sum, Var,
                               VectorNorm)
from ..autograd.resize import Resize
from ..autograd.shape import (BasicIndex, Concat, Expand, Flip, Pad, Permute, Rearrange, Split,
                              Tile)
from ..autograd.softmax import LogSoftmax, NLLLoss, Softmax, SoftmaxCrossEntropy
from ..ops._util import norm_axes, norm_axis
from ..ops.reduce import _scalar_axis


RULES = {}  # Function class -> rule

INT64_MAX = np.iinfo(np.int64).max
INT64_MIN = np.iinfo(np.int64).min


def exports(*classes):
    def register(rule):
        for c in classes:
            RULES[c] = rule
        return rule
    return register


def rule_for(cls):
    """The rule for a Function class (or the nearest base class that has one)."""
    for c in cls.__mro__:
        if c in RULES:
            return RULES[c]
    return None


def _float(g, x):
    """x's name, cast to float32 first when it is not floating (hl's float ops do that)."""
    return x.name if x.dtype.is_floating else g.cast(x.name, _dt.float32)


# ---- element-wise ------------------------------------------------------------------------

SAME_NAME = {"neg": "Neg", "abs": "Abs", "exp": "Exp", "log": "Log", "sqrt": "Sqrt",
             "reciprocal": "Reciprocal", "sin": "Sin", "cos": "Cos", "tan": "Tan",
             "asin": "Asin", "acos": "Acos", "atan": "Atan", "sinh": "Sinh", "cosh": "Cosh",
             "asinh": "Asinh", "acosh": "Acosh", "atanh": "Atanh", "tanh": "Tanh",
             "erf": "Erf", "sigmoid": "Sigmoid", "relu": "Relu", "softplus": "Softplus",
             "softsign": "Softsign", "sign": "Sign", "floor": "Floor", "ceil": "Ceil",
             "round": "Round"}
KEEP_INTEGERS = ("neg", "abs", "square", "sign")       # integer in, integer out
ROUNDING = ("floor", "ceil", "round", "trunc")          # integers pass through unchanged


@exports(Unary)
def unary(g, f, xs, ys):
    (x,), (y,) = xs, ys
    op = f.op
    src, dtype = x.name, x.dtype
    if not x.dtype.is_floating:
        if op in ROUNDING:
            y.dtype = x.dtype
            return g.op("Identity", [x.name], out=y.name)
        if op in KEEP_INTEGERS:
            y.dtype = x.dtype  # hl keeps the integer dtype (its shape inference says float32)
        else:
            src, dtype = g.cast(x.name, _dt.float32), _dt.float32
    one = (lambda: g.scalar(1.0, dtype))
    a, b = float(f.alpha), float(f.beta)
    if op in SAME_NAME:
        return g.op(SAME_NAME[op], [src], out=y.name)
    if op == "square":
        return g.op("Mul", [src, src], out=y.name)
    if op == "expm1":
        return g.op("Sub", [g.op("Exp", [src]), one()], out=y.name)
    if op == "log1p":
        return g.op("Log", [g.op("Add", [src, one()])], out=y.name)
    if op == "rsqrt":
        return g.op("Reciprocal", [g.op("Sqrt", [src])], out=y.name)
    if op == "trunc":  # no ONNX Trunc: ceil below zero, floor above
        neg = g.op("Less", [src, g.scalar(0.0, dtype)])
        return g.op("Where", [neg, g.op("Ceil", [src]), g.op("Floor", [src])], out=y.name)
    if op == "leaky_relu":
        return g.op("LeakyRelu", [src], out=y.name, alpha=a)
    if op == "elu":
        return g.op("Elu", [src], out=y.name, alpha=a)
    if op == "celu":
        return g.op("Celu", [src], out=y.name, alpha=a)
    if op == "selu":
        return g.op("Selu", [src], out=y.name, alpha=a, gamma=b)
    if op == "hard_sigmoid":
        return g.op("HardSigmoid", [src], out=y.name, alpha=a, beta=b)
    if op == "hard_swish":
        if g.opset >= 14:
            return g.op("HardSwish", [src], out=y.name)
        hs = g.op("HardSigmoid", [src], alpha=1.0 / 6.0, beta=0.5)
        return g.op("Mul", [src, hs], out=y.name)
    if op == "mish":
        if g.opset >= 18:
            return g.op("Mish", [src], out=y.name)
        return g.op("Mul", [src, g.op("Tanh", [g.op("Softplus", [src])])], out=y.name)
    if op in ("gelu", "gelu_tanh"):
        tanh = op == "gelu_tanh"
        if g.opset >= 20:
            return g.op("Gelu", [src], out=y.name, approximate="tanh" if tanh else "none")
        half_x = g.op("Mul", [src, g.scalar(0.5, dtype)])
        if tanh:  # 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))
            cube = g.op("Mul", [g.op("Mul", [src, src]), src])
            inner = g.op("Add", [src, g.op("Mul", [cube, g.scalar(0.044715, dtype)])])
            t = g.op("Tanh", [g.op("Mul", [inner, g.scalar(math.sqrt(2 / math.pi), dtype)])])
        else:  # 0.5 x (1 + erf(x / sqrt(2)))
            t = g.op("Erf", [g.op("Mul", [src, g.scalar(1 / math.sqrt(2), dtype)])])
        return g.op("Mul", [half_x, g.op("Add", [t, one()])], out=y.name)
    raise g.error(f"unary op {op!r} has no ONNX form in hl's exporter")


BINARY = {Add: "Add", Sub: "Sub", Mul: "Mul", Div: "Div", Pow: "Pow", Maximum: "Max",
          Minimum: "Min"}


@exports(*BINARY)
def binary(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op(BINARY[type(f._fn)], [a.name, b.name], out=y.name)


@exports(Mod)
def mod(g, f, xs, ys):
    """numpy's mod: the sign of the divisor. ONNX Mod does that for integers; for floats only
    C's fmod exists, so the result is moved by b where its sign differs from b's."""
    (a, b), (y,) = xs, ys
    if not a.dtype.is_floating:
        return g.op("Mod", [a.name, b.name], out=y.name, fmod=0)
    r = g.op("Mod", [a.name, b.name], fmod=1)
    zero = g.scalar(0.0, a.dtype)
    nonzero = g.op("Not", [g.op("Equal", [r, zero])])
    differ = g.op("Xor", [g.op("Less", [r, zero]), g.op("Less", [b.name, zero])])
    fix = g.op("And", [nonzero, differ])
    g.op("Where", [fix, g.op("Add", [r, b.name]), r], out=y.name)


@exports(Fmod)
def fmod(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op("Mod", [a.name, b.name], out=y.name, fmod=1)


COMPARE = {"eq": "Equal", "lt": "Less", "le": "LessOrEqual", "gt": "Greater",
           "ge": "GreaterOrEqual", "logical_and": "And", "logical_or": "Or",
           "logical_xor": "Xor"}


@exports(Compare)
def compare(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    op = f.op
    names = [a.name, b.name]
    if op.startswith("logical_"):  # ONNX's logic takes bools; hl's, any nonzero value
        names = [v.name if v.dtype is _dt.bool_ else g.cast(v.name, _dt.bool_) for v in xs]
    if op == "ne":
        return g.op("Not", [g.op("Equal", names)], out=y.name)
    g.op(COMPARE[op], names, out=y.name)


@exports(Where)
def where(g, f, xs, ys):
    (c, a, b), (y,) = xs, ys
    cond = c.name if c.dtype is _dt.bool_ else g.cast(c.name, _dt.bool_)
    g.op("Where", [cond, a.name, b.name], out=y.name)


@exports(Clip)
def clip(g, f, xs, ys):
    (x,), (y,) = xs, ys
    if f.lo is None and f.hi is None:
        return g.op("Identity", [x.name], out=y.name)
    bound = (lambda v: None if v is None else g.scalar(v, x.dtype))
    g.op("Clip", [x.name, bound(f.lo), bound(f.hi)], out=y.name)


@exports(Cast)
def cast(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.cast(x.name, f.dtype, out=y.name)


# ---- linear algebra ----------------------------------------------------------------------

@exports(MatMul)
def matmul(g, f, xs, ys):
    (a, b), (y,) = xs, ys
    g.op("MatMul", [a.name, b.name], out=y.name)


@exports(Gemm)
def gemm(g, f, xs, ys):
    a, b = xs[:2]
    c = xs[2] if len(xs) > 2 else None
    g.op("Gemm", [a.name, b.name] + ([c.name] if c is not None else []), out=ys[0].name,
         alpha=float(f.alpha), beta=float(f.beta), transA=int(f.ta), transB=int(f.tb))


@exports(Linear)
def linear(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    y = ys[0]
    if x.ndim == 2 and (b is None or b.ndim <= 1):
        return g.op("Gemm", [x.name, w.name] + ([b.name] if b is not None else []),
                    out=y.name, transB=1)
    wt = g.op("Transpose", [w.name], perm=[1, 0])
    if b is None:
        return g.op("MatMul", [x.name, wt], out=y.name)
    g.op("Add", [g.op("MatMul", [x.name, wt]), b.name], out=y.name)


# ---- convolution and pooling -------------------------------------------------------------

def _spatial_dynamic(x):
    return any(x.dynamic(d) for d in range(2, x.ndim))


@exports(Conv)
def conv(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    kw = dict(kernel_shape=list(w.shape[2:]), strides=list(f.stride),
              dilations=list(f.dilation), group=int(f.groups))
    if isinstance(f.padding, str) and _spatial_dynamic(x):
        # 'same' pads depend on the input size: ONNX's auto_pad recomputes them per run
        if f.padding.lower() == "same":
            kw["auto_pad"] = "SAME_UPPER"  # hl's 'same' puts an odd extra pad at the end
        else:
            kw["pads"] = [0] * (2 * f.n)
    else:
        kw["pads"] = [int(p) for p in f._pads(x, w)]
    g.op("Conv", [x.name, w.name] + ([b.name] if b is not None else []), out=ys[0].name, **kw)


@exports(ConvTranspose)
def conv_transpose(g, f, xs, ys):
    x, w = xs[:2]
    b = xs[2] if len(xs) > 2 else None
    g.op("ConvTranspose", [x.name, w.name] + ([b.name] if b is not None else []),
         out=ys[0].name, kernel_shape=list(w.shape[2:]), strides=list(f.stride),
         pads=[int(p) for p in f.pads], dilations=list(f.dilation), group=int(f.groups),
         output_padding=list(f.output_padding))


def _whole_plane(g, f, x):
    """Is this pool one window over each whole plane (hl's global pools)? Then it is written
    as ONNX's Global*Pool, which also follows spatial sizes that change."""
    n = f.n
    whole = (list(f.kernel) == list(x.shape[2:]) and not any(f.pads) and
             all(d == 1 for d in f.dilation))
    if g.varies("kernel", "stride") and not whole:
        raise g.error("its window changes with the dynamic axes but is not the whole plane")
    return whole and n >= 1


@exports(MaxPool)
def max_pool(g, f, xs, ys):
    (x,), y = xs, ys[0]
    if _whole_plane(g, f, x):
        return g.op("GlobalMaxPool", [x.name], out=y.name)
    g.op("MaxPool", [x.name], out=y.name, kernel_shape=list(f.kernel), strides=list(f.stride),
         pads=[int(p) for p in f.pads], dilations=list(f.dilation), ceil_mode=int(f.ceil_mode))


@exports(AvgPool)
def avg_pool(g, f, xs, ys):
    (x,), y = xs, ys[0]
    if _whole_plane(g, f, x):
        return g.op("GlobalAveragePool", [x.name], out=y.name)
    g.op("AveragePool", [x.name], out=y.name, kernel_shape=list(f.kernel),
         strides=list(f.stride), pads=[int(p) for p in f.pads], ceil_mode=int(f.ceil_mode),
         count_include_pad=int(f.count_include_pad))


# ---- normalisation -----------------------------------------------------------------------

def _param_or(g, p, value, shape, dtype):
    """An affine parameter's name, or a constant of ``value`` where the op had none."""
    if p is not None:
        return p.name
    return g.const(np.full(shape, value, dtype=_dt.dtype(dtype).np))


def _normalize(g, x, axes, eps, dtype):
    """(x - mean) / sqrt(var + eps) over ``axes`` (biased variance), from basic ops."""
    mean = g.reduce("ReduceMean", x, axes, True)
    d = g.op("Sub", [x, mean])
    var = g.reduce("ReduceMean", g.op("Mul", [d, d]), axes, True)
    std = g.op("Sqrt", [g.op("Add", [var, g.scalar(eps, dtype)])])
    return g.op("Div", [d, std])


@exports(BatchNorm)
def batch_norm(g, f, xs, ys):
    """Inference batch norm on the running statistics, whatever mode the op ran in (ONNX
    models are deployed for inference; the running statistics are initializers)."""
    x = xs[0]
    weight = xs[1] if len(xs) > 1 else None
    bias = xs[2] if len(xs) > 2 else None
    y = ys[0]
    c = x.shape[1]
    scale = _param_or(g, weight, 1.0, (c,), x.dtype)
    shift = _param_or(g, bias, 0.0, (c,), x.dtype)
    if f.running_mean is None or f.running_var is None:
        if not f.training:
            raise g.error("batch_norm in inference mode without running statistics")
        # No statistics to freeze: normalise with the batch's own, as the op did.
        axes = [0] + list(range(2, x.ndim))
        n = _normalize(g, x.name, axes, float(f.eps), x.dtype)
        shape = [1, c] + [1] * (x.ndim - 2)
        sc = g.op("Reshape", [scale, g.ints(shape)])
        sh = g.op("Reshape", [shift, g.ints(shape)])
        return g.op("Add", [g.op("Mul", [n, sc]), sh], out=y.name)
    mean, var = g.leaf(f.running_mean).name, g.leaf(f.running_var).name
    g.op("BatchNormalization", [x.name, scale, shift, mean, var], out=y.name,
         epsilon=float(f.eps), momentum=1.0 - float(f.momentum))


@exports(LayerNorm)
def layer_norm(g, f, xs, ys):
    x = xs[0]
    weight = xs[1] if len(xs) > 1 else None
    bias = xs[2] if len(xs) > 2 else None
    y = ys[0]
    axis = f._axis(x)
    tail = x.sig[axis:]
    if g.opset >= 17 and (weight is not None or all(isinstance(s, int) for s in tail)):
        scale = _param_or(g, weight, 1.0, x.shape[axis:], x.dtype)
        ins = [x.name, scale] + ([bias.name] if bias is not None else [])
        return g.op("LayerNormalization", ins, out=y.name, axis=int(axis),
                    epsilon=float(f.eps))
    n = _normalize(g, x.name, list(range(axis, x.ndim)), float(f.eps), x.dtype)
    if weight is not None:
        n = g.op("Mul", [n, weight.name])
    if bias is not None:
        n = g.op("Add", [n, bias.name])
    g.op("Identity", [n], out=y.name)


@exports(GroupNorm)
def group_norm(g, f, xs, ys):
    x = xs[0]
    weight = xs[1] if len(xs) > 1 else None
    bias = xs[2] if len(xs) > 2 else None
    y = ys[0]
    c = x.shape[1]
    if f.op == "instance_norm":
        scale = _param_or(g, weight, 1.0, (c,), x.dtype)
        shift = _param_or(g, bias, 0.0, (c,), x.dtype)
        return g.op("InstanceNormalization", [x.name, scale, shift], out=y.name,
                    epsilon=float(f.eps))
    # (N, C, ...) as (N, G, rest), normalised over rest, back to x's shape, then the
    # per-channel affine (ONNX's GroupNormalization differs between opsets 18 and 21).
    rows = g.op("Reshape", [x.name, g.ints([0, int(f.groups), -1])])
    n = _normalize(g, rows, [2], float(f.eps), x.dtype)
    n = g.op("Reshape", [n, g.op("Shape", [x.name])])
    shape = g.ints([1, c] + [1] * (x.ndim - 2))
    if weight is not None:
        n = g.op("Mul", [n, g.op("Reshape", [weight.name, shape])])
    if bias is not None:
        n = g.op("Add", [n, g.op("Reshape", [bias.name, shape])])
    g.op("Identity", [n], out=y.name)


# ---- softmax and losses ------------------------------------------------------------------

@exports(Softmax, LogSoftmax)
def softmax(g, f, xs, ys):
    (x,), (y,) = xs, ys
    op = "LogSoftmax" if isinstance(f._fn, LogSoftmax) else "Softmax"
    g.op(op, [_float(g, x)], out=y.name, axis=int(f.axis))


def _batched(g, scores, target):
    """One sample (C,) with its label () as a batch of one, for ONNX's losses."""
    if scores.ndim == 1:
        return g.unsqueeze(scores.name, [0]), g.unsqueeze(target.name, [0]), True
    return scores.name, target.name, False


def _loss_out(g, loss, single, reduction, y):
    if single and reduction == "none":
        return g.squeeze(loss, [0], out=y.name)
    return g.op("Identity", [loss], out=y.name)


@exports(SoftmaxCrossEntropy)
def softmax_cross_entropy(g, f, xs, ys):
    (x, t), (y,) = xs, ys
    if t.dtype.is_integer:
        scores, labels, single = _batched(g, x, t)
        loss = g.op("SoftmaxCrossEntropyLoss", [scores, labels], reduction=f.reduction,
                    ignore_index=int(f.ignore_index))
        return _loss_out(g, loss, single, f.reduction, y)
    # probability targets: -sum(t * log_softmax(x)) over the class axis
    axis = 0 if x.ndim == 1 else 1
    lp = g.op("LogSoftmax", [x.name], axis=axis)
    per = g.op("Neg", [g.reduce("ReduceSum", g.op("Mul", [t.name, lp]), [axis], False)])
    if f.reduction == "none":
        return g.op("Identity", [per], out=y.name)
    g.reduce("ReduceMean" if f.reduction == "mean" else "ReduceSum", per, None, False,
             out=y.name)


@exports(NLLLoss)
def nll_loss(g, f, xs, ys):
    (x, t), (y,) = xs, ys
    scores, labels, single = _batched(g, x, t)
    loss = g.op("NegativeLogLikelihoodLoss", [scores, labels], reduction=f.reduction,
                ignore_index=int(f.ignore_index))
    _loss_out(g, loss, single, f.reduction, y)


@exports(Dropout)
def dropout(g, f, xs, ys):
    """ONNX's Dropout in inference (training_mode false): the input itself. hl records
    dropout only while training; the exported model is for inference."""
    (x,), (y,) = xs, ys
    g.op("Dropout", [x.name, g.scalar(float(f.p), x.dtype if x.dtype.is_floating
                                      else _dt.float32)], out=y.name)


# ---- reductions --------------------------------------------------------------------------

def _axes(f, x):
    return list(norm_axes(_scalar_axis(x, f.axis), x.ndim, f.op))


@exports(Sum, Prod)
def sum_prod(g, f, xs, ys):
    (x,), (y,) = xs, ys
    src = x.name if x.dtype.is_floating or x.dtype is _dt.int64 else g.cast(x.name, _dt.int64)
    g.reduce("ReduceSum" if isinstance(f._fn, Sum) else "ReduceProd", src, _axes(f, x),
             f.keepdims, out=y.name)


@exports(Mean)
def mean(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.reduce("ReduceMean", _float(g, x), _axes(f, x), f.keepdims, out=y.name)


@exports(Extreme)
def extreme(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.reduce("ReduceMax" if f.op == "max" else "ReduceMin", x.name, _axes(f, x), f.keepdims,
             out=y.name)


@exports(LogSumExp)
def logsumexp(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.reduce("ReduceLogSumExp", _float(g, x), _axes(f, x), f.keepdims, out=y.name)


@exports(VectorNorm)
def vector_norm(g, f, xs, ys):
    (x,), (y,) = xs, ys
    axes, keep, p = _axes(f, x), f.keepdims, f.ord
    src = _float(g, x)
    if p == 2:
        return g.reduce("ReduceL2", src, axes, keep, out=y.name)
    if p == 1:
        return g.reduce("ReduceL1", src, axes, keep, out=y.name)
    if p in (math.inf, -math.inf):
        return g.reduce("ReduceMax" if p > 0 else "ReduceMin", g.op("Abs", [src]), axes, keep,
                        out=y.name)
    dtype = x.dtype if x.dtype.is_floating else _dt.float32
    if p == 0:  # how many are not zero
        nz = g.cast(g.op("Not", [g.op("Equal", [src, g.scalar(0.0, dtype)])]), dtype)
        return g.reduce("ReduceSum", nz, axes, keep, out=y.name)
    powered = g.op("Pow", [g.op("Abs", [src]), g.scalar(float(p), dtype)])
    total = g.reduce("ReduceSum", powered, axes, keep)
    g.op("Pow", [total, g.scalar(1.0 / float(p), dtype)], out=y.name)


@exports(Var)
def var(g, f, xs, ys):
    """sum((x - mean)^2) / (n - ddof), n the number of elements reduced (read from the shape
    when a reduced axis is dynamic); std its square root."""
    (x,), (y,) = xs, ys
    axes = _axes(f, x)
    src = _float(g, x)
    dtype = x.dtype if x.dtype.is_floating else _dt.float32
    d = g.op("Sub", [src, g.reduce("ReduceMean", src, axes, True)])
    ss = g.reduce("ReduceSum", g.op("Mul", [d, d]), axes, f.keepdims)
    if all(not x.dynamic(a) for a in axes):
        n = 1
        for a in axes:
            n *= x.shape[a]
        denom = g.scalar(float(max(n - f.ddof, 0)), dtype)
    else:
        sizes = g.op("Gather", [g.op("Shape", [x.name]), g.ints(axes)], axis=0)
        n = g.cast(g.reduce("ReduceProd", sizes, [0], False), dtype)
        denom = g.op("Max", [g.op("Sub", [n, g.scalar(float(f.ddof), dtype)]),
                             g.scalar(0.0, dtype)])
    v = g.op("Div", [ss, denom])
    if f.std:
        return g.op("Sqrt", [v], out=y.name)
    g.op("Identity", [v], out=y.name)


@exports(ShapeOnly)
def shape_only(g, f, xs, ys):
    """argmax, argmin, any, all, count_nonzero."""
    (x,), (y,) = xs, ys
    op = f.op
    if op in ("argmax", "argmin"):
        onnx_op = "ArgMax" if op == "argmax" else "ArgMin"
        axis = _scalar_axis(x, f.axis)
        if axis is None:  # over the flattened tensor
            flat = g.op("Reshape", [x.name, g.ints([-1])])
            r = g.op(onnx_op, [flat], axis=0, keepdims=0)
            if f.keepdims:
                return g.op("Reshape", [r, g.ints([1] * x.ndim)], out=y.name)
            return g.op("Identity", [r], out=y.name)
        return g.op(onnx_op, [x.name], out=y.name, axis=norm_axis(axis, x.ndim, op),
                    keepdims=int(f.keepdims))
    truth = x.name if x.dtype is _dt.bool_ else g.cast(x.name, _dt.bool_)
    axes = _axes(f, x)
    if op == "count_nonzero":
        return g.reduce("ReduceSum", g.cast(truth, _dt.int64), axes, f.keepdims, out=y.name)
    # any / all: ONNX reduces no bools, so through int32
    r = g.reduce("ReduceMax" if op == "any" else "ReduceMin", g.cast(truth, _dt.int32), axes,
                 f.keepdims)
    g.cast(r, _dt.bool_, out=y.name)


@exports(CumSum)
def cumsum(g, f, xs, ys):
    (x,), (y,) = xs, ys
    src = x.name if x.dtype.is_floating or x.dtype is _dt.int64 else g.cast(x.name, _dt.int64)
    axis = _scalar_axis(x, f.axis)
    if axis is None:  # over the flattened tensor
        src, axis = g.op("Reshape", [src, g.ints([-1])]), 0
    else:
        axis = norm_axis(axis, x.ndim, "cumsum")
    g.op("CumSum", [src, g.const(np.asarray(axis, dtype=np.int64))], out=y.name,
         exclusive=int(f.exclusive), reverse=int(f.reverse))


# ---- shapes ------------------------------------------------------------------------------

@exports(Rearrange)
def rearrange(g, f, xs, ys):
    """reshape, view, flatten, squeeze, unsqueeze: the elements stay in order."""
    (x,), (y,) = xs, ys
    g.varies("args")  # sizes that follow the dynamic axes are taken care of below
    kind = f.op.__name__
    if kind == "squeeze" and y.ndim < x.ndim:
        removed = _squeezed(x, y)
        if removed is not None:
            return g.squeeze(x.name, removed, out=y.name)
    if kind == "unsqueeze" and y.ndim == x.ndim + 1:
        axis = norm_axis(f.args[0], y.ndim, "unsqueeze")
        return g.unsqueeze(x.name, [axis], out=y.name)
    if kind == "flatten" and x.ndim >= 2 and y.ndim == 2 and y.sig[0] == x.sig[0]:
        return g.op("Flatten", [x.name], out=y.name, axis=1)
    if x.sig == y.sig:
        return g.op("Identity", [x.name], out=y.name)
    g.reshape(x, y, out=y.name)


def _squeezed(x, y):
    """The axes of x that squeeze removed to give y (None when it is no plain squeeze)."""
    removed, j = [], 0
    for i, s in enumerate(x.sig):
        if j < y.ndim and y.sig[j] == s:
            j += 1
        elif s == 1:
            removed.append(i)
        else:
            return None
    return removed if j == y.ndim else None


@exports(Permute)
def permute(g, f, xs, ys):
    (x,), (y,) = xs, ys
    n = x.ndim
    g.op("Transpose", [x.name], out=y.name, perm=[int(a) % n for a in f.axes])


@exports(Expand)
def expand(g, f, xs, ys):
    """ONNX's Expand broadcasts both ways, so an axis x keeps is written as 1; an axis that
    grows to a dynamic size takes it from Shape of a value that has it."""
    (x,), (y,) = xs, ys
    g.varies("shape")
    lead = y.ndim - x.ndim
    sig = []
    for j, s in enumerate(y.sig):
        i = j - lead
        sig.append(1 if i >= 0 and x.sig[i] == s else s)
    g.op("Expand", [x.name, g.shape_tensor(sig)], out=y.name)


@exports(Flip)
def flip(g, f, xs, ys):
    (x,), (y,) = xs, ys
    axes = list(norm_axes(f.axis, x.ndim, "flip"))
    if not axes:
        return g.op("Identity", [x.name], out=y.name)
    k = len(axes)
    g.op("Slice", [x.name, g.ints([-1] * k), g.ints([INT64_MIN] * k), g.ints(axes),
                   g.ints([-1] * k)], out=y.name)


@exports(BasicIndex)
def basic_index(g, f, xs, ys):
    """x[key] for ints, slices, None and ...: one Slice for the slices, a Gather per int
    (which drops its axis and takes negative indices), an Unsqueeze for the Nones."""
    (x,), (y,) = xs, ys
    key = f.key if isinstance(f.key, tuple) else (f.key,)
    used = sum(1 for k in key if k is not None and k is not Ellipsis)
    parts = []
    for k in key:
        if k is Ellipsis:
            parts.extend([slice(None)] * (x.ndim - used))
        else:
            parts.append(k)
    if Ellipsis not in key:
        parts.extend([slice(None)] * (x.ndim - used))
    starts, ends, axes, steps = [], [], [], []
    ints = []          # (axis of x, index)
    news = []          # positions of the Nones in the result
    axis, out_pos = 0, 0
    for k in parts:
        if k is None:
            news.append(out_pos)
            out_pos += 1
            continue
        if isinstance(k, slice):
            step = 1 if k.step is None else int(k.step)
            if (k.start, k.stop, step) != (None, None, 1):
                starts.append((0 if step > 0 else INT64_MAX) if k.start is None
                              else int(k.start))
                ends.append((INT64_MAX if step > 0 else INT64_MIN) if k.stop is None
                            else int(k.stop))
                axes.append(axis)
                steps.append(step)
            out_pos += 1
        else:
            ints.append((axis, int(k)))
        axis += 1
    steps_todo = []  # (op, extra inputs, attributes), the last one writing y
    if axes:
        steps_todo.append(("Slice", [g.ints(starts), g.ints(ends), g.ints(axes), g.ints(steps)],
                           {}))
    for a, i in reversed(ints):  # from the last axis, so earlier axis numbers still hold
        steps_todo.append(("Gather", [g.const(np.asarray(i, dtype=np.int64))], {"axis": a}))
    if news:
        steps_todo.append(("Unsqueeze", [g.ints(news)], {}))
    if not steps_todo:
        steps_todo.append(("Identity", [], {}))
    cur = x.name
    for k, (op, extra, attrs) in enumerate(steps_todo):
        last = k == len(steps_todo) - 1
        cur = g.op(op, [cur] + extra, out=y.name if last else None, **attrs)


@exports(Split)
def split(g, f, xs, ys):
    """Split along an axis; where that axis is dynamic the parts must be equal and ONNX splits
    it evenly by itself (no sizes written)."""
    (x,) = xs
    g.varies("parts")
    axis = norm_axis(f.axis, max(x.ndim, 1), "split")
    sizes = [v.shape[axis] for v in ys]
    outs = [v.name for v in ys]
    if x.dynamic(axis):
        if len({v.sig[axis] for v in ys}) != 1:
            raise g.error(f"splitting dynamic axis {axis} into unequal parts {sizes}")
        if g.opset >= 18:
            return g.node("Split", [x.name], out=outs, axis=axis, num_outputs=len(ys))
        return g.node("Split", [x.name], out=outs, axis=axis)
    g.node("Split", [x.name, g.ints(sizes)], out=outs, axis=axis)


@exports(Concat)
def concat(g, f, xs, ys):
    axis = norm_axis(f.axis, xs[0].ndim, "concat")
    g.op("Concat", [v.name for v in xs], out=ys[0].name, axis=axis)


@exports(Pad)
def pad(g, f, xs, ys):
    (x,), (y,) = xs, ys
    mode = {"replicate": "edge"}.get(f.mode, f.mode)
    ins = [x.name, g.ints(f.flat)]
    if mode == "constant":
        ins.append(g.scalar(f.value, x.dtype))
    g.op("Pad", ins, out=y.name, mode=mode)


@exports(Tile)
def tile(g, f, xs, ys):
    (x,), (y,) = xs, ys
    g.op("Tile", [x.name, g.ints(f.repeats)], out=y.name)


@exports(Triangle)
def triangle(g, f, xs, ys):
    (x,), (y,) = xs, ys
    if g.opset >= 14:
        return g.op("Trilu", [x.name, g.const(np.asarray(f.k, dtype=np.int64))], out=y.name,
                    upper=int(f.upper))
    if x.dynamic(x.ndim - 1) or x.dynamic(x.ndim - 2):
        raise g.error("tril/triu of dynamic rows or columns needs Trilu (opset 14 or later)")
    r, c = x.shape[-2:]
    keep = (np.triu if f.upper else np.tril)(np.ones((r, c), dtype=bool), f.k)
    g.op("Where", [g.const(keep), x.name, g.scalar(0, x.dtype)], out=y.name)


# ---- indexing ----------------------------------------------------------------------------

@exports(Gather)
def gather(g, f, xs, ys):
    (x, i), (y,) = xs, ys
    g.op("Gather", [x.name, i.name], out=y.name, axis=norm_axis(f.axis, x.ndim, "gather"))


@exports(GatherElements)
def gather_elements(g, f, xs, ys):
    (x, i), (y,) = xs, ys
    g.op("GatherElements", [x.name, i.name], out=y.name,
         axis=norm_axis(f.axis, x.ndim, "gather_elements"))


@exports(ScatterElements)
def scatter_elements(g, f, xs, ys):
    (x, i, u), (y,) = xs, ys
    reduction = {"sum": "add", None: "none"}.get(f.reduction, f.reduction)
    need = {"none": 11, "add": 16, "mul": 16, "max": 18, "min": 18}.get(reduction)
    if need is None:
        raise g.error(f"scatter reduction {f.reduction!r} has no ONNX form")
    if g.opset < need:
        raise g.error(f"ScatterElements with reduction {reduction!r} needs opset {need} or "
                      f"later (exporting opset {g.opset})")
    g.op("ScatterElements", [x.name, i.name, u.name], out=y.name,
         axis=norm_axis(f.axis, x.ndim, "scatter_elements"),
         reduction=None if reduction == "none" else reduction)


@exports(TopK)
def topk(g, f, xs, ys):
    (x,) = xs
    g.node("TopK", [x.name, g.ints([f.k])], out=[v.name for v in ys],
           axis=norm_axis(f.axis, x.ndim, "topk"), largest=int(bool(f.largest)),
           sorted=int(bool(f.sorted)))


@exports(Resize)
def resize(g, f, xs, ys):
    """ONNX Resize with hl's scales, or its sizes (only the resized axes from opset 18, so a
    dynamic batch axis stays dynamic; before that, the sizes of dynamic axes read from
    Shape)."""
    (x,), (y,) = xs, ys
    kw = dict(mode=f.kw["mode"], coordinate_transformation_mode=f.kw[
        "coordinate_transformation_mode"], nearest_mode=f.kw["nearest_mode"])
    if kw["mode"] != "nearest":
        kw.pop("nearest_mode")
    if f.scales is not None:
        scales = g.const(np.asarray(f.scales, dtype=np.float32))
        return g.op("Resize", [x.name, "", scales], out=y.name, **kw)
    g.varies("size")
    changed = [a for a in range(x.ndim) if x.sig[a] != y.sig[a]]
    if g.opset >= 18 and changed and all(not y.dynamic(a) for a in changed):
        sizes = g.ints([y.shape[a] for a in changed])
        return g.op("Resize", [x.name, "", "", sizes], out=y.name, axes=changed, **kw)
    sizes = g.shape_tensor(y.sig, [x])
    g.op("Resize", [x.name, "", "", sizes], out=y.name, **kw)


__all__ = ["RULES", "exports", "rule_for"]
