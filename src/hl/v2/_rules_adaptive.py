"""v2's rules with a per-element rate r: AdaGrad, DecayedAdaGrad, RMSProp, AdaDelta."""
from .. import ops
from ._rule_base import V2Optimizer, _slot
from ._rules_sgd import _decayed, _descend

class _AdaptiveRule(V2Optimizer):
    has_rate_vector = True

    def __init__(self, schedule, rho=0.95, epsilon=1e-6, **kwargs):
        super().__init__(schedule, **kwargs)
        self.rho = float(rho)
        self.epsilon = float(epsilon)

    def _finish(self, param, grad, slots, lr, momentum, decay, rate):
        direction = _decayed(grad, param, decay)
        ops.mul(direction, rate, out=direction)
        _descend(param, direction, slots, lr, momentum)
        return rate


class AdaGradRule(_AdaptiveRule):
    """v2's AdaGrad: s += g^2; r = 1 / sqrt(s + eps) (eps = 1e-6, v2's ada_epsilon)."""

    method = "adagrad"
    rule_slots = ("sum",)
    follows_schedule = False

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        s = _slot(slots, "sum", param)
        rate = ops.mul(grad, grad)
        ops.add(s, rate, out=s)
        ops.add(s, self.epsilon, out=rate)
        ops.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)


def _decayed_square_sum(s, grad, rho, first):
    """s = rho * s + g^2 on v2's first batch, rho * s + (1 - rho) * g^2 after; returns a
    scratch tensor."""
    sq = ops.mul(grad, grad)
    if not first:
        ops.mul(sq, 1.0 - rho, out=sq)
    ops.mul(s, rho, out=s)
    ops.add(s, sq, out=s)
    return sq


class DecayedAdaGradRule(_AdaptiveRule):
    """v2's DecayedAdaGrad: s = rho s + (1 - rho) g^2 (g^2 on the first batch);
    r = 1 / sqrt(s + eps)."""

    method = "decayed_adagrad"
    rule_slots = ("mean_square",)

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        s = _slot(slots, "mean_square", param)
        rate = _decayed_square_sum(s, grad, self.rho, self.step_count == 0)
        ops.add(s, self.epsilon, out=rate)
        ops.rsqrt(rate, out=rate)
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
        ops.mul(f, self.rho, out=f)
        ops.mul(grad, 1.0 - self.rho, out=rate)
        ops.add(f, rate, out=f)
        ops.mul(f, f, out=rate)
        ops.sub(s, rate, out=rate)
        ops.add(rate, self.epsilon, out=rate)
        ops.rsqrt(rate, out=rate)
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
        rate = ops.add(u, eps)
        ops.add(s, eps, out=sq)
        ops.true_divide(rate, sq, out=rate)
        ops.sqrt(rate, out=rate)
        ops.mul(grad, rate, out=sq)
        ops.mul(sq, sq, out=sq)
        ops.mul(sq, 1.0 - rho, out=sq)
        ops.mul(u, rho, out=u)
        ops.add(u, sq, out=u)
        return self._finish(param, grad, slots, lr, momentum, decay, rate)
