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
import sys
import types

import numpy as np

from .. import autograd as _hl_autograd
from .. import errors
from .._tensor import Tensor as _HLTensor
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


from ._functions import (  # noqa: F401 - SINGA's autograd functions
    relu, identity, matmul, less, greater, equal, clip, add_bias, reshape, prelu, add, sub,
    mul, div, pow, elu, selu, softmax, sum, add_all, mean, max, min, binary_cross_entropy,
    cross_entropy, softmax_cross_entropy, mse_loss, ranking_loss, flatten, scatter_elements,
    cat, tanh, sigmoid, cos, cosh, acos, acosh, sin, sinh, asin, asinh, tan, atan, atanh, abs,
    exp, sign, sqrt, softsign, softplus, log, ceil, floor, negative, reciprocal, erf, round,
    rounde, unsqueeze, squeeze, transpose, leakyrelu, hardsigmoid, shape, _and, _or, _xor,
    _not, gemm, globalaveragepool, constant_of_shape, dropout, reduce_sum, reduce_mean, slice,
    split, gather, tile, nonzero, cast, onehot, cossim, expand, pad, upsample, depth_to_space,
    space_to_depth, where, embedding, conv2d, pooling_2d, batchnorm_2d)
from ._functions import _mean_square_error


# ---- Operator classes: SINGA's `Op(config)(*inputs)` returning a tuple of outputs ---------------

def _op(name, fn):
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

class _Module(types.ModuleType):
    @property
    def training(self):
        return _hl_autograd.training

    @training.setter
    def training(self, value):
        _hl_autograd.training = bool(value)


sys.modules[__name__].__class__ = _Module
