"""SINGA's autograd functions (hl.singa.autograd re-exports them), each over hl's autograd
functions with SINGA's argument conventions: (1,)-shaped losses, 0/1 float comparisons,
indices taken as constants (gather modulo the axis size), ONNX-style reshape and pads."""
import builtins

import numpy as np

from .. import autograd as _hl_autograd
from .. import errors, losses as _losses
from .._tensor import Tensor as _HLTensor, as_tensor
from ..autograd import functional as F
from ..autograd.binary import Compare as _Compare
from . import tensor as _tensor
from ._pytensor import composite
from .tensor import _py


def _training():
    return _hl_autograd.training


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
    return composite(_py(F.where(F.lt(x, 0.0), F.mul(x, slope), x)), x, slope)


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
    return composite(_py(F.true_divide(sum(*l), float(len(l)))), *l)


def max(*l):  # noqa: A001
    if len(l) == 1:
        return identity(l[0])
    out = l[0]
    for t in l[1:]:
        out = F.maximum(out, t)
    return composite(_py(out), *l)


def min(*l):  # noqa: A001
    if len(l) == 1:
        return identity(l[0])
    out = l[0]
    for t in l[1:]:
        out = F.minimum(out, t)
    return composite(_py(out), *l)


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
    return composite(_scalar(_losses.mse(x, t)), x)  # SINGA's backward: dx only


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
    return composite(_py(F.tile(x, list(repeats) if not isinstance(repeats, int) else
                                [repeats])), x)


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
    return composite(_py(F.true_divide(dot, F.mul(na, nb))), a, b)


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
    return composite(_py(F.reshape(y, n, c // (b * b), h * b, w * b)), x)


def space_to_depth(x, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = int(blocksize)
    y = F.reshape(x, n, c, h // b, b, w // b, b)
    y = F.permute(y, 0, 3, 5, 1, 2, 4) if mode == "DCR" else F.permute(y, 0, 1, 3, 5, 2, 4)
    return composite(_py(F.reshape(y, n, c * b * b, h // b, w // b)), x)


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
