"""AdaGrad: torch.optim.Adagrad's update, step for step.

Per update (t counts the parameter's updates from 1; g = grad + weight_decay * param):
    clr = lr / (1 + (t - 1) * lr_decay)
    s = s + g * g
    param -= clr * g / (sqrt(s) + eps)
"""
from .. import ops
from ._checks import check_nonnegative, check_positive
from .optimizer import Optimizer
from ..autograd import functional as F


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

    def _update(self, param, grad, slots, lr):
        if not slots:
            slots["step"] = 0
            slots["sum"] = ops.full_like(param, self.initial_accumulator_value)
        slots["step"] += 1
        if self.weight_decay:
            grad = F.add(grad, F.mul(param, self.weight_decay))
        clr = lr / (1.0 + (slots["step"] - 1) * self.lr_decay)
        s = slots["sum"]
        tmp = F.mul(grad, grad)
        F.add(s, tmp, out=s)
        F.sqrt(s, out=tmp)
        F.add(tmp, self.eps, out=tmp)
        F.true_divide(grad, tmp, out=tmp)
        F.mul(tmp, -clr, out=tmp)
        F.add(param, tmp, out=param)


Adagrad = AdaGrad  # PyTorch's spelling
