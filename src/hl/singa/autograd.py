"""SINGA's autograd module over hl.autograd.

SINGA's functions (``relu``, ``matmul``, ``softmax_cross_entropy``, ``reshape`` ...) and its
Operator classes (``ReLU()(x)[0]``, ``Gemm(alpha, beta, transA, transB)(a, b, c)[0]`` ...)
each call one hl autograd function, with SINGA's argument conventions adapted here; the
results are hl.singa Tensors whose ``creator`` is hl's own record, whose ``backward`` takes and
gives raw tensors as SINGA's does. ``backward(loss)`` is hl's engine (yielding (param, grad)
pairs), ``gradients(loss)`` the dict SINGA builds from it.

``training`` is hl's global flag (hl.autograd.training): the default mode of layers never put
in train()/eval() explicitly. It starts True in hl (False in SINGA, whose Model.compile and
train() set it); ops record whenever grad mode is on and an input requires a gradient, as in
all of hl (see docs/singa.md).
"""
import builtins
import sys
import types

import numpy as np

from .. import autograd as _hl_autograd
from .. import errors, losses as _losses
from .._tensor import Tensor as _HLTensor, as_tensor
from ..autograd import functional as F
from ..autograd.elementwise import Compare as _Compare
from . import tensor as _tensor
from .tensor import Tensor, _py

CTensor = _tensor.CTensor


# ---- the engine ------------------------------------------------------------------------------

def backward(y, dy=None):
    """Yields (tensor, gradient) for each tensor with stores_grad (the parameters) that y
    depends on, as soon as the gradient is complete. dy: None (1), a number or a Tensor."""
    if y.size != 1:
        raise errors.ValueError(f"autograd.backward: y must hold a single value, it has shape "
                                f"{tuple(y.shape)}")
    if dy is not None and not isinstance(dy, _HLTensor):
        dy = _HLTensor(np.full(tuple(y.shape), float(dy), np.float32)).astype(y.dtype)
    # SINGA keeps the records after backward (its to_onnx([x], [y]) works after a training
    # step); they go when y and its graph are dropped
    for p, g in _hl_autograd.backward(y, dy, retain_graph=True):
        yield p, _tensor.from_raw_tensor(g) if g.__class__ is not Tensor else g


def gradients(y, dy=None):
    """{id(param): grad} for every tensor with stores_grad that y depends on (SINGA's helper)."""
    return {id(p): g for p, g in backward(y, dy)}


def infer_dependency(op):
    """For the op that made a tensor (``y.creator``): a Counter of how many later ops use each
    earlier op's outputs, and one of how many use each leaf tensor (by id), as SINGA's."""
    from collections import Counter
    op_count, tensor_count = Counter(), Counter()
    stack = [op]
    while stack:
        fn = stack.pop()
        for edge in fn.src or ():
            if edge is None:
                continue
            parent, x = edge
            if parent is None:
                tensor_count[id(x)] += 1
                continue
            if parent not in op_count:
                stack.append(parent)
            op_count[parent] += 1
    return op_count, tensor_count


class Operator(_hl_autograd.Function):
    """SINGA's base for a new op: subclass it with ``forward(*xs)`` and ``backward(*dys)``
    (computed with hl ops on the tensors given; backward returns one gradient per input).
    Calling an instance returns a tuple of its outputs, as SINGA's ``Op()(x)[0]`` expects."""

    def __call__(self, *xs):
        ys = super().__call__(*xs)
        return tuple(_py(y) for y in ys) if isinstance(ys, tuple) else (_py(ys),)


# ---- functions -------------------------------------------------------------------------------

def _as(x, like=None):
    if isinstance(x, _HLTensor) or x is None:
        return x
    return _tensor.from_numpy(np.asarray(x, np.float32) if like is None or
                              like.dtype.is_floating else np.asarray(x), None)


def _float(t, like):
    """A comparison's bool result as a float tensor (SINGA's comparisons give 0/1 floats)."""
    return t.astype(like.dtype if like.dtype.is_floating else _tensor.float32)


def relu(x):
    return _py(F.relu(x))


def identity(x):
    return _py(F.reshape(x, *x.shape))


def matmul(x, w):
    return _py(F.matmul(x, w))


