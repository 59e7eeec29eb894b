"""v2's plain descent: the Momentum rule and the step every rule but Adam's ends with."""
from .. import ops
from ._rule_base import V2Optimizer, _slot

def _decayed(grad, param, decay):
    """g + decay * w, a new tensor."""
    return ops.add(grad, ops.mul(param, decay)) if decay else ops.mul(grad, 1.0)


def _descend(param, direction, slots, lr, momentum):
    """v2's sgdUpdate: mom = momentum * mom - lr * direction; w += mom (without momentum,
    w -= lr * direction). direction is overwritten."""
    ops.mul(direction, -lr, out=direction)
    if momentum:
        mom = _slot(slots, "momentum", param)
        ops.mul(mom, momentum, out=mom)
        ops.add(mom, direction, out=mom)
        direction = mom
    ops.add(param, direction, out=param)


class MomentumRule(V2Optimizer):
    """v2's Momentum (learning_method 'momentum'; sparse_momentum updates dense gradients
    the same way)."""

    method = "momentum"

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        _descend(param, _decayed(grad, param, decay), slots, lr, momentum)
