"""The normalisation kernels: batch norm and layer norm, forward and backward (the ops users
call, with their gradients, are in hl.autograd.normalization).

batch_norm_forward follows ``torch.nn.functional.batch_norm``: x is (N, C, ...); in training it
normalises with the batch statistics and updates running_mean / running_var in place
(running = (1 - momentum) * running + momentum * batch, with the unbiased batch variance);
otherwise it uses the running statistics. layer_norm_forward follows
``torch.nn.functional.layer_norm``: it normalises over the trailing axes.

The ``*_grad`` functions take the statistics the forward returned with return_stats=True.
"""
from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into, norm_axis

__all__ = ["batch_norm_forward", "batch_norm_grad", "layer_norm_forward", "layer_norm_grad"]


def _h(t):
    return None if t is None else t._h


def _opt(t, like):
    """An optional parameter as a tensor on like's device (None stays None)."""
    if t is None:
        return None
    return as_tensor(t, dtype=like.dtype if not isinstance(t, Tensor) else None,
                     device=like.device)


def batch_norm_forward(x, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5, return_stats=False):
    """Batch normalisation of x (N, C, ...) over every axis but the channel axis 1.

    weight, bias: (C,) or None (1 and 0). running_mean, running_var: (C,) tensors, updated
    in place when training (they may be None when training, then nothing is tracked).
    With return_stats=True returns (y, save_mean, save_invstd): the mean and 1/sqrt(var + eps)
    that normalised x (the batch's when training, the running ones otherwise), which is what
    batch_norm_grad takes.
    """
    x = as_tensor(x)
    if running_mean is not None and not isinstance(running_mean, Tensor):
        raise errors.ValueError("batch_norm: running_mean must be an hl Tensor (it is updated "
                                "in place)")
    if running_var is not None and not isinstance(running_var, Tensor):
        raise errors.ValueError("batch_norm: running_var must be an hl Tensor (it is updated "
                                "in place)")
    weight, bias = _opt(weight, x), _opt(bias, x)
    stats = _core.OUT if return_stats else None
    r = _core.call("batch_norm", x._h, _h(weight), _h(bias), _h(running_mean),
                   _h(running_var), int(bool(training)), float(momentum), float(eps),
                   _core.OUT, stats, stats)
    return tuple(_wrap(h) for h in r) if return_stats else _wrap(r)


def batch_norm_grad(dy, x, save_mean, save_invstd, weight=None, training=True,
                    needs=(True, True, True), out=(None, None, None)):
    """Gradients (dx, dweight, dbias) of batch_norm, from the save_mean / save_invstd its
    forward returned with return_stats=True.

    training=True differentiates through the batch statistics; training=False treats the
    statistics as constants (inference: dx = dy * weight * save_invstd). needs says which of
    the three to compute; the others come back as None. out gives tensors to write the
    three into (None: new ones).
    """
    dy, x = as_tensor(dy), as_tensor(x)
    weight = _opt(weight, x)
    outs = [_core.out(into(o)) if n else None for n, o in zip(needs, out)]
    r = _core.call("batch_norm_grad", dy._h, x._h, _h(weight), save_mean._h, save_invstd._h,
                   int(bool(training)), *outs)
    return _grads(r, needs)


def _grads(handles, needs):
    if not isinstance(handles, tuple):
        handles = (handles,)
    it = iter(handles)
    return tuple(_wrap(next(it)) if n else None for n in needs)


def _layer_axis(x, normalized_shape, axis, op):
    if (normalized_shape is None) == (axis is None):
        raise errors.ValueError(f"{op}: give exactly one of normalized_shape and axis")
    if axis is not None:
        return norm_axis(axis, x.ndim, op)
    shp = (int(normalized_shape),) if isinstance(normalized_shape, int) \
        else tuple(int(s) for s in normalized_shape)
    if not shp or len(shp) > x.ndim or tuple(x.shape[x.ndim - len(shp):]) != shp:
        raise errors.ShapeError(f"{op}: normalized_shape {shp} must be a non-empty tail of the "
                                f"input shape {x.shape}")
    return x.ndim - len(shp)


def layer_norm_forward(x, normalized_shape=None, weight=None, bias=None, eps=1e-5, axis=None,
               return_stats=False):
    """Layer normalisation over the trailing axes of x.

    Name them as PyTorch does, by normalized_shape (the trailing shape; an int n means (n,)),
    or by axis: the first normalised axis (everything from axis to the end). weight, bias:
    the trailing shape, or None. With return_stats=True returns (y, mean, invstd), the
    per-row statistics with x's leading shape, which layer_norm_grad takes.
    """
    x = as_tensor(x)
    a = _layer_axis(x, normalized_shape, axis, "layer_norm")
    weight, bias = _opt(weight, x), _opt(bias, x)
    stats = _core.OUT if return_stats else None
    r = _core.call("layer_norm", x._h, _h(weight), _h(bias), a, float(eps), _core.OUT, stats,
                   stats)
    return tuple(_wrap(h) for h in r) if return_stats else _wrap(r)


def layer_norm_grad(dy, x, mean, invstd, weight=None, needs=(True, True, True),
                    out=(None, None, None)):
    """Gradients (dx, dweight, dbias) of layer_norm from the mean and invstd its forward
    returned with return_stats=True (their number of axes tells where normalisation
    starts). needs says which of the three to compute; the others come back as None. out
    gives tensors to write the three into (None: new ones)."""
    dy, x = as_tensor(dy), as_tensor(x)
    weight = _opt(weight, x)
    outs = [_core.out(into(o)) if n else None for n, o in zip(needs, out)]
    r = _core.call("layer_norm_grad", dy._h, x._h, _h(weight), mean._h, invstd._h,
                   mean.ndim, *outs)
    return _grads(r, needs)
