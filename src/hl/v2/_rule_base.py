"""The base of hl.v2's optimisers (see _update_rules.py for the rules themselves): v2's batch
protocol, per-parameter settings, gradient clipping, L1/L2 decay, model averaging and states.

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
"""
import contextlib
import math
import numbers
import warnings

from .. import _core, errors, ops
from ..autograd import functional as F
from ..autograd.engine import backward as _backward
from ..autograd.mode import no_grad
from ..graph.recording import StepValues, on_replay, on_replay_each
from ..opt.optimizer import Optimizer
from .lr_schedule import LearningRateSchedule
from .model_average import AverageWindow

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
    per_step_attrs = ("num_samples", "pass_id", "_in_batch", "_batch_lr", "_warned_empty_batch")

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
        self._note_recording()
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
        on_replay(lambda: self.start_batch(batch_size))  # inside a recorded step

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
        self._note_recording()
        if self.average is not None and _core.recording():
            raise errors.GraphBreak(f"{self.name}: model averaging decides per batch which "
                                    f"sums move (v2's windows), which a plan cannot record",
                                    op="v2 model averaging")
        if self.average is not None:
            self._accumulate_average()
            self.average.finish_batch()
        self.step_count += 1
        self._in_batch = False
        on_replay(self.finish_batch)  # inside a recorded step

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
                grad = F.clip(grad, -s.clip, s.clip)  # a new tensor: grad may be shared
            slots = self._slots_of(key, param)
            if self.average is not None:
                self._average_slots(slots, param)  # before the update: see there
            self._note_recording()
            step_values = self._step_values.get(key)
            if step_values is None:
                step_values = self._step_values[key] = StepValues()
            values = {k: step_values.get(k, v, param)
                      for k, v in self._host_values(s).items()}
            decay = s.decay if (self.applies_l2 and not s.l1) else 0.0
            rate = self._update(param, grad, slots, values, s.momentum, decay)
            if s.l1:
                self._regularize(param, values, s, rate)
            on_replay_each(self._replay_updates, key)

    def _python_state(self):
        return (super()._python_state(), self.num_samples, self.pass_id, self._in_batch,
                self._batch_lr, self.average.get_states() if self.average else None)

    def _set_python_state(self, saved):
        base, self.num_samples, self.pass_id, self._in_batch, self._batch_lr, avg = saved
        super()._set_python_state(base)
        if avg is not None:
            self.average.set_states(avg)

    def _replay_updates(self, keys):
        for key in keys:
            self._replay_update(key)

    def _replay_update(self, key):
        step_values = self._step_values[key]
        for k, v in self._host_values(self._settings(key)).items():
            step_values.set(k, v)

    def _host_values(self, s):
        """The per-step values of one parameter's update (settings s), computed in double
        precision on the host: the rule's own (_rule_values) and the L1 regulariser's."""
        lr = self._batch_lr * s.lr
        values = self._rule_values(lr)
        if s.l1:
            values["l1"] = lr * s.l1
            if s.decay:
                values["l2"] = lr * s.decay
                values["l2_factor"] = 1.0 / (1.0 + lr * s.decay)
        return values

    def _rule_values(self, lr):
        return {"neg_lr": -lr}

    def _update(self, param, grad, slots, values, momentum=0.0, decay=0.0):
        """The rule: writes param and slots in place; returns the per-element rate r (the
        rules that have one) for the L1 regulariser. ``values``: what _rule_values gave,
        as floats or, while a plan is recorded, 0-d tensors."""
        raise NotImplementedError

    def _regularize(self, param, values, s, rate):
        """v2's regulariser, applied after the update when the parameter has an L1 rate."""
        r = rate if self.has_rate_vector else None
        lam = values["l1"] if r is None else F.mul(r, values["l1"])
        shrunk = F.maximum(F.sub(F.abs(param), lam), 0.0)
        F.mul(F.sign(param), shrunk, out=param)
        if s.decay:
            factor = (values["l2_factor"] if r is None
                      else F.reciprocal(F.add(F.mul(r, values["l2"]), 1.0)))
            F.mul(param, factor, out=param)

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
        slots["average_sum1"] = F.mul(param, float(before))
        slots["average_sum2"] = ops.zeros_like(param)
        slots["average_sum3"] = F.mul(param, float(w.old_num_accumulates))

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
                F.add(s1, param, out=s1)
                if move:
                    F.add(s2, s1, out=s2)
                    F.mul(s1, 0.0, out=s1)
                if restart:
                    F.add(s1, s2, out=s3)
                    F.mul(s1, 0.0, out=s1)
                    F.mul(s2, 0.0, out=s2)

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
                total = F.add(slots["average_sum1"], slots["average_sum2"])
                F.add(total, slots["average_sum3"], out=total)
                F.mul(total, scale, out=total)
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


# ---- for the rules ------------------------------------------------------------------

def _zeros(param):
    return lambda: ops.zeros_like(param)