def _compare(op, a, b):
    """A comparison or logical op, recorded when an input requires a gradient (hl records only
    differentiable ops; SINGA records every op, and its to_onnx([x], [y]) exports them): the
    record passes no gradient back. The 0/1 result has a's float dtype, as SINGA's."""
    a, b = _as(a), _as(b, a)
    if _hl_autograd.is_grad_enabled() and (a.requires_grad or b.requires_grad):
        fn = _Compare(op)
        fn.differentiable = True
        fn.backward = _no_gradient
        return _py(_float(fn(a, b), a))
    return _py(_float(getattr(F, op)(a, b), a))


def _no_gradient(*dys):
    return (None, None)


def less(x, y):
    return _compare("lt", x, y)


def greater(x, y):
    return _compare("gt", x, y)


def equal(x, y):
    return _compare("eq", x, y)


def clip(x, min=None, max=None):  # noqa: A002 - SINGA's names
    return _py(F.clip(x, min, max))


def add_bias(x, b, axis=0):
    """axis 0: b added to every row; axis 1: to every column."""
    return _py(F.add(x, b if axis == 0 else F.reshape(b, -1, 1)))


def reshape(x, shape):
    """ONNX's Reshape: a 0 copies the input's size on that axis, one -1 is inferred."""
    shape = [int(s) for s in shape]
    shape = [x.shape[i] if s == 0 and i < x.ndim else s for i, s in enumerate(shape)]
    return _py(F.reshape(x, *shape))


def prelu(x, slope):
    return _py(F.where(F.lt(x, 0.0), F.mul(x, slope), x))


def add(a, b):
    return _py(F.add(a, b))


def sub(a, b):
    return _py(F.sub(a, b))


def mul(x, y):
    return _py(F.mul(x, y))


def div(a, b):
    return _py(F.true_divide(a, b))


def pow(a, b):  # noqa: A001
    return _py(F.pow(a, b))


def elu(x, alpha=1.0):
    return _py(F.elu(x, alpha))


def selu(x, alpha=1.67326, gamma=1.0507):
    return _py(F.selu(x, alpha, gamma))


def softmax(x, axis=1):
    return _py(F.softmax(x, axis))


def sum(*l):  # noqa: A001 - element-wise sum of the inputs, as SINGA's
    out = l[0]
    for t in l[1:]:
        out = F.add(out, t)
    return _py(out if len(l) > 1 else F.reshape(out, *out.shape))


def add_all(*xs):
    return sum(*xs)


def mean(*l):
    return _py(F.true_divide(sum(*l), float(len(l))))


def max(*l):  # noqa: A001
    if len(l) == 1:
        return identity(l[0])
    out = l[0]
    for t in l[1:]:
        out = F.maximum(out, t)
    return _py(out)


def min(*l):  # noqa: A001
    if len(l) == 1:
        return identity(l[0])
    out = l[0]
    for t in l[1:]:
        out = F.minimum(out, t)
    return _py(out)


def _scalar(loss):
    """SINGA's losses are tensors of shape (1,)."""
    return _py(F.reshape(loss, 1))


def _batch(x):
    return float(x.shape[0]) if x.ndim else 1.0


def binary_cross_entropy(x, t):
    """-sum(t log(x + 1e-4) + (1 - t) log(1.0001 - x)) / batch, as SINGA's (x: probabilities)."""
    pos = F.mul(t, F.log(F.add(x, 1e-4)))
    neg = F.mul(F.sub(1.0, t), F.log(F.sub(1.0001, x)))
    return _scalar(F.true_divide(F.neg(F.sum(F.add(pos, neg))), _batch(x)))


def cross_entropy(x, t):
    """-sum(t log x) / batch (x: probabilities, t: one-hot or soft targets)."""
    return _scalar(F.true_divide(F.neg(F.sum(F.mul(t, F.log(x)))), _batch(x)))


def softmax_cross_entropy(x, t):
    """The mean over the batch of the cross entropy of softmax(x) and t (class indices or
    one-hot / soft targets of x's shape)."""
    if tuple(t.shape) == tuple(x.shape):  # one-hot or soft targets, whatever their dtype
        t = t.detach().astype(x.dtype) if t.dtype is not x.dtype else t
        return _scalar(F.true_divide(F.neg(F.sum(F.mul(t, F.log_softmax(x, -1)))),
                                     _batch(x)))
    t = t.astype("int64") if t.dtype.is_floating else t
    return _scalar(_losses.softmax_cross_entropy(x, F.reshape(t.detach(), -1)))


def mse_loss(x, t):
    """The mean of the squared differences over all elements."""
    if tuple(x.shape) != tuple(t.shape):
        raise errors.ShapeError(f"mse_loss: input {tuple(x.shape)} and target "
                                f"{tuple(t.shape)} differ")
    return _scalar(_losses.mse(x, t))


