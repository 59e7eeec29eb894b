"""The hl optimisers behind hl.v2.optimizer: PaddlePaddle v2's update rules, one hl.opt.Optimizer
subclass per learning method, with v2's batch protocol, per-parameter settings, gradient
clipping, L1/L2 decay and model averaging.

**A batch.** ``start_batch(batch_size)`` adds the batch size to the sample count n and fixes
the batch's global learning rate from the schedule at (n, pass): n includes the current
batch, as v2's updater counted. ``update(param, grad)`` then updates each parameter, and
``finish_batch()`` (also ``step()``; ``backward_and_update(loss)`` calls it at its end) closes
the batch: it adds the new values to the model-average sums and advances ``step_count``, the
number of finished batches. ``update`` or ``backward_and_update`` without ``start_batch``
open a batch of 0 samples. ``finish_pass()`` counts a pass (the 'pass_manual' schedule and the
model average's window read it).

**Per parameter** (found by ``param.name`` in the build's param_configs): lr = global lr *
learning_rate; decay = its decay_rate, else the optimiser's L2 rate; momentum = its momentum,
else the optimiser's; static parameters are never touched. The gradient is first clipped
element-wise to [-t, t] when a clipping threshold t > 0 is set (the parameter's, else the
global one), as v2's OptimizerWithGradientClipping did.

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
import contextlib
import math
import numbers
import warnings

from .. import errors, ops
from ..autograd.engine import backward as _backward
from ..autograd.mode import no_grad
from ..opt.optimizer import Optimizer
from .lr_schedule import LearningRateSchedule
from .model_average import AverageWindow

__all__ = ["ParameterConfig", "V2Optimizer", "MomentumRule", "AdaGradRule",
           "DecayedAdaGradRule", "RMSPropRule", "AdaDeltaRule", "AdamRule", "AdamaxRule",
           "AverageWindow"]

AVERAGE_SLOTS = ("average_sum1", "average_sum2", "average_sum3")
_STATE_PREFIX = "v2."


class ParameterConfig:
    """A parameter's v2 settings, as ParamAttr gives them. ``decay_rate`` None means the
    optimiser's L2 rate; ``momentum`` None the optimiser's momentum;
    ``gradient_clipping_threshold`` None (or 0) the optimiser's threshold."""

    __slots__ = ("learning_rate", "decay_rate", "is_static", "momentum", "decay_rate_l1",
                 "gradient_clipping_threshold")

    def __init__(self, learning_rate=1.0, decay_rate=None, is_static=False, momentum=None,
                 decay_rate_l1=0.0, gradient_clipping_threshold=None):
        self.learning_rate = learning_rate
        self.decay_rate = decay_rate
        self.is_static = is_static
        self.momentum = momentum
        self.decay_rate_l1 = decay_rate_l1
        self.gradient_clipping_threshold = gradient_clipping_threshold

    def __repr__(self):
        return "ParameterConfig(" + ", ".join(f"{k}={getattr(self, k)!r}"
                                              for k in self.__slots__) + ")"


class _Resolved:
    """A parameter's settings with the optimiser's defaults filled in."""

    __slots__ = ("lr", "decay", "l1", "momentum", "clip", "static")


def _field(cfg, name, default):
    value = cfg.get(name, default) if isinstance(cfg, dict) else getattr(cfg, name, default)
    return default if value is None else value


def _real(value, who, what, minimum=0.0):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value) or value < minimum:
        raise errors.ValueError(f"{who}: {what} must be a finite number >= {minimum:g}, got "
                                f"{value!r}")
    return float(value)


