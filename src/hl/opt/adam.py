"""Adam and AdamW: torch.optim.Adam's and AdamW's updates, step for step.

Per update of a parameter (t counts that parameter's updates, from 1):
    m = m + (1 - beta1) * (g - m)            (torch's lerp)
    v = beta2 * v + (1 - beta2) * g * g
    vmax = max(vmax, v) with amsgrad; the denominator uses vmax then
    param -= lr / (1 - beta1**t) * m / (sqrt(v) / sqrt(1 - beta2**t) + eps)
Adam's weight_decay is L2 (g = g + wd * param first); AdamW's is decoupled
(param *= 1 - lr * wd before the step).
"""
import math

from .. import ops
from ._checks import check_nonnegative, check_positive, check_unit_interval
from .optimizer import Optimizer
from ..autograd import functional as F


class Adam(Optimizer):
    """``Adam(lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-8, weight_decay=0, amsgrad=False)``;
    ``betas=(b1, b2)`` is accepted too (PyTorch's spelling). Slots: ``step`` (a count),
    ``exp_avg``, ``exp_avg_sq`` and, with amsgrad, ``max_exp_avg_sq``."""

    slot_names = ("step", "exp_avg", "exp_avg_sq", "max_exp_avg_sq")
    count_slots = ("step",)
    decoupled = False

    def __init__(self, lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-8, weight_decay=0.0,
                 amsgrad=False, *, betas=None, params=None, clip_norm=None):
        super().__init__(lr, params, clip_norm)
        if betas is not None:
            beta_1, beta_2 = betas
        self.beta_1 = check_unit_interval(beta_1, self.name, "beta_1")
        self.beta_2 = check_unit_interval(beta_2, self.name, "beta_2")
        self.eps = check_positive(eps, self.name, "eps")
        self.weight_decay = check_nonnegative(weight_decay, self.name, "weight_decay")
        self.amsgrad = bool(amsgrad)

    def _update(self, param, grad, slots, lr):
        b1, b2 = self.beta_1, self.beta_2
        if not slots:
            slots["step"] = 0
            slots["exp_avg"] = ops.zeros_like(param)
            slots["exp_avg_sq"] = ops.zeros_like(param)
            if self.amsgrad:
                slots["max_exp_avg_sq"] = ops.zeros_like(param)
        slots["step"] += 1
        t = slots["step"]
        if self.weight_decay:
            if self.decoupled:
                F.mul(param, 1.0 - lr * self.weight_decay, out=param)
            else:
                grad = F.add(grad, F.mul(param, self.weight_decay))
        m, v = slots["exp_avg"], slots["exp_avg_sq"]
        tmp = F.sub(grad, m)
        F.mul(tmp, 1.0 - b1, out=tmp)
        F.add(m, tmp, out=m)
        F.mul(v, b2, out=v)
        F.mul(grad, grad, out=tmp)
        F.mul(tmp, 1.0 - b2, out=tmp)
        F.add(v, tmp, out=v)
        if self.amsgrad:
            vmax = slots.get("max_exp_avg_sq")
            if vmax is None:  # amsgrad switched on after a checkpoint without it
                vmax = slots["max_exp_avg_sq"] = ops.zeros_like(param)
            F.maximum(vmax, v, out=vmax)
            v = vmax
        step_size = lr / (1.0 - b1 ** t)
        denom = F.sqrt(v, out=tmp)
        F.true_divide(denom, math.sqrt(1.0 - b2 ** t), out=denom)
        F.add(denom, self.eps, out=denom)
        F.true_divide(m, denom, out=denom)
        F.mul(denom, -step_size, out=denom)
        F.add(param, denom, out=param)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov and Hutter): before each step the
    parameter shrinks by ``1 - lr * weight_decay``; the gradient is left alone.
    ``AdamW(lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-8, weight_decay=0.01, amsgrad=False)``,
    PyTorch's defaults."""

    decoupled = True

    def __init__(self, lr=1e-3, beta_1=0.9, beta_2=0.999, eps=1e-8, weight_decay=0.01,
                 amsgrad=False, *, betas=None, params=None, clip_norm=None):
        super().__init__(lr, beta_1, beta_2, eps, weight_decay, amsgrad, betas=betas,
                         params=params, clip_norm=clip_norm)
