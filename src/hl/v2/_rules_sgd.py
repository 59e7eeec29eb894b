"""v2's plain descent: the Momentum rule and the step every rule but Adam's ends with."""
from ..autograd import functional as F
from ..opt import rules
from ._rule_base import V2Optimizer, _zeros


def _descend(opt, param, direction, slots, values, momentum):
    """v2's sgdUpdate: mom = momentum * mom - lr * direction; w += mom (without momentum,
    w -= lr * direction). direction is overwritten."""
    if not momentum:
        rules.descend(param, direction, values["neg_lr"], out=direction)
        return
    F.mul(direction, values["neg_lr"], out=direction)
    mom = rules.heavy_ball(opt._slot(slots, "momentum", _zeros(param)), direction, momentum)
    F.add(param, mom, out=param)


class MomentumRule(V2Optimizer):
    """v2's Momentum (learning_method 'momentum'; sparse_momentum updates dense gradients
    the same way)."""

    method = "momentum"

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        _descend(self, param, rules.with_l2(grad, param, decay, fresh=True), slots, values,
                 momentum)
