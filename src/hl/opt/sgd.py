"""Stochastic gradient descent with momentum, Nesterov momentum, dampening and L2 weight
decay: torch.optim.SGD's update, step for step."""
from .. import errors, ops
from . import rules
from ._checks import check_nonnegative
from .optimizer import Optimizer


class SGD(Optimizer):
    """``SGD(lr=0.01, momentum=0, dampening=0, weight_decay=0, nesterov=False)``.

    Per update, with d = grad + weight_decay * param:
    the buffer b is d on a parameter's first update, then ``b = momentum * b +
    (1 - dampening) * d``; the step direction is ``d + momentum * b`` (nesterov) or b; the
    parameter moves by ``-lr * direction``. Without momentum the direction is d.
    Slot: ``momentum_buffer`` (only when momentum > 0).
    """

    slot_names = ("momentum_buffer",)

    def __init__(self, lr=0.01, momentum=0.0, dampening=0.0, weight_decay=0.0, nesterov=False,
                 *, params=None, clip_norm=None):
        super().__init__(lr, params, clip_norm)
        self.momentum = check_nonnegative(momentum, "SGD", "momentum")
        self.dampening = float(dampening)
        self.weight_decay = check_nonnegative(weight_decay, "SGD", "weight_decay")
        self.nesterov = bool(nesterov)
        if self.nesterov and (self.momentum <= 0 or self.dampening != 0):
            raise errors.ValueError(f"SGD: Nesterov momentum needs momentum > 0 and dampening "
                                    f"0, got momentum={momentum!r}, dampening={dampening!r}")

    def _update(self, param, grad, slots, values):
        buf, first = None, False
        if self.momentum:
            buf = slots.get("momentum_buffer")
            if buf is None:  # set to d by its first update
                buf = self._new_slot(slots, "momentum_buffer", lambda: ops.zeros_like(param))
                first = True
        rules.sgd(param, grad, buf, values["neg_lr"], self.weight_decay, self.momentum,
                  self.dampening, self.nesterov, first)
        if first and ops.optim.skipped():
            # hl.amp skipped this first update, which wrote nothing: the buffer is made again
            # by the next one, as if this step had not happened (PyTorch's GradScaler does not
            # call step() at all). Slots are made eagerly only, so the flag's read is eager too.
            del slots["momentum_buffer"]
            self._version += 1