def _mean_square_error(x, t):
    """SINGA's MeanSquareError operator: the target broadcasts against x."""
    return _scalar(F.mean(F.square(F.sub(x, t))))


def ranking_loss(pos, neg, M=0.2):  # noqa: N803
    """sum(max(0, M - pos + neg)) / batch."""
    return _scalar(F.true_divide(F.sum(F.relu(F.add(F.sub(neg, pos), float(M)))),
                                 _batch(pos)))


def flatten(x, axis=1):
    """To 2-D: axes before `axis` into the rows, the rest into the columns."""
    axis = axis % x.ndim if x.ndim else 0
    rows = int(np.prod(x.shape[:axis])) if axis else 1
    return _py(F.reshape(x, rows, -1))


def scatter_elements(x, indices, updates, axis=0):
    """ONNX ScatterElements; indices and updates are constants (SINGA's configuration)."""
    return _py(F.scatter_elements(x, _int(indices, x), _as(updates, x).detach(), axis))


def _int(i, like):
    """Positions as a constant int tensor (SINGA's operators take them as configuration)."""
    if isinstance(i, _HLTensor):
        return (i.astype("int64") if i.dtype.is_floating else i).detach()
    return as_tensor(np.asarray(i, np.int64), device=like.device)


def cat(xs, axis=0):
    return _py(F.cat(list(xs), axis))


def tanh(x):
    return _py(F.tanh(x))


def sigmoid(x):
    return _py(F.sigmoid(x))


def _unary(f):
    def fn(x):
        return _py(f(x))
    fn.__name__ = f.__name__
    return fn


cos, cosh, acos, acosh = (_unary(F.cos), _unary(F.cosh), _unary(F.acos), _unary(F.acosh))
sin, sinh, asin, asinh = (_unary(F.sin), _unary(F.sinh), _unary(F.asin), _unary(F.asinh))
tan, atan, atanh = _unary(F.tan), _unary(F.atan), _unary(F.atanh)
abs, exp, sign, sqrt = _unary(F.abs), _unary(F.exp), _unary(F.sign), _unary(F.sqrt)  # noqa: A001
softsign, softplus, log = _unary(F.softsign), _unary(F.softplus), _unary(F.log)
ceil, floor, negative = _unary(F.ceil), _unary(F.floor), _unary(F.neg)
reciprocal, erf = _unary(F.reciprocal), _unary(F.erf)


def round(x):  # noqa: A001
    """Halves away from zero (SINGA's Round)."""
    return _py(F.mul(F.sign(x), F.floor(F.add(F.abs(x), 0.5))))


def rounde(x):
    """Halves to even (ONNX Round)."""
    return _py(F.round(x))


def unsqueeze(x, axis=-1):
    """Size-1 axes inserted at `axis` (positions in the result), as one reshape."""
    axes = [axis] if isinstance(axis, int) else list(axis)
    shape = list(x.shape)
    for a in sorted(a % (x.ndim + len(axes)) for a in axes):
        shape.insert(a, 1)
    return _py(F.reshape(x, *shape))


def squeeze(x, axis=[]):  # noqa: B006 - SINGA's default
    if isinstance(axis, int):
        axis = [axis]
    if not axis:
        return _py(F.reshape(x, *[s for s in x.shape if s != 1]))
    for a in axis:
        if x.shape[a] != 1:
            raise errors.ShapeError(f"squeeze: axis {a} of {tuple(x.shape)} is not 1")
    keep = [s for i, s in enumerate(x.shape) if i not in {a % x.ndim for a in axis}]
    return _py(F.reshape(x, *keep))


def transpose(x, shape):
    return _py(F.permute(x, *shape))


def leakyrelu(x, a=0.01):
    return _py(F.leaky_relu(x, a))


def hardsigmoid(x, alpha=0.2, gamma=0.5):
    return _py(F.hard_sigmoid(x, alpha, gamma))


def shape(x):
    return _tensor.from_numpy(np.array(x.shape, np.int32))


def _and(a, b):
    return _compare("logical_and", a, b)


def _or(a, b):
    return _compare("logical_or", a, b)


def _xor(a, b):
    return _compare("logical_xor", a, b)


def _not(x):
    return _compare("eq", x, 0.0)


