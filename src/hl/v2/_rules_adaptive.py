"""v2's rules with a per-element rate r: AdaGrad, DecayedAdaGrad, RMSProp, AdaDelta."""
from ._rule_base import V2Optimizer, _slot
from ._rules_sgd import _decayed, _descend
from ..autograd import functional as F

class _AdaptiveRule(V2Optimizer):
    has_rate_vector = True

    def __init__(self, schedule, rho=0.95, epsilon=1e-6, **kwargs):
        super().__init__(schedule, **kwargs)
        self.rho = float(rho)
        self.epsilon = float(epsilon)

    def _finish(self, param, grad, slots, lr, momentum, decay, rate):
        direction = _decayed(grad, param, decay)
        F.mul(direction, rate, out=direction)
        _descend(param, direction, slots, lr, momentum)
        return rate


class AdaGradRule(_AdaptiveRule):
    """v2's AdaGrad: s += g^2; r = 1 / sqrt(s + eps) (eps = 1e-6, v2's ada_epsilon)."""

    method = "adagrad"
    rule_slots = ("sum",)
    follows_schedule = False

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        s = _slot(slots, "sum", param)
        rate = F.mul(grad, grad)
        F.add(s, rate, out=s)
        F.add(s, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)


def _decayed_square_sum(s, grad, rho, first):
    """s = rho * s + g^2 on v2's first batch, rho * s + (1 - rho) * g^2 after; returns a
    scratch tensor."""
    sq = F.mul(grad, grad)
    if not first:
        F.mul(sq, 1.0 - rho, out=sq)
    F.mul(s, rho, out=s)
    F.add(s, sq, out=s)
    return sq


class DecayedAdaGradRule(_AdaptiveRule):
    """v2's DecayedAdaGrad: s = rho s + (1 - rho) g^2 (g^2 on the first batch);
    r = 1 / sqrt(s + eps)."""

    method = "decayed_adagrad"
    rule_slots = ("mean_square",)

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        s = _slot(slots, "mean_square", param)
        rate = _decayed_square_sum(s, grad, self.rho, self.step_count == 0)
        F.add(s, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)


class RMSPropRule(_AdaptiveRule):
    """v2's RMSProp (centred): s as DecayedAdaGrad; f = rho f + (1 - rho) g;
    r = 1 / sqrt(s - f^2 + eps)."""

    method = "rmsprop"
    rule_slots = ("mean_square", "mean_grad")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        s = _slot(slots, "mean_square", param)
        f = _slot(slots, "mean_grad", param)
        rate = _decayed_square_sum(s, grad, self.rho, self.step_count == 0)
        F.mul(f, self.rho, out=f)
        F.mul(grad, 1.0 - self.rho, out=rate)
        F.add(f, rate, out=f)
        F.mul(f, f, out=rate)
        F.sub(s, rate, out=rate)
        F.add(rate, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)


class AdaDeltaRule(_AdaptiveRule):
    """v2's AdaDelta: s = rho s + (1 - rho) g^2; r = sqrt((u + eps) / (s + eps));
    u = rho u + (1 - rho) (g r)^2."""

    method = "adadelta"
    rule_slots = ("mean_square", "mean_square_update")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        rho, eps = self.rho, self.epsilon
        s = _slot(slots, "mean_square", param)
        u = _slot(slots, "mean_square_update", param)
        sq = _decayed_square_sum(s, grad, rho, False)
        rate = F.add(u, eps)
        F.add(s, eps, out=sq)
        F.true_divide(rate, sq, out=rate)
        F.sqrt(rate, out=rate)
        F.mul(grad, rate, out=sq)
        F.mul(sq, sq, out=sq)
        F.mul(sq, 1.0 - rho, out=sq)
        F.mul(u, rho, out=u)
        F.add(u, sq, out=u)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)
