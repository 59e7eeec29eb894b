"""RMSProp: torch.optim.RMSprop's update, step for step.

Per update (g = grad + weight_decay * param):
    s = alpha * s + (1 - alpha) * g * g
    centered: a = a + (1 - alpha) * (g - a); avg = sqrt(s - a * a) + eps, else sqrt(s) + eps
    momentum > 0: b = momentum * b + g / avg; param -= lr * b
    otherwise:    param -= lr * g / avg
"""
from .. import ops
from . import rules
from ._checks import check_nonnegative, check_positive, check_unit_interval
from .optimizer import Optimizer


class RMSProp(Optimizer):
    """``RMSProp(lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0, centered=False)``
    (PyTorch's defaults; Keras calls alpha rho). Slots: ``step`` (a count), ``square_avg``,
    ``momentum_buffer`` (momentum > 0) and ``grad_avg`` (centered)."""

    slot_names = ("step", "square_avg", "momentum_buffer", "grad_avg")
    count_slots = ("step",)

    def __init__(self, lr=0.01, alpha=0.99, eps=1e-8, weight_decay=0.0, momentum=0.0,
                 centered=False, *, params=None, clip_norm=None):
        super().__init__(lr, params, clip_norm)
        self.alpha = check_unit_interval(alpha, "RMSProp", "alpha")
        self.eps = check_positive(eps, "RMSProp", "eps")
        self.weight_decay = check_nonnegative(weight_decay, "RMSProp", "weight_decay")
        self.momentum = check_nonnegative(momentum, "RMSProp", "momentum")
        self.centered = bool(centered)

    def _host_update(self, slots, lr):
        slots["step"] = slots.get("step", 0) + 1
        return {"neg_lr": -lr}

    def _update(self, param, grad, slots, values):
        zeros = lambda: ops.zeros_like(param)  # noqa: E731
        sq = self._slot(slots, "square_avg", zeros)
        ga = self._slot(slots, "grad_avg", zeros) if self.centered else None
        buf = self._slot(slots, "momentum_buffer", zeros) if self.momentum > 0 else None
        rules.rmsprop(param, grad, sq, ga, buf, values["neg_lr"], self.alpha, self.eps,
                      self.weight_decay, self.momentum)


RMSprop = RMSProp  # PyTorch's spelling
