"""v2's Adam and Adamax (they ignore the schedule, L2 decay and momentum, as v2 did)."""
import math

from ._rule_base import V2Optimizer, _slot
from ..autograd import functional as F

class _AdamBase(V2Optimizer):
    follows_schedule = False
    applies_l2 = False

    def __init__(self, schedule, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(schedule, **kwargs)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)

    def _first_moment(self, slots, grad, param):
        m = _slot(slots, "moment", param)
        F.mul(m, self.beta1, out=m)
        tmp = F.mul(grad, 1.0 - self.beta1)
        F.add(m, tmp, out=m)
        return m, tmp


class AdamRule(_AdamBase):
    """v2's Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)."""

    method = "adam"
    rule_slots = ("moment", "second_moment")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        t = self.step_count + 1
        b2 = self.beta2
        alpha = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - self.beta1 ** t)
        m, tmp = self._first_moment(slots, grad, param)
        v = _slot(slots, "second_moment", param)
        F.mul(v, b2, out=v)
        F.mul(grad, grad, out=tmp)
        F.mul(tmp, 1.0 - b2, out=tmp)
        F.add(v, tmp, out=v)
        F.sqrt(v, out=tmp)
        F.add(tmp, self.epsilon, out=tmp)
        F.true_divide(m, tmp, out=tmp)
        F.mul(tmp, -alpha, out=tmp)
        F.add(param, tmp, out=param)


class AdamaxRule(_AdamBase):
    """v2's Adamax: m = b1 m + (1 - b1) g; u = max(b2 u, |g|); w -= lr / (1 - b1^t) * m / u
    (elements with u = 0 do not move)."""

    method = "adamax"
    rule_slots = ("moment", "inf_norm")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        t = self.step_count + 1
        m, tmp = self._first_moment(slots, grad, param)
        u = _slot(slots, "inf_norm", param)
        F.mul(u, self.beta2, out=u)
        F.maximum(u, F.abs(grad), out=u)
        denom = F.where(F.greater(u, 0.0), u, 1.0)  # u = 0 only where m = 0 too
        F.true_divide(m, denom, out=tmp)
        F.mul(tmp, -lr / (1.0 - self.beta1 ** t), out=tmp)
        F.add(param, tmp, out=param)
