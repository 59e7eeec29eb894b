"""AdaGrad: torch.optim.Adagrad's update, step for step.

Per update (t counts the parameter's updates from 1; g = grad + weight_decay * param):
    clr = lr / (1 + (t - 1) * lr_decay)
    s = s + g * g
    param -= clr * g / (sqrt(s) + eps)
"""
from .. import ops
from . import rules
from ._checks import check_nonnegative, check_positive
from .optimizer import Optimizer


class AdaGrad(Optimizer):
    """``AdaGrad(lr=0.01, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
    eps=1e-10)`` (PyTorch's defaults). Slots: ``step`` (a count) and ``sum``."""

    slot_names = ("step", "sum")
    count_slots = ("step",)

    def __init__(self, lr=0.01, lr_decay=0.0, weight_decay=0.0, initial_accumulator_value=0.0,
                 eps=1e-10, *, params=None, clip_norm=None):
        super().__init__(lr, params, clip_norm)
        self.lr_decay = check_nonnegative(lr_decay, "AdaGrad", "lr_decay")
        self.weight_decay = check_nonnegative(weight_decay, "AdaGrad", "weight_decay")
        self.initial_accumulator_value = check_nonnegative(
            initial_accumulator_value, "AdaGrad", "initial_accumulator_value")
        self.eps = check_positive(eps, "AdaGrad", "eps")

    def _host_update(self, slots, lr):
        t = slots["step"] = slots.get("step", 0) + 1
        return {"neg_clr": -(lr / (1.0 + (t - 1) * self.lr_decay))}

    def _update(self, param, grad, slots, values):
        s = slots.get("sum")
        if s is None:
            s = self._new_slot(slots, "sum",
                               lambda: ops.full_like(param, self.initial_accumulator_value))
        rules.adagrad(param, grad, s, values["neg_clr"], self.eps, self.weight_decay)


Adagrad = AdaGrad  # PyTorch's spelling
