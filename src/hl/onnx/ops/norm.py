"""Normalization (BatchNormalization, InstanceNormalization, LayerNormalization,
GroupNormalization, LRN, MeanVarianceNormalization, LpNormalization): import handlers and the
export rules of hl's BatchNorm, LayerNorm and GroupNorm.
"""

import numpy as np

from ... import dtypes as _dt
from ... import errors
from ...autograd import no_grad
from ...autograd.normalization import BatchNorm, GroupNorm, LayerNorm
from ..registry import exports, onnx_op
from ._spatial import CORE_FLOATS, spatial_input
from ._util import axis_of, const, F, HALF


# ---- normalization ---------------------------------------------------------------------

def _channel_shaped(t, ndim):
    """A per-channel (C,) or (C, d...) parameter shaped to broadcast against (N, C, d...)."""
    return F.reshape(t, 1, *t.shape, *([1] * (ndim - 1 - t.ndim)))


@onnx_op("BatchNormalization")
def batch_norm(n, x, scale, bias, mean, var):
    if x.ndim < 2:
        raise n.error(f"input must be (N, C, ...), got shape {x.shape}", errors.ShapeError)
    eps = n.attr("epsilon", 1e-5)
    momentum = n.attr("momentum", 0.9)
    spatial = bool(n.attr("spatial", 1)) if n.opset < 9 else True
    want = (x.shape[1],) if spatial else tuple(x.shape[1:])
    for name, t in (("scale", scale), ("B", bias), ("mean", mean), ("var", var)):
        if tuple(t.shape) != want:
            raise n.error(f"{name} of shape {t.shape} must be {want} for input {x.shape}",
                          errors.ShapeError)
    axes = (0,) + tuple(range(2, x.ndim)) if spatial else (0,)
    fast = spatial and x.dtype.name in CORE_FLOATS and \
        all(t.dtype == x.dtype for t in (scale, bias, mean, var))
    batch_stats = n.training or bool(n.attr("training_mode", 0))
    if not batch_stats:
        if fast:
            y = F.batch_norm(x, mean, var, scale, bias, training=False, eps=eps)
        else:
            y = _normalize(x, _channel_shaped(mean, x.ndim), _channel_shaped(var, x.ndim),
                           scale, bias, eps)
        return y, mean, var, mean, var
    if fast:
        y = F.batch_norm(x, None, None, scale, bias, training=True, eps=eps)
    else:
        y = _normalize(x, F.mean(x, axis=axes, keepdims=True),
                       F.var(x, axis=axes, keepdims=True), scale, bias, eps)
    with no_grad():
        # ONNX's momentum weighs the running value (PyTorch's weighs the batch), and the
        # batch variance is the biased one.
        batch_mean = F.mean(x, axis=axes)
        batch_var = F.var(x, axis=axes)
        new_mean = F.add(F.mul(mean, momentum), F.mul(F.cast(batch_mean, mean.dtype.name),
                                                      1.0 - momentum))
        new_var = F.add(F.mul(var, momentum), F.mul(F.cast(batch_var, var.dtype.name),
                                                    1.0 - momentum))
        if n.training:  # hl training an imported model: the running statistics learn
            mean.copy_(new_mean)
            var.copy_(new_var)
    return y, new_mean, new_var, batch_mean, batch_var


def _normalize(x, mean, var, scale, bias, eps):
    y = F.div(F.sub(x, mean), F.sqrt(F.add(var, eps)))
    y = F.add(F.mul(y, _channel_shaped(scale, x.ndim)), _channel_shaped(bias, x.ndim))
    return y if y.dtype == x.dtype else F.cast(y, x.dtype.name)


@onnx_op("InstanceNormalization")
def instance_norm(n, x, scale, bias):
    spatial_input(n, x)
    for name, t in (("scale", scale), ("B", bias)):
        if tuple(t.shape) != (x.shape[1],):
            raise n.error(f"{name} of shape {t.shape} must be ({x.shape[1]},)", errors.ShapeError)
    return F.instance_norm(x, None, None, scale, bias, eps=n.attr("epsilon", 1e-5))


