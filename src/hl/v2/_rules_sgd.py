"""v2's plain descent: the Momentum rule and the step every rule but Adam's ends with."""
from ..opt import rules
from ._rule_base import V2Optimizer, _zeros


def _descend(opt, param, direction, slots, values, momentum, decay=0.0):
    """v2's sgdUpdate: d = direction (+ decay * param); mom = momentum * mom - lr * d;
    w += mom (without momentum, w -= lr * d)."""
    mom = opt._slot(slots, "momentum", _zeros(param)) if momentum else None
    rules.v2_momentum(param, direction, mom, values["neg_lr"], decay, momentum)


class MomentumRule(V2Optimizer):
    """v2's Momentum (learning_method 'momentum'; sparse_momentum updates dense gradients
    the same way)."""

    method = "momentum"

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        _descend(self, param, grad, slots, values, momentum, decay)
