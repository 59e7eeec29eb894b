"""SINGA's opt module over hl.opt.

``SGD``, ``Adam``, ``RMSProp`` and ``AdaGrad`` are hl's optimisers under SINGA's signatures
(``RMSProp(lr, rho, epsilon)``, ``Adam(lr, beta_1, beta_2, epsilon)`` ...) and SINGA's
interface: ``opt(loss)`` runs backward and updates every parameter, then steps;
``opt.apply(name, param, grad)`` updates one parameter; ``opt.step()`` advances the step count;
``lr_value`` and ``step_counter`` are tensors; the learning rate may be a number or a
``DecayScheduler`` (``Constant``, ``ExponentialDecay``), which hl's optimisers read at each
step. ``DistOpt`` is hl's distributed optimiser (hl.distributed.DistOpt).

Differences (docs/singa.md): RMSProp and AdaGrad divide by sqrt(s) + eps, hl's rule (PyTorch's),
where SINGA's divides by sqrt(s + eps); with eps = 1e-8 the two differ by at most about 1e-8
relative to sqrt(s) once s > 1e-8.
"""
import numpy as np

from .. import errors
from .. import opt as _opt
from ..opt import schedules as _schedules
from . import tensor as _tensor
from ..autograd import backward as _hl_backward
from ..distributed import DistOpt  # noqa: F401 - SINGA's opt.DistOpt is hl's


class DecayScheduler(_schedules.Schedule):
    """SINGA's learning-rate schedule: ``sched(step)`` with a step Tensor gives a (1,) Tensor,
    with an int (as hl's optimisers call it) a float."""

    def __init__(self, init_value):
        self.init_value = float(init_value)

    def __call__(self, step):
        if isinstance(step, _tensor.Tensor):
            s = float(np.asarray(_tensor.to_numpy(step)).reshape(-1)[0])
            return _tensor.Tensor((1,), step.device).set_value(self.value(s))
        return float(self.value(step))

    def call(self, step):
        return self(step)


class Constant(DecayScheduler):
    def value(self, step):
        return self.init_value


class ExponentialDecay(DecayScheduler):
    """``init_value * decay_rate ** (step / decay_steps)`` (floored exponent with staircase):
    hl's ExponentialDecay."""

    def __init__(self, init_value, decay_steps, decay_rate, staircase=False):
        super().__init__(init_value)
        self.decay_steps, self.decay_rate, self.staircase = decay_steps, decay_rate, staircase
        self._hl = _schedules.ExponentialDecay(self.init_value, decay_rate, int(decay_steps),
                                               staircase)

    def value(self, step):
        return self._hl.value(step)


def _number(v, what, who):
    """A SINGA hyper-parameter (a number, or a scheduler read at its initial value)."""
    if isinstance(v, DecayScheduler):
        return v.init_value
    if isinstance(v, (int, float, np.floating, np.integer)) and not isinstance(v, bool):
        return float(v)
    raise errors.ValueError(f"{who}: {what} must be a number or a DecayScheduler, got {v!r}")


def _lr(lr, who):
    if isinstance(lr, DecayScheduler):
        return lr
    if isinstance(lr, (int, float, np.floating, np.integer)) and not isinstance(lr, bool):
        return Constant(lr)
    raise errors.ValueError(f"{who}: lr must be a number or a DecayScheduler, got {lr!r}")


