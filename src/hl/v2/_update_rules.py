"""The hl optimisers behind hl.v2.optimizer: PaddlePaddle v2's update rules, one hl.opt.Optimizer
subclass per learning method, with v2's batch protocol, per-parameter settings, gradient
clipping, L1/L2 decay and model averaging (that protocol is described in _rule_base.py).

**The rules** (g the clipped gradient, w the parameter, mom the momentum buffer; where a rule
has a per-element rate r, its direction is ``r * (g + decay * w)``, and ``_descend`` finishes
with ``mom = momentum * mom - lr * direction; w += mom``):

- Momentum:        direction = g + decay * w
- AdaGrad:         s += g^2; r = 1 / sqrt(s + eps)
- DecayedAdaGrad:  s = rho * s + (1 - rho) * g^2 (s = g^2 on the first batch); r = 1 / sqrt(s + eps)
- RMSProp:         s as DecayedAdaGrad; f = rho * f + (1 - rho) * g; r = 1 / sqrt(s - f^2 + eps)
- AdaDelta:        s = rho * s + (1 - rho) * g^2; r = sqrt((u + eps) / (s + eps));
                   u = rho * u + (1 - rho) * (g * r)^2
- Adam:            m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
                   w -= lr * sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)
- Adamax:          m as Adam; u = max(b2 u, |g|); w -= lr / (1 - b1^t) * m / u
  (t = step_count + 1, the batch number from 1, the same for every parameter, as in v2.)

v2's quirks, kept so that old scripts train as they did: AdaGrad, Adam and Adamax ignore the
learning-rate schedule (their rate stays learning_rate); Adam and Adamax ignore L2 decay
(PaddlePaddle issue #5836) and momentum. With an L1 rate (decay_rate_l1 > 0), v2 moved the
decay out of the rule: after the update, ``w = sign(w) * max(|w| - lr * l1 * r, 0)`` then
``w *= 1 / (1 + lr * decay * r)`` (r = 1 for the rules without one), and momentum must be 0.
One deliberate difference: where Adamax's u is exactly 0 (g was 0 at every step so far) v2
divided 0 by 0; here that element does not move.
"""
# Where each part lives (this module gathers them under the names hl.v2.optimizer uses):
#   _rule_base.py        V2Optimizer (batch protocol, per-parameter settings, L1, averaging,
#                        states) and ParameterConfig
#   _rules_sgd.py        Momentum, and _descend, the step the other rules end with
#   _rules_adaptive.py   AdaGrad, DecayedAdaGrad, RMSProp, AdaDelta
#   _rules_adam.py       Adam, Adamax
from ._rule_base import AVERAGE_SLOTS, ParameterConfig, V2Optimizer
from ._rules_adam import AdamaxRule, AdamRule
from ._rules_adaptive import AdaDeltaRule, AdaGradRule, DecayedAdaGradRule, RMSPropRule
from ._rules_sgd import MomentumRule
from .model_average import AverageWindow

__all__ = ["ParameterConfig", "V2Optimizer", "MomentumRule", "AdaGradRule",
           "DecayedAdaGradRule", "RMSPropRule", "AdaDeltaRule", "AdamRule", "AdamaxRule",
           "AverageWindow"]
