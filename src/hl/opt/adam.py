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
from . import rules
from ._checks import check_nonnegative, check_positive, check_unit_interval
from .optimizer import Optimizer


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

    def _host_update(self, slots, lr):
        t = slots["step"] = slots.get("step", 0) + 1
        values = {"neg_step_size": -(lr / (1.0 - self.beta_1 ** t)),
                  "bias_correction2_sqrt": math.sqrt(1.0 - self.beta_2 ** t)}
        if self.weight_decay and self.decoupled:
            values["decay_factor"] = 1.0 - lr * self.weight_decay
        return values

    def _update(self, param, grad, slots, values):
        zeros = lambda: ops.zeros_like(param)  # noqa: E731
        m = self._slot(slots, "exp_avg", zeros)
        v = self._slot(slots, "exp_avg_sq", zeros)
        # (created here also when amsgrad is switched on after a checkpoint)
        vmax = self._slot(slots, "max_exp_avg_sq", zeros) if self.amsgrad else None
        rules.adam(param, grad, m, v, vmax, values["neg_step_size"],
                   values["bias_correction2_sqrt"], self.beta_1, self.beta_2, self.eps,
                   self.weight_decay, values.get("decay_factor"))


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