class V2Optimizer(Optimizer):
    """The base of the v2 rules (see the module docstring). Built by the configuration
    classes of hl.v2.optimizer (``Momentum(...).build(param_configs)``), not directly."""

    method = None            # v2's learning_method
    rule_slots = ()          # the rule's own slots
    follows_schedule = True  # False: v2 used learning_rate, whatever the schedule
    applies_l2 = True        # False: v2's rule ignored the L2 rate (Adam, Adamax)
    has_rate_vector = False  # the rule has a per-element rate r (v2's PARAMETER_LEARNING_RATE)

    def __init__(self, schedule, param_configs=None, decay_rate=0.0, momentum=0.0,
                 gradient_clipping_threshold=0.0, model_average=None, params=None):
        super().__init__(schedule)
        self.slot_names = self.rule_slots + ("momentum",) + (
            AVERAGE_SLOTS if model_average is not None else ())
        self.decay_rate = _real(decay_rate, self.name, "the L2 rate")
        self.momentum = _real(momentum, self.name, "momentum")
        self.gradient_clipping_threshold = _real(gradient_clipping_threshold or 0.0, self.name,
                                                 "gradient_clipping_threshold")
        self.param_configs = dict(param_configs or {})
        self._resolved = {}
        for key in self.param_configs:  # check every configuration now, not mid-training
            self._settings(key)
        self.average = model_average
        self.num_samples = 0
        self.pass_id = 0
        self._in_batch = False
        self._applied = None
        self._warned_empty_batch = False
        if params is not None:
            items = params.items() if isinstance(params, dict) else (
                (p.name, p) for p in params)
            for key, p in items:
                self._bind(p, p.name or str(key))

    # ---- learning rate ----------------------------------------------------------------

    @property
    def lr(self):
        """The global learning rate of the current (or last) batch; before the first batch,
        learning_rate. Assigning a number replaces the v2 schedule by that constant rate
        (what hl's lr callbacks do)."""
        return self._batch_lr

    @lr.setter
    def lr(self, value):
        if isinstance(value, LearningRateSchedule):
            self.schedule = value
        elif isinstance(value, numbers.Real) and not isinstance(value, bool):
            self.schedule = LearningRateSchedule(value, "constant", who=self.name)
        else:
            raise errors.ValueError(f"{self.name}: lr must be a number (a constant rate), got "
                                    f"{type(value).__name__}; v2 schedules are set with "
                                    f"learning_rate_schedule= on the optimizer")
        self._batch_lr = self.schedule.learning_rate

    # ---- batches and passes -----------------------------------------------------------

    def start_batch(self, batch_size):
        """Opens a batch of batch_size samples: n += batch_size, then the batch's global
        learning rate is the schedule at (n, pass)."""
        if self._in_batch:
            raise errors.ValueError(
                f"{self.name}.start_batch: the previous batch is still open; end it with "
                f"finish_batch() (backward_and_update ends its batch itself)")
        if isinstance(batch_size, bool) or not isinstance(batch_size, numbers.Integral) or \
                batch_size < 0:
            raise errors.ValueError(f"{self.name}.start_batch: batch_size must be an integer "
                                    f">= 0, got {batch_size!r}")
        self.num_samples += int(batch_size)
        self._batch_lr = (self.schedule(self.num_samples, self.pass_id)
                          if self.follows_schedule else self.schedule.learning_rate)
        if self.average is not None:
            self.average.start_batch()
        self._in_batch = True

    def _ensure_batch(self):
        if self._in_batch:
            return
        if self.follows_schedule and self.schedule.counts_samples and \
                not self._warned_empty_batch:
            warnings.warn(f"{self.name}: a batch was updated without start_batch(batch_size), "
                          f"so it counts 0 samples and the {self.schedule.name!r} learning-rate "
                          f"schedule does not advance", stacklevel=3)
            self._warned_empty_batch = True
        self.start_batch(0)

    def finish_batch(self):
        """Closes the batch: the model average adds the new values, step_count advances."""
        self._ensure_batch()
        if self.average is not None:
            self._accumulate_average()
            self.average.finish_batch()
        self.step_count += 1
        self._in_batch = False

    def step(self):
        """hl's name for finish_batch (SINGA style: update each parameter, then step())."""
        self.finish_batch()

    def backward_and_update(self, loss, dy=None):
        """Backward from loss, each parameter updated as its gradient arrives, then
        finish_batch(). Call start_batch(batch_size) before it."""
        self._ensure_batch()
        for p, g in _backward(loss, dy):
            self.update(p, g)
        self.finish_batch()

    def start_pass(self, pass_id=None):
        """Starts a pass; pass_id, when given, sets the pass number the schedules read."""
        if pass_id is not None:
            if isinstance(pass_id, bool) or not isinstance(pass_id, numbers.Integral) or \
                    pass_id < 0:
                raise errors.ValueError(f"{self.name}.start_pass: pass_id must be an integer "
                                        f">= 0, got {pass_id!r}")
            self.pass_id = int(pass_id)

    def finish_pass(self):
        if self._in_batch:
            raise errors.ValueError(f"{self.name}.finish_pass: a batch is still open; call "
                                    f"finish_batch() first")
        self.pass_id += 1
        if self.average is not None:
            self.average.finish_pass()

    # ---- per-parameter settings -------------------------------------------------------

    def _settings(self, key):
        s = self._resolved.get(key)
        if s is not None:
            return s
        cfg = self.param_configs.get(key, ParameterConfig())
        who = f"{self.name} (parameter {key!r})"
        s = _Resolved()
        s.static = bool(_field(cfg, "is_static", False))
        s.lr = _real(_field(cfg, "learning_rate", 1.0), who, "learning_rate")
        s.decay = _real(_field(cfg, "decay_rate", self.decay_rate), who, "decay_rate")
        s.l1 = _real(_field(cfg, "decay_rate_l1", 0.0), who, "decay_rate_l1")
        s.momentum = _real(_field(cfg, "momentum", self.momentum), who, "momentum")
        clip = _real(_field(cfg, "gradient_clipping_threshold", 0.0), who,
                     "gradient_clipping_threshold")
        s.clip = clip if clip > 0 else self.gradient_clipping_threshold
        if s.l1 and s.momentum and not s.static:
            raise errors.ValueError(f"{who}: v2 cannot combine an L1 rate with momentum "
                                    f"({s.momentum}); set the parameter's momentum to 0")
        self._resolved[key] = s
        return s

    # ---- updating ---------------------------------------------------------------------

    def update(self, param, grad):
        """Updates one parameter in place by v2's rule, at the batch's learning rate."""
        if self._applied is not None:
            raise errors.ValueError(f"{self.name}.update: the averaged parameters are in "
                                    f"place; call restore() (or leave averaged()) first")
        grad = self._gradient_of(param, grad)
        with no_grad():
            key = self._key(param)
            s = self._settings(key)
            if s.static:
                return
            self._ensure_batch()
            if s.clip > 0:
                grad = ops.clip(grad, -s.clip, s.clip)  # a new tensor: grad may be shared
            slots = self._slots_of(key, param)
            if self.average is not None:
                self._average_slots(slots, param)  # before the update: see there
            lr = self._batch_lr * s.lr
            decay = s.decay if (self.applies_l2 and not s.l1) else 0.0
            rate = self._update(param, grad, slots, lr, s.momentum, decay)
            if s.l1:
                self._regularize(param, lr, s, rate)

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        """The rule: writes param and slots in place; returns the per-element rate r (the
        rules that have one) for the L1 regulariser."""
        raise NotImplementedError

    def _regularize(self, param, lr, s, rate):
        """v2's regulariser, applied after the update when the parameter has an L1 rate."""
        r = rate if self.has_rate_vector else None
        lam = lr * s.l1 if r is None else ops.mul(r, lr * s.l1)
        shrunk = ops.maximum(ops.sub(ops.abs(param), lam), 0.0)
        ops.mul(ops.sign(param), shrunk, out=param)
        if s.decay:
            scale = lr * s.decay
            factor = (1.0 / (1.0 + scale) if r is None
                      else ops.reciprocal(ops.add(ops.mul(r, scale), 1.0)))
            ops.mul(param, factor, out=param)

    # ---- model averaging --------------------------------------------------------------

    def _average_slots(self, slots, param):
        """The sums of a parameter the average meets for the first time: it held its current
        value through the earlier batches of both windows (it was not updated), so they
        start at value * (batches of the current window before this one) and value *
        (batches of the old window)."""
        if "average_sum1" in slots:
            return
        w = self.average
        before = max(w.num_accumulates - 1, 0)  # always called inside a batch
        slots["average_sum1"] = ops.mul(param, float(before))
        slots["average_sum2"] = ops.zeros_like(param)
        slots["average_sum3"] = ops.mul(param, float(w.old_num_accumulates))

    def _live_params(self):
        """(key, param, slots) of every non-static parameter bound to this optimiser."""
        out = []
        for key, ref in list(self._owners.items()):
            param = ref()
            if param is None or self._settings(key).static:
                continue
            out.append((key, param, self._slots_of(key, param)))
        return out

    def _accumulate_average(self):
        w = self.average
        move, restart = w.move_sum1(), w.too_long()
        with no_grad():
            for _, param, slots in self._live_params():
                self._average_slots(slots, param)
                s1, s2, s3 = (slots[k] for k in AVERAGE_SLOTS)
                ops.add(s1, param, out=s1)
                if move:
                    ops.add(s2, s1, out=s2)
                    ops.mul(s1, 0.0, out=s1)
                if restart:
                    ops.add(s1, s2, out=s3)
                    ops.mul(s1, 0.0, out=s1)
                    ops.mul(s2, 0.0, out=s2)

    def apply_average(self, params=None):
        """Puts the averaged values into the parameters (all of them, or those given),
        keeping the training values for restore(). Without model_average, or before any
        batch, nothing changes."""
        if self._applied is not None:
            raise errors.ValueError(f"{self.name}.apply_average: the averaged values are "
                                    f"already in place; call restore() first")
        self._applied = {}
        if self.average is None or self.average.count == 0:
            return
        wanted = None if params is None else {
            id(p) for p in (params.values() if isinstance(params, dict) else params)}
        scale = 1.0 / self.average.count
        with no_grad():
            for key, param, slots in self._live_params():
                if "average_sum1" not in slots or (wanted is not None and
                                                   id(param) not in wanted):
                    continue
                self._applied[key] = (param, param.clone())
                total = ops.add(slots["average_sum1"], slots["average_sum2"])
                ops.add(total, slots["average_sum3"], out=total)
                ops.mul(total, scale, out=total)
                param.copy_(total)

    def restore(self):
        """Puts back the training values that apply_average() saved."""
        if self._applied is None:
            return
        with no_grad():
            for param, saved in self._applied.values():
                param.copy_(saved)
        self._applied = None

    @contextlib.contextmanager
    def averaged(self, params=None):
        """``with opt.averaged(): ...`` runs its body with the averaged parameter values
        (v2's apply/restore around testing and saving); a no-op without model_average."""
        self.apply_average(params)
        try:
            yield self
        finally:
            self.restore()

    # ---- states -----------------------------------------------------------------------

    def get_states(self):
        """hl's states (step and slots) plus the sample count, the pass, the batch's rate
        and the model-average counters, under ``v2.*``. Take them between batches."""
        states = super().get_states()
        states[_STATE_PREFIX + "num_samples"] = self.num_samples
        states[_STATE_PREFIX + "pass_id"] = self.pass_id
        states[_STATE_PREFIX + "lr"] = self._batch_lr
        if self.average is not None:
            for k, v in self.average.get_states().items():
                states[_STATE_PREFIX + "average." + k] = v
        return states

    def set_states(self, states):
        own = {k[len(_STATE_PREFIX):]: v for k, v in states.items()
               if k.startswith(_STATE_PREFIX)}
        missing = [k for k in ("num_samples", "pass_id", "lr") if k not in own]
        average = {k[len("average."):]: v for k, v in own.items() if k.startswith("average.")}
        if self.average is not None and len(average) != len(AverageWindow._COUNTERS):
            missing.append("average.*")
        if missing:
            raise errors.ValueError(
                f"{self.name}.set_states: the states lack {missing}; they must come from "
                f"get_states() of a v2 optimizer configured the same way")
        super().set_states({k: v for k, v in states.items()
                            if not k.startswith(_STATE_PREFIX)})
        self.num_samples = int(own["num_samples"])
        self.pass_id = int(own["pass_id"])
        self._batch_lr = float(own["lr"])
        if self.average is not None:
            self.average.set_states(average)
        self._in_batch = False

    def __repr__(self):
        return (f"{self.name}({self.schedule!r}, step={self.step_count}, "
                f"samples={self.num_samples}, pass={self.pass_id})")


