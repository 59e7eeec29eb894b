"""v2's Adam and Adamax (they ignore the schedule, L2 decay and momentum, as v2 did)."""
import math

from ..autograd import functional as F
from ..opt import rules
from ._rule_base import V2Optimizer, _zeros


class _AdamBase(V2Optimizer):
    follows_schedule = False
    applies_l2 = False

    def __init__(self, schedule, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(schedule, **kwargs)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)


class AdamRule(_AdamBase):
    """v2's Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)."""

    method = "adam"
    rule_slots = ("moment", "second_moment")

    def _rule_values(self, lr):
        t = self.step_count + 1
        return {"neg_alpha": -(lr * math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t))}

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        m = self._slot(slots, "moment", _zeros(param))
        v = self._slot(slots, "second_moment", _zeros(param))
        rules.v2_adam(param, grad, m, v, values["neg_alpha"], self.beta1, self.beta2,
                      self.epsilon)


class AdamaxRule(_AdamBase):
    """v2's Adamax: m = b1 m + (1 - b1) g; u = max(b2 u, |g|); w -= lr / (1 - b1^t) * m / u
    (elements with u = 0 do not move)."""

    method = "adamax"
    rule_slots = ("moment", "inf_norm")

    def _rule_values(self, lr):
        return {"neg_step": -lr / (1.0 - self.beta1 ** (self.step_count + 1))}

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        m = self._slot(slots, "moment", _zeros(param))
        tmp = rules.ema(m, grad, self.beta1)
        u = self._slot(slots, "inf_norm", _zeros(param))
        F.mul(u, self.beta2, out=u)
        F.maximum(u, F.abs(grad), out=u)
        denom = F.where(F.greater(u, 0.0), u, 1.0)  # u = 0 only where m = 0 too
        F.true_divide(m, denom, out=tmp)
        rules.descend(param, tmp, values["neg_step"], out=tmp)