class _Singa:
    """SINGA's Optimizer interface over an hl optimiser (mixed in before it)."""

    def _singa_init(self, dtype):
        self.dtype = _tensor._dtype(dtype)

    @property
    def step_counter(self):
        return _tensor.Tensor((1,)).set_value(self.step_count)

    @step_counter.setter
    def step_counter(self, t):
        self.step_count = int(float(np.asarray(_tensor.to_numpy(t)).reshape(-1)[0]))

    @property
    def lr_value(self):
        return _tensor.Tensor((1,)).set_value(self.lr)

    def __call__(self, loss):
        """Backward from loss, every parameter updated as its gradient arrives, one step."""
        self.call(loss)
        self.step()

    def backward_and_update(self, loss, dy=None):
        self.call(loss, dy)
        self.step()

    def call(self, loss, dy=None):
        for p, g in _hl_backward(loss, dy):  # hl's walk: records freed as it goes
            self.apply(p.name, p, g)

    def _singa_key(self, param, name):
        """The optimiser's key for a parameter: its name, unless another live parameter has
        it already (SINGA names the parameters of layers kept in closures, outside any
        model, just "W" and "b"; SINGA then mixes their momentum, hl keeps them apart)."""
        if name is None:
            return None
        owner = self._owners.get(name)
        other = owner() if owner is not None else None
        if other is None or other is param:
            return name
        entry = self._keys.get(id(param))
        if entry is not None and entry[0]() is param:
            return entry[1]
        n = 1
        while f"{name}#{n}" in self._owners and self._owners[f"{name}#{n}"]() is not None:
            n += 1
        return f"{name}#{n}"

    def apply(self, param_name, param_value, param_grad):
        """Updates param_value in place from param_grad; the optimiser's state for it is kept
        under param_name."""
        if tuple(param_value.shape) != tuple(param_grad.shape):
            raise errors.ShapeError(f"{type(self).__name__}.apply: {param_name}: param "
                                    f"{tuple(param_value.shape)} and grad "
                                    f"{tuple(param_grad.shape)} differ")
        key = self._singa_key(param_value, None if param_name is None else str(param_name))
        if key is not None:
            self._bind(param_value, key)
        _opt.Optimizer.update(self, param_value, param_grad)

    def update(self, param, grad):
        self.apply(param.name, param, grad)

    def step(self):
        self.step_count += 1

    def get_states(self):
        states = _opt.Optimizer.get_states(self)
        states["step_counter"] = float(self.step_count)
        return states

    def set_states(self, states):
        states = dict(states)
        if "step_counter" in states:
            n = int(float(np.asarray(states.pop("step_counter")).reshape(-1)[0]))
            states.setdefault("step", n)
        _opt.Optimizer.set_states(self, states)

    def device_check(self, *inputs):
        for t in inputs[1:]:
            if t.device != inputs[0].device and hasattr(t, "to_device"):
                t.to_device(inputs[0].device)


class Optimizer(_Singa, _opt.Optimizer):
    """SINGA's base class: ``Optimizer(lr, dtype=float32)``; subclasses implement apply."""

    def __init__(self, lr, dtype=_tensor.float32):
        _opt.Optimizer.__init__(self, _lr(lr, "Optimizer"))
        self._singa_init(dtype)

    def apply(self, param_name, param_value, param_grad):
        raise NotImplementedError(f"{type(self).__name__} defines no apply()")


class SGD(_Singa, _opt.SGD):
    def __init__(self, lr=0.1, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 dtype=_tensor.float32):
        _opt.SGD.__init__(self, _lr(lr, "SGD"), _number(momentum, "momentum", "SGD"),
                          _number(dampening, "dampening", "SGD"),
                          _number(weight_decay, "weight_decay", "SGD"), bool(nesterov))
        self._singa_init(dtype)


class RMSProp(_Singa, _opt.RMSProp):
    def __init__(self, lr=0.1, rho=0.9, epsilon=1e-8, weight_decay=0, dtype=_tensor.float32):
        _opt.RMSProp.__init__(self, _lr(lr, "RMSProp"), _number(rho, "rho", "RMSProp"),
                              _number(epsilon, "epsilon", "RMSProp"),
                              _number(weight_decay, "weight_decay", "RMSProp"))
        self._singa_init(dtype)


class AdaGrad(_Singa, _opt.AdaGrad):
    def __init__(self, lr=0.1, epsilon=1e-8, weight_decay=0, dtype=_tensor.float32):
        _opt.AdaGrad.__init__(self, _lr(lr, "AdaGrad"),
                              weight_decay=_number(weight_decay, "weight_decay", "AdaGrad"),
                              eps=_number(epsilon, "epsilon", "AdaGrad"))
        self._singa_init(dtype)


class Adam(_Singa, _opt.Adam):
    def __init__(self, lr=0.001, beta_1=0.9, beta_2=0.999, epsilon=1e-8, weight_decay=0,
                 dtype=_tensor.float32):
        _opt.Adam.__init__(self, _lr(lr, "Adam"), _number(beta_1, "beta_1", "Adam"),
                           _number(beta_2, "beta_2", "Adam"), _number(epsilon, "epsilon", "Adam"),
                           _number(weight_decay, "weight_decay", "Adam"))
        self._singa_init(dtype)


__all__ = ["DecayScheduler", "Constant", "ExponentialDecay", "Optimizer", "SGD", "RMSProp",
           "AdaGrad", "Adam", "DistOpt"]