def gemm(A, B, C=None, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
    return _py(F.gemm(A, B, C, bool(transA), bool(transB), float(alpha), float(beta)))


def globalaveragepool(x, data_format="channels_first"):
    axes = tuple(range(2, x.ndim)) if data_format == "channels_first" else \
        tuple(range(1, x.ndim - 1))
    return _py(F.mean(x, axis=axes, keepdims=True))


def constant_of_shape(x, value=0):
    dims = [int(v) for v in np.asarray(_tensor.to_numpy(x)).reshape(-1)]
    if isinstance(value, _HLTensor):
        value = float(np.asarray(_tensor.to_numpy(value)).reshape(-1)[0])
    return _tensor.Tensor(dims, x.device).set_value(value)


def dropout(x, seed=0, ratio=0.5):
    """Inverted dropout (kept values scaled by 1 / (1 - ratio)) while training, identity
    otherwise; hl's generator draws the mask."""
    return _py(F.dropout(x, ratio, training=bool(_training())))


def reduce_sum(x, axes=None, keepdims=1):
    return _py(F.sum(x, axis=None if axes is None else tuple(axes), keepdims=bool(keepdims)))


def reduce_mean(x, axes=None, keepdims=1):
    return _py(F.mean(x, axis=None if axes is None else tuple(axes), keepdims=bool(keepdims)))


def slice(x, starts, ends, axes=None, steps=None):  # noqa: A001
    axes = list(range(len(starts))) if axes is None else list(axes)
    steps = [1] * len(starts) if steps is None else list(steps)
    key = [builtins.slice(None)] * x.ndim
    for s, e, a, st in zip(starts, ends, axes, steps):
        key[a % x.ndim] = builtins.slice(int(s), int(e) if e < 2 ** 31 else None, int(st))
    return _py(F.getitem(x, tuple(key)))


def split(x, axis, parts, num_output=None):
    if parts is None:
        parts = num_output
    return _py(tuple(F.split(x, list(parts) if not isinstance(parts, int) else parts, axis)))


def gather(x, axis, indices):
    """numpy.take along axis; as in SINGA, an index is taken modulo the axis size (so -1 and
    size - 1 are the same element, and so are size and 0)."""
    n = x.shape[axis]
    idx = np.mod(np.asarray(_host(indices)).astype(np.int64), n)
    return _py(F.gather(x, as_tensor(idx, device=x.device), axis))


def tile(x, repeats):
    return _py(F.tile(x, list(repeats) if not isinstance(repeats, int) else [repeats]))


def nonzero(x):
    return _tensor.from_numpy(np.array(np.nonzero(_tensor.to_numpy(x))).astype(np.int32))


def cast(x, to):
    return _py(F.cast(x, _tensor._dtype(to)))


def onehot(axis, indices, depth, values):
    """ONNX OneHot: values = [off, on]; negative indices count from depth."""
    off, on = [float(v) for v in np.asarray(_host(values)).reshape(-1)[:2]]
    depth = int(np.asarray(_host(depth)).reshape(-1)[0])
    idx = np.mod(np.asarray(_host(indices)).astype(np.int64), depth)
    return _py(F.one_hot(as_tensor(idx, device=indices.device), depth, axis, on, off))


def _host(v):
    return _tensor.to_numpy(v) if isinstance(v, _HLTensor) else v


def cossim(a, b):
    """Row-wise cosine similarity of two 2-D tensors."""
    dot = F.sum(F.mul(a, b), axis=1)
    na = F.sqrt(F.sum(F.mul(a, a), axis=1))
    nb = F.sqrt(F.sum(F.mul(b, b), axis=1))
    return _py(F.true_divide(dot, F.mul(na, nb)))


def expand(x, shape):
    shape = [int(s) for s in shape]
    out = np.broadcast_shapes(tuple(x.shape), tuple(shape))
    return _py(F.add(x, F.zeros(*out, dtype=x.dtype, device=x.device))
               if x.requires_grad else F.expand(x, *out).contiguous())


def pad(x, mode, pads, constant=0.0):
    return _py(F.pad(x, [int(p) for p in pads], mode, float(constant)))


def upsample(x, mode, scales):
    """Nearest upsampling of the spatial axes by integer scales (one per axis of x, the
    batch and channel ones 1), as hl's interpolate."""
    scales = [float(s) for s in np.asarray(_host(scales)).reshape(-1)]
    if len(scales) != x.ndim or scales[:2] != [1.0, 1.0] or mode != "nearest":
        raise errors.UnsupportedError(f"upsample: nearest mode with scales (1, 1, ...) for "
                                      f"the (N, C, ...) axes; got mode {mode!r}, scales "
                                      f"{scales} for shape {tuple(x.shape)}")
    return _py(F.interpolate(x, scale_factor=tuple(scales[2:]), mode="nearest"))


def depth_to_space(x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = int(blocksize)
    if mode == "DCR":
        y = F.permute(F.reshape(x, n, b, b, c // (b * b), h, w), 0, 3, 4, 1, 5, 2)
    else:
        y = F.permute(F.reshape(x, n, c // (b * b), b, b, h, w), 0, 1, 4, 2, 5, 3)
    return _py(F.reshape(y, n, c // (b * b), h * b, w * b))


def space_to_depth(x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = int(blocksize)
    y = F.reshape(x, n, c, h // b, b, w // b, b)
    y = F.permute(y, 0, 3, 5, 1, 2, 4) if mode == "DCR" else F.permute(y, 0, 1, 3, 5, 2, 4)
    return _py(F.reshape(y, n, c * b * b, h // b, w // b))


def where(x, y, condition):
    cond = condition
    if not isinstance(cond, _HLTensor):
        cond = as_tensor(np.asarray(cond, dtype=bool), device=x.device)
    elif cond.dtype.name != "bool":
        cond = F.ne(cond, 0)
    return _py(F.where(cond, x, y))


def embedding(x, w):
    return _py(F.gather(w, _int(x, w), 0))


# ---- SINGA's handle-based functions --------------------------------------------------------

def conv2d(handle, x, W, b=None, odd_padding=(0, 0, 0, 0)):  # noqa: N803
    return _py(F.conv2d(_pad_odd(x, odd_padding), W, b, handle.stride, handle.padding,
                        1, handle.group))


def pooling_2d(handle, x, odd_padding=(0, 0, 0, 0)):
    x = _pad_odd(x, odd_padding)
    if handle.is_max_pooling:
        return _py(F.max_pool2d(x, handle.kernel, handle.stride, handle.padding))
    return _py(F.avg_pool2d(x, handle.kernel, handle.stride, handle.padding))


def batchnorm_2d(handle, x, scale, bias, running_mean, running_var):
    return _py(F.batch_norm(x, running_mean, running_var, scale, bias,
                            training=bool(_training()), momentum=1.0 - handle.factor))


def _pad_odd(x, odd):
    if not any(odd):
        return x
    top, bottom, left, right = [int(p) for p in odd]
    return F.pad(x, [0, 0, top, left, 0, 0, bottom, right])


# ---- Operator classes: SINGA's `Op(config)(*inputs)` returning a tuple of outputs ---------------

def _op(name, fn, config_params=(), inputs_last=False):
    """An Operator class named `name` whose instances hold the config and, called on tensors,
    return fn's outputs as a tuple (SINGA's ``ReLU()(x)[0]``)."""
    def __init__(self, *args, **kwargs):
        self._config = args
        self._kw = kwargs

    def __call__(self, *xs):
        r = fn(*xs, *self._config, **self._kw)
        return r if isinstance(r, tuple) else (r,)
    return type(name, (), {"__init__": __init__, "__call__": __call__,
                           "__doc__": f"SINGA's {name} operator: calls autograd.{fn.__name__}",
                           "__module__": __name__})


def _target_op(name, fn):
    """A loss operator built with its target: ``MeanSquareError(t)(x)[0]``."""
    def __init__(self, t):
        self.t = t

    def __call__(self, *xs):
        return (fn(*xs, self.t),)
    return type(name, (), {"__init__": __init__, "__call__": __call__, "__module__": __name__})


Mean = _op("Mean", mean)
ReLU = _op("ReLU", relu)
Less = _op("Less", less)
Clip = _op("Clip", clip)
Identity = _op("Identity", identity)
Matmul = _op("Matmul", matmul)
Greater = _op("Greater", greater)
AddBias = _op("AddBias", add_bias)
Reshape = _op("Reshape", reshape)
PRelu = _op("PRelu", prelu)
Add = _op("Add", add)
Elu = _op("Elu", elu)
Equal = _op("Equal", equal)
SeLU = _op("SeLU", selu)
SoftMax = _op("SoftMax", softmax)
Sum = _op("Sum", sum)
BinaryCrossEntropy = _target_op("BinaryCrossEntropy", binary_cross_entropy)
CrossEntropy = _target_op("CrossEntropy", cross_entropy)
RankingLoss = _op("RankingLoss", ranking_loss)
SoftMaxCrossEntropy = _target_op("SoftMaxCrossEntropy", softmax_cross_entropy)
MeanSquareError = _target_op("MeanSquareError", _mean_square_error)
Flatten = _op("Flatten", flatten)
Tanh, Cos, Cosh, Acos, Acosh = (_op("Tanh", tanh), _op("Cos", cos), _op("Cosh", cosh),
                                _op("Acos", acos), _op("Acosh", acosh))
Sin, Sinh, Asin, Asinh = _op("Sin", sin), _op("Sinh", sinh), _op("Asin", asin), _op("Asinh", asinh)
Tan, Atan, Atanh = _op("Tan", tan), _op("Atan", atan), _op("Atanh", atanh)
Sigmoid, Mul = _op("Sigmoid", sigmoid), _op("Mul", mul)
Unsqueeze, Transpose = _op("Unsqueeze", unsqueeze), _op("Transpose", transpose)
Abs, Exp, LeakyRelu, Sign = _op("Abs", abs), _op("Exp", exp), _op("LeakyRelu", leakyrelu), \
    _op("Sign", sign)
Pow, SoftSign, Sqrt, SoftPlus = _op("Pow", pow), _op("SoftSign", softsign), _op("Sqrt", sqrt), \
    _op("SoftPlus", softplus)
Sub, Min, Log, HardSigmoid = _op("Sub", sub), _op("Min", min), _op("Log", log), \
    _op("HardSigmoid", hardsigmoid)
Squeeze, Div, Shape, Max = _op("Squeeze", squeeze), _op("Div", div), _op("Shape", shape), \
    _op("Max", max)
And, Or, Not, Xor = _op("And", _and), _op("Or", _or), _op("Not", _not), _op("Xor", _xor)
Negative, Reciprocal = _op("Negative", negative), _op("Reciprocal", reciprocal)
GlobalAveragePool = _op("GlobalAveragePool", globalaveragepool)
ConstantOfShape = _op("ConstantOfShape", constant_of_shape)
ReduceSum, ReduceMean = _op("ReduceSum", reduce_sum), _op("ReduceMean", reduce_mean)
Slice, Ceil, Floor = _op("Slice", slice), _op("Ceil", ceil), _op("Floor", floor)
Split, Tile, NonZero = _op("Split", split), _op("Tile", tile), _op("NonZero", nonzero)
Cast, CosSim = _op("Cast", cast), _op("CosSim", cossim)
Expand, Pad, UpSample = _op("Expand", expand), _op("Pad", pad), _op("UpSample", upsample)
DepthToSpace = _op("DepthToSpace", depth_to_space)
SpaceToDepth = _op("SpaceToDepth", space_to_depth)
Round, Rounde, Erf = _op("Round", round), _op("Rounde", rounde), _op("Erf", erf)
Embedding = _op("Embedding", embedding)


class Concat:
    """``Concat(axis)(x1, x2, ...)``."""

    def __init__(self, axis=0):
        self.axis = axis

    def __call__(self, *xs):
        return (cat(xs, self.axis),)


class Gemm:
    """``Gemm(alpha, beta, transA, transB)(A, B, C)``."""

    def __init__(self, alpha=1.0, beta=1.0, transA=0, transB=0):  # noqa: N803
        self.args = (alpha, beta, transA, transB)

    def __call__(self, A, B, C=None):  # noqa: N803
        return (gemm(A, B, C, *self.args),)


class Dropout:
    def __init__(self, seed=0, ratio=0.5):
        self.seed, self.ratio = seed, ratio

    def __call__(self, x):
        return (dropout(x, self.seed, self.ratio),)


class Gather:
    def __init__(self, axis, indices):
        self.axis, self.indices = axis, indices

    def __call__(self, x):
        return (gather(x, self.axis, self.indices),)


class ScatterElements:
    def __init__(self, indices, updates, axis=0):
        self.indices, self.updates, self.axis = indices, updates, axis

    def __call__(self, x):
        return (scatter_elements(x, self.indices, self.updates, self.axis),)


class OneHot:
    def __init__(self, axis, depth, values):
        self.axis, self.depth, self.values = axis, depth, values

    def __call__(self, indices):
        return (onehot(self.axis, indices, self.depth, self.values),)


class Where:
    def __init__(self, condition):
        self.condition = condition

    def __call__(self, a, b):
        return (where(a, b, self.condition),)


# ---- the training flag: hl's own, read and written through this module ------------------------

def _training():
    return _hl_autograd.training


class _Module(types.ModuleType):
    @property
    def training(self):
        return _hl_autograd.training

    @training.setter
    def training(self, value):
        _hl_autograd.training = bool(value)


sys.modules[__name__].__class__ = _Module
