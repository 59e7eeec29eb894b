"""RMSProp: torch.optim.RMSprop's update, step for step.

Per update (g = grad + weight_decay * param):
    s = alpha * s + (1 - alpha) * g * g
    centered: a = a + (1 - alpha) * (g - a); avg = sqrt(s - a * a) + eps, else sqrt(s) + eps
    momentum > 0: b = momentum * b + g / avg; param -= lr * b
    otherwise:    param -= lr * g / avg
"""
from .. import ops
from ._checks import check_nonnegative, check_positive, check_unit_interval
from .optimizer import Optimizer
from ..autograd import functional as F


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

    def _slot(self, slots, name, param):
        s = slots.get(name)
        if s is None:
            s = slots[name] = ops.zeros_like(param)
        return s

    def _update(self, param, grad, slots, lr):
        a = self.alpha
        slots["step"] = slots.get("step", 0) + 1
        if self.weight_decay:
            grad = F.add(grad, F.mul(param, self.weight_decay))
        sq = self._slot(slots, "square_avg", param)
        F.mul(sq, a, out=sq)
        tmp = F.mul(grad, grad)
        F.mul(tmp, 1.0 - a, out=tmp)
        F.add(sq, tmp, out=sq)
        if self.centered:
            ga = self._slot(slots, "grad_avg", param)
            F.sub(grad, ga, out=tmp)
            F.mul(tmp, 1.0 - a, out=tmp)
            F.add(ga, tmp, out=ga)
            F.mul(ga, ga, out=tmp)
            avg = F.sub(sq, tmp, out=tmp)
            F.sqrt(avg, out=avg)
        else:
            avg = F.sqrt(sq, out=tmp)
        F.add(avg, self.eps, out=avg)
        F.true_divide(grad, avg, out=avg)  # g / avg
        if self.momentum > 0:
            buf = self._slot(slots, "momentum_buffer", param)
            F.mul(buf, self.momentum, out=buf)
            F.add(buf, avg, out=buf)
            F.mul(buf, -lr, out=tmp)
        else:
            F.mul(avg, -lr, out=tmp)
        F.add(param, tmp, out=param)


RMSprop = RMSProp  # PyTorch's spelling
