"""Gradient clipping by the global norm (torch.nn.utils.clip_grad_norm_'s rule).

The total norm is the norm of the per-gradient norms; every gradient is multiplied by
``min(1, max_norm / (total + 1e-6))``. The factor stays a tensor on the gradients' device, so
clipping never waits for the device to report a number.
"""
import math

from .. import errors, ops
from .._tensor import Tensor
from ..autograd import functional as F
from ..autograd.mode import no_grad

__all__ = ["clip_grad_norm"]


def _total_norm(grads, norm_type):
    if not grads:
        return None
    norms = [F.vector_norm(g, ord=norm_type).reshape(1) for g in grads]
    return F.vector_norm(F.concat(norms), ord=norm_type)


def _clip_coefficient(grads, max_norm, norm_type):
    """(total norm, factor) for these gradients; both 0-d tensors (None, None when empty)."""
    total = _total_norm(grads, norm_type)
    if total is None:
        return None, None
    return total, F.minimum(F.true_divide(float(max_norm), total + 1e-6), 1.0)


def clip_grad_norm(grads_or_params, max_norm, norm_type=2.0, error_if_nonfinite=False):
    """Scales gradients so that their global norm is at most max_norm; returns the total
    norm before clipping (a 0-d tensor; ``float()`` it to print).

    ``grads_or_params`` is an iterable (or a dict's values, or one tensor) of either
    - parameters (tensors with requires_grad or stores_grad): their ``.grad`` is clipped
      (replaced by a scaled copy: after ``loss.backward()`` one gradient tensor may be
      shared by several parameters, or be a broadcast view that cannot be written into);
      parameters without a ``.grad`` are skipped; or
    - gradient tensors, scaled in place. These must be distinct, writable tensors; the
      (param, grad) pairs of ``hl.autograd.backward`` may share tensors, so for those use
      the optimiser's ``clip_norm=`` argument, which scales copies.

    ``norm_type`` is 2 by default, or any order ``hl.vector_norm`` takes (inf included).
    """
    if isinstance(grads_or_params, Tensor):
        items = [grads_or_params]
    elif isinstance(grads_or_params, dict):
        items = list(grads_or_params.values())
    else:
        items = list(grads_or_params)
    if not (max_norm > 0 and math.isfinite(max_norm)):
        raise errors.ValueError(f"clip_grad_norm: max_norm must be a finite number > 0, got "
                                f"{max_norm!r}")
    params = [t for t in items if t.requires_grad or t.stores_grad]
    bare = [t for t in items if not (t.requires_grad or t.stores_grad)]
    if params and bare:
        raise errors.ValueError("clip_grad_norm: give either parameters (their .grad is "
                                "clipped) or gradient tensors, not a mix of both")
    if bare:
        _check_writable(bare)
    with no_grad():
        if params:
            params = [p for p in params if p.grad is not None]
            grads = [p.grad for p in params]
        else:
            grads = bare
        total, coef = _clip_coefficient(grads, max_norm, norm_type)
        if total is None:
            return ops.zeros(())
        if error_if_nonfinite and not math.isfinite(float(total)):
            raise errors.ValueError(f"clip_grad_norm: the total norm of order {norm_type} of "
                                    f"the gradients is {float(total)}")
        if params:
            for p in params:
                p.grad = F.mul(p.grad, coef)
        else:
            for g in {id(g): g for g in bare}.values():  # a tensor listed twice is scaled once
                F.mul(g, coef, out=g)
    return total


def _check_writable(grads):
    """In-place scaling needs each tensor to own distinct memory: a broadcast view (a zero
    stride) would be scaled once per alias, and two views of one storage twice."""
    distinct = list({id(g): g for g in grads}.values())
    for i, g in enumerate(distinct):
        if not g.is_contiguous():
            raise errors.ValueError(
                f"clip_grad_norm: gradient {i} (shape {tuple(g.shape)}, strides {g.strides}) is "
                f"a view that cannot be scaled in place; pass the parameters after "
                f"loss.backward(), or use the optimiser's clip_norm= argument")
        for j in range(i):
            if g.shares_memory(distinct[j]):
                raise errors.ValueError(
                    f"clip_grad_norm: gradients {j} and {i} share memory, so scaling them in "
                    f"place would scale it twice; pass the parameters after loss.backward(), "
                    f"or use the optimiser's clip_norm= argument")