def _stats_dtype(n, x):
    """LayerNormalization/GroupNormalization compute in float32 (stash_type 1) at least."""
    return "float32" if x.dtype.name in HALF and n.attr("stash_type", 1) == 1 else None


@onnx_op("LayerNormalization", since=17)
def layer_norm(n, x, scale, bias=None):
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    eps = n.attr("epsilon", 1e-5)
    shape = tuple(x.shape[axis:])
    stash = _stats_dtype(n, x)
    xc = F.cast(x, stash) if stash else x
    exact = tuple(scale.shape) == shape and (bias is None or tuple(bias.shape) == shape) \
        and not stash
    y, mean, invstd = F.layer_norm(xc, axis=axis, weight=scale if exact else None,
                                   bias=bias if exact else None, eps=eps, return_stats=True)
    if not exact:  # float16 input, or parameters that broadcast to the normalized shape
        y = F.mul(F.cast(y, x.dtype.name) if stash else y, scale)
        y = y if bias is None else F.add(y, bias)
    stats_shape = tuple(x.shape[:axis]) + (1,) * (x.ndim - axis)
    return y, F.reshape(mean, *stats_shape), F.reshape(invstd, *stats_shape)


@onnx_op("GroupNormalization", since=18)
def group_norm(n, x, scale, bias):
    if x.ndim < 2:
        raise n.error(f"input must be (N, C, ...), got shape {x.shape}", errors.ShapeError)
    groups = n.attr("num_groups")
    c = x.shape[1]
    if not groups or c % groups:
        raise n.error(f"num_groups {groups} must divide the {c} channels", errors.ValueError)
    per = groups if n.opset < 21 else c  # opset 18 scales per group, opset 21 per channel
    for name, t in (("scale", scale), ("bias", bias)):
        if tuple(t.shape) != (per,):
            raise n.error(f"{name} of shape {t.shape} must be ({per},) at opset {n.opset}",
                          errors.ShapeError)
    if per != c:
        repeat = const(np.repeat(np.arange(groups), c // groups), like=x)
        scale, bias = F.gather(scale, repeat), F.gather(bias, repeat)
    stash = _stats_dtype(n, x)
    if stash:
        x, scale, bias = (F.cast(t, stash) for t in (x, scale, bias))
    y = F.group_norm(x, groups, scale, bias, eps=n.attr("epsilon", 1e-5))
    return F.cast(y, x.dtype.name) if stash else y


@onnx_op("LRN")
def lrn(n, x):
    size = n.attr("size")
    if not size or size < 1:
        raise n.error(f"size must be a positive integer, got {size}", errors.ValueError)
    alpha, beta, bias = n.attr("alpha", 1e-4), n.attr("beta", 0.75), n.attr("bias", 1.0)
    if x.ndim < 3:
        raise n.error(f"input must be (N, C, d...), got shape {x.shape}", errors.ShapeError)
    # sum of squares over the channels c - floor((size-1)/2) .. c + ceil((size-1)/2)
    sq = F.pad(F.square(x), [(0, 0), ((size - 1) // 2, size // 2)] + [(0, 0)] * (x.ndim - 2))
    c = x.shape[1]
    total = None
    for i in range(size):
        v = F.getitem(sq, (slice(None), slice(i, i + c)))
        total = v if total is None else F.add(total, v)
    return F.div(x, F.pow(F.add(F.mul(total, alpha / size), bias), beta))


@onnx_op("MeanVarianceNormalization", since=9)
def mean_variance_norm(n, x):
    axes = tuple(axis_of(n, a, x.ndim, "axes") for a in n.attr("axes", [0, 2, 3]))
    mean = F.mean(x, axis=axes, keepdims=True)
    std = F.sqrt(F.var(x, axis=axes, keepdims=True))
    return F.div(F.sub(x, mean), F.add(std, 1e-9))  # ONNX's function adds 1e-9


@onnx_op("LpNormalization")
def lp_normalization(n, x):
    axis = axis_of(n, n.attr("axis", -1), x.ndim)
    p = n.attr("p", 2)
    if p not in (1, 2):
        raise n.error(f"p must be 1 or 2, got {p}", errors.ValueError)
    norm = F.sum(F.abs(x), axis=axis, keepdims=True) if p == 1 else \
        F.sqrt(F.sum(F.square(x), axis=axis, keepdims=True))
    # an all-zero slice stays zero (ONNX's 0 / 0 = 0) instead of becoming NaN
    return F.div(x, F.where(F.eq(norm, 0), F.ones_like(norm), norm))


# ---- export: hl Functions as ONNX nodes --------------------------------------------------


# ---- normalisation -----------------------------------------------------------------------

def _param_or(g, p, value, shape, dtype):
    """An affine parameter's name, or a constant of ``value`` where the op had none."""
    if p is not None:
        return p.name
    return g.const(np.full(shape, value, dtype=_dt.dtype(dtype).np))


def _normalized(g, x, axes, eps, dtype):
    """(x - mean) / sqrt(var + eps) over ``axes`` (biased variance), from basic ops."""
    mean = g.reduce("ReduceMean", x, axes, True)
    d = g.op("Sub", [x, mean])
    var = g.reduce("ReduceMean", g.op("Mul", [d, d]), axes, True)
    std = g.op("Sqrt", [g.op("Add", [var, g.scalar(eps, dtype)])])
    return g.op("Div", [d, std])


@exports(BatchNorm)
def export_batch_norm(g, f, xs, ys):
    """Inference batch norm on the running statistics, whatever mode the op ran in (ONNX
    models are deployed for inference; the running statistics are initializers)."""
    x, weight, bias = (*xs, None, None)[:3]  # weight and bias are optional
    y = ys[0]
    c = x.shape[1]
    scale = _param_or(g, weight, 1.0, (c,), x.dtype)
    shift = _param_or(g, bias, 0.0, (c,), x.dtype)
    if f.running_mean is None or f.running_var is None:
        if not f.training:
            raise g.error("batch_norm in inference mode without running statistics")
        # No statistics to freeze: normalise with the batch's own, as the op did.
        axes = [0] + list(range(2, x.ndim))
        n = _normalized(g, x.name, axes, float(f.eps), x.dtype)
        shape = [1, c] + [1] * (x.ndim - 2)
        sc = g.op("Reshape", [scale, g.ints(shape)])
        sh = g.op("Reshape", [shift, g.ints(shape)])
        return g.op("Add", [g.op("Mul", [n, sc]), sh], out=y.name)
    mean, var = g.leaf(f.running_mean).name, g.leaf(f.running_var).name
    g.op("BatchNormalization", [x.name, scale, shift, mean, var], out=y.name,
         epsilon=float(f.eps), momentum=1.0 - float(f.momentum))


@exports(LayerNorm)
def export_layer_norm(g, f, xs, ys):
    x, weight, bias = (*xs, None, None)[:3]  # weight and bias are optional
    y = ys[0]
    axis = f._axis(x)
    tail = x.sig[axis:]
    if g.opset >= 17 and (weight is not None or all(isinstance(s, int) for s in tail)):
        scale = _param_or(g, weight, 1.0, x.shape[axis:], x.dtype)
        ins = [x.name, scale] + ([bias.name] if bias is not None else [])
        return g.op("LayerNormalization", ins, out=y.name, axis=int(axis),
                    epsilon=float(f.eps))
    n = _normalized(g, x.name, list(range(axis, x.ndim)), float(f.eps), x.dtype)
    if weight is not None:
        n = g.op("Mul", [n, weight.name])
    if bias is not None:
        n = g.op("Add", [n, bias.name])
    g.op("Identity", [n], out=y.name)


@exports(GroupNorm)
def export_group_norm(g, f, xs, ys):
    x, weight, bias = (*xs, None, None)[:3]  # weight and bias are optional
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
    n = _normalized(g, rows, [2], float(f.eps), x.dtype)
    n = g.op("Reshape", [n, g.op("Shape", [x.name])])
    shape = g.ints([1, c] + [1] * (x.ndim - 2))
    if weight is not None:
        n = g.op("Mul", [n, g.op("Reshape", [weight.name, shape])])
    if bias is not None:
        n = g.op("Add", [n, g.op("Reshape", [bias.name, shape])])
    g.op("Identity", [n], out=y.name)