# ---- the rules ------------------------------------------------------------------------

def _slot(slots, name, param):
    s = slots.get(name)
    if s is None:
        s = slots[name] = ops.zeros_like(param)
    return s


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


class _AdamBase(V2Optimizer):
    follows_schedule = False
    applies_l2 = False

    def __init__(self, schedule, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(schedule, **kwargs)
        self.beta1 = float(beta1)
        self.beta2 = float(beta2)
        self.epsilon = float(epsilon)

    def _first_moment(self, slots, grad, param):
        m = _slot(slots, "moment", param)
        ops.mul(m, self.beta1, out=m)
        tmp = ops.mul(grad, 1.0 - self.beta1)
        ops.add(m, tmp, out=m)
        return m, tmp


class AdamRule(_AdamBase):
    """v2's Adam: m = b1 m + (1 - b1) g; v = b2 v + (1 - b2) g^2;
    w -= lr sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)."""

    method = "adam"
    rule_slots = ("moment", "second_moment")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        t = self.step_count + 1
        b2 = self.beta2
        alpha = lr * math.sqrt(1.0 - b2 ** t) / (1.0 - self.beta1 ** t)
        m, tmp = self._first_moment(slots, grad, param)
        v = _slot(slots, "second_moment", param)
        ops.mul(v, b2, out=v)
        ops.mul(grad, grad, out=tmp)
        ops.mul(tmp, 1.0 - b2, out=tmp)
        ops.add(v, tmp, out=v)
        ops.sqrt(v, out=tmp)
        ops.add(tmp, self.epsilon, out=tmp)
        ops.true_divide(m, tmp, out=tmp)
        ops.mul(tmp, -alpha, out=tmp)
        ops.add(param, tmp, out=param)


class AdamaxRule(_AdamBase):
    """v2's Adamax: m = b1 m + (1 - b1) g; u = max(b2 u, |g|); w -= lr / (1 - b1^t) * m / u
    (elements with u = 0 do not move)."""

    method = "adamax"
    rule_slots = ("moment", "inf_norm")

    def _update(self, param, grad, slots, lr, momentum=0.0, decay=0.0):
        t = self.step_count + 1
        m, tmp = self._first_moment(slots, grad, param)
        u = _slot(slots, "inf_norm", param)
        ops.mul(u, self.beta2, out=u)
        ops.maximum(u, ops.abs(grad), out=u)
        denom = ops.where(ops.greater(u, 0.0), u, 1.0)  # u = 0 only where m = 0 too
        ops.true_divide(m, denom, out=tmp)
        ops.mul(tmp, -lr / (1.0 - self.beta1 ** t), out=tmp)
        ops.add(param, tmp, out=param)
