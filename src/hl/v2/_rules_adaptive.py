"""v2's rules with a per-element rate r: AdaGrad, DecayedAdaGrad, RMSProp, AdaDelta."""
from ..autograd import functional as F
from ..opt import rules
from ._rule_base import V2Optimizer, _zeros
from ._rules_sgd import _descend


class _AdaptiveRule(V2Optimizer):
    has_rate_vector = True

    def __init__(self, schedule, rho=0.95, epsilon=1e-6, **kwargs):
        super().__init__(schedule, **kwargs)
        self.rho = float(rho)
        self.epsilon = float(epsilon)

    def _finish(self, param, grad, slots, values, momentum, decay, rate):
        direction = rules.with_l2(grad, param, decay, fresh=True)
        F.mul(direction, rate, out=direction)
        _descend(self, param, direction, slots, values, momentum)
        return rate

    def _decayed_square_sum(self, slots, name, param, grad):
        """s = rho * s + g^2 on v2's first batch, rho * s + (1 - rho) * g^2 after (a plan is
        never recorded on the first batch: that one runs eagerly); returns a scratch."""
        s = self._slot(slots, name, _zeros(param))
        first = self.step_count == 0
        return s, rules.ema_square(s, grad, self.rho, weight=1.0 if first else None)


class AdaGradRule(_AdaptiveRule):
    """v2's AdaGrad: s += g^2; r = 1 / sqrt(s + eps) (eps = 1e-6, v2's ada_epsilon)."""

    method = "adagrad"
    rule_slots = ("sum",)
    follows_schedule = False

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        s = self._slot(slots, "sum", _zeros(param))
        rate = rules.accumulate_square(s, grad)
        F.add(s, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, values, momentum, decay, rate)


class DecayedAdaGradRule(_AdaptiveRule):
    """v2's DecayedAdaGrad: s = rho s + (1 - rho) g^2 (g^2 on the first batch);
    r = 1 / sqrt(s + eps)."""

    method = "decayed_adagrad"
    rule_slots = ("mean_square",)

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        s, rate = self._decayed_square_sum(slots, "mean_square", param, grad)
        F.add(s, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, values, momentum, decay, rate)


class RMSPropRule(_AdaptiveRule):
    """v2's RMSProp (centred): s as DecayedAdaGrad; f = rho f + (1 - rho) g;
    r = 1 / sqrt(s - f^2 + eps)."""

    method = "rmsprop"
    rule_slots = ("mean_square", "mean_grad")

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        s, rate = self._decayed_square_sum(slots, "mean_square", param, grad)
        f = self._slot(slots, "mean_grad", _zeros(param))
        rules.ema(f, grad, self.rho, scratch=rate)
        F.mul(f, f, out=rate)
        F.sub(s, rate, out=rate)
        F.add(rate, self.epsilon, out=rate)
        F.rsqrt(rate, out=rate)
        return self._finish(param, grad, slots, values, momentum, decay, rate)


class AdaDeltaRule(_AdaptiveRule):
    """v2's AdaDelta: s = rho s + (1 - rho) g^2; r = sqrt((u + eps) / (s + eps));
    u = rho u + (1 - rho) (g r)^2."""

    method = "adadelta"
    rule_slots = ("mean_square", "mean_square_update")

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        rho, eps = self.rho, self.epsilon
        s = self._slot(slots, "mean_square", _zeros(param))
        u = self._slot(slots, "mean_square_update", _zeros(param))
        sq = rules.ema_square(s, grad, rho)
        rate = F.add(u, eps)
        F.add(s, eps, out=sq)
        F.true_divide(rate, sq, out=rate)
        F.sqrt(rate, out=rate)
        F.mul(grad, rate, out=sq)
        rules.ema_square(u, sq, rho, scratch=sq)
        return self._finish(param, grad, slots, values, momentum, decay, rate)
