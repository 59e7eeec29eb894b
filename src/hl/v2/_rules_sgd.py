"""v2's plain descent: the Momentum rule and the step every rule but Adam's ends with."""
from ._rule_base import V2Optimizer, _slot
from ..autograd import functional as F

def _decayed(grad, param, decay):
    """g + decay * w, a new tensor."""
    return F.add(grad, F.mul(param, decay)) if decay else F.mul(grad, 1.0)


def _descend(param, direction, slots, lr, momentum):
    """v2's sgdUpdate: mom = momentum * mom - lr * direction; w += mom (without momentum,
    w -= lr * direction). direction is overwritten."""
    F.mul(direction, -lr, out=direction)
    if momentum:
        mom = _slot(slots, "momentum", param)
        F.mul(mom, momentum, out=mom)
        F.add(mom, direction, out=mom)
        direction = mom
    F.add(param, direction, out=param)


class MomentumRule(V2Optimizer):
    """v2's Momentum (learning_method 'momentum'; sparse_momentum updates dense gradients
    the same way)."""

    method = "momentum"

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        _descend(param, _decayed(grad, param, decay), slots, lr, momentum)
