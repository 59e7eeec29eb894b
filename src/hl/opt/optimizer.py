"""Optimizer: the base of hl's optimisers, usable SINGA-style and PyTorch-style.

SINGA style: the optimiser knows no parameters up front; the backward pass hands it each
(parameter, gradient) pair as soon as the gradient is complete::

    opt = hl.opt.SGD(lr=0.1, momentum=0.9)
    opt.backward_and_update(loss)       # or opt(loss)

PyTorch style: give the parameters (an iterable of tensors, or a dict name -> tensor) and
step from their ``.grad``::

    opt = hl.opt.Adam(lr=1e-3, params=model.get_params())
    opt.zero_grad(); loss.backward(); opt.step()

Updates write into the parameter's own memory (ops with ``out=``), so the parameter object
and its storage stay the same: layers, and numpy views of the values, keep seeing them.
Per-parameter state ("slots": momentum buffers, moment estimates) are tensors updated in
place too, created on a parameter's first update.

**The step.** ``step_count`` counts completed calls to ``step()``; ``backward_and_update``
calls ``step()`` once after updating every parameter. The learning rate of an update is
``schedule(step_count)`` (see hl.opt.schedules), so the first update of a run uses
``schedule(0)``. Optimisers that count per-parameter updates (Adam's bias correction,
AdaGrad's lr decay) keep that count as a slot, as PyTorch does.

**States.** ``get_states()`` gives plain values and tensors: ``"step"``, the schedule's own
values under ``"lr_schedule.<key>"``, and every slot under ``"<param name>:<slot>"``. The
name is ``param.name`` (layers set hierarchical names such as ``conv1.W``); a parameter
without a name gets the key under which it was passed in ``params`` (its dict key, or
``param<i>`` for its position) or, SINGA-style, ``param<i>`` in the order parameters were
first updated. ``set_states`` puts all of it back, so training resumes exactly.
"""
import numbers
import weakref
from itertools import compress, repeat
from operator import is_

import numpy as np

from .. import _core, errors, ops
from .._tensor import Tensor, as_tensor
from ..autograd import functional as F
from ..autograd.engine import backward as _backward
from ..autograd.mode import no_grad
from ..graph.recording import StepValues, on_abort_once, on_replay, on_replay_each
from .clip import _clip_coefficient
from ._checks import check_nonnegative
from .schedules import as_schedule

_SCHEDULE_PREFIX = "lr_schedule."
_PER_STEP = ("step_count", "_version", "_unnamed")
_PLAIN = (int, float, bool, type(None))  # the attribute types graph_stamp holds
_MISSING = object()  # graph_check's value of a deleted attribute


class Optimizer:
    """Base class. A subclass lists its per-parameter slots in ``slot_names`` and implements
    ``_update(param, grad, slots, lr)``, writing into param and the slot tensors in place."""

    slot_names = ()
    count_slots = ()  # slots that are plain integer counts, not tensors
    per_step_attrs = ()  # attributes that change every step (not configuration)

    def __init__(self, lr, params=None, clip_norm=None):
        self.lr = lr  # through the property: a float, a schedule or a callable
        self.step_count = 0
        if clip_norm is not None and not (isinstance(clip_norm, numbers.Real) and clip_norm > 0):
            raise errors.ValueError(f"{self.name}: clip_norm must be a number > 0 or None, got "
                                    f"{clip_norm!r}")
        self.clip_norm = None if clip_norm is None else float(clip_norm)
        self._slots = {}      # key -> {slot name: Tensor or int}
        self._step_values = {}  # key -> StepValues: per-step values a recorded plan reads
        self._version = 0     # bumped when slots are created or replaced (plans then re-record)
        self._unchecked = set()  # keys whose slots came from set_states, checked on first use
        self._slot_device = {}  # key -> (kind, index) its slot tensors are on
        self._keys = {}       # id(param) -> (weakref to param, key)
        self._owners = {}     # key -> weakref to the param that has it
        self._unnamed = 0
        self.params = None
        if params is not None:
            self.params = self._collect(params)

    @property
    def name(self):
        return type(self).__name__

    # ---- learning rate ----------------------------------------------------------------

    @property
    def lr(self):
        """The learning rate of the next update: the schedule at ``step_count``. Assign a
        float, a schedule or a callable to change the schedule."""
        return self.schedule(self.step_count)

    @lr.setter
    def lr(self, value):
        if isinstance(value, (list, tuple, dict, Tensor)) or (
                hasattr(value, "__next__") and not callable(value)):
            raise errors.ValueError(
                f"{self.name}: lr must be a number, a schedule or a callable; to give "
                f"parameters PyTorch-style pass them as params=..., e.g. "
                f"{self.name}(lr=0.01, params=model.get_params())")
        if isinstance(value, numbers.Real):  # named here, not by the schedule it becomes
            value = check_nonnegative(value, self.name, "lr")
        self.schedule = as_schedule(value)

    # ---- parameters and their keys ----------------------------------------------------

    def _collect(self, params):
        if isinstance(params, Tensor):
            params = [params]
        if isinstance(params, dict):
            items = list(params.items())
        else:
            items = []
            for i, p in enumerate(params):
                if isinstance(p, dict):
                    raise errors.UnsupportedError(
                        f"{self.name}: parameter groups (dicts in params) are not supported; "
                        f"use one optimiser per group")
                items.append((p.name if getattr(p, "name", None) else f"param{i}", p))
        out = []
        for key, p in items:
            if not isinstance(p, Tensor):
                raise errors.ValueError(f"{self.name}: params must be hl Tensors, got "
                                        f"{type(p).__name__} for {key!r}")
            if any(q is p for q in out):
                raise errors.ValueError(f"{self.name}: parameter {key!r} is given twice in "
                                        f"params; it would be updated twice per step")
            self._bind(p, str(key))
            out.append(p)
        return out

    def _bind(self, param, key):
        owner = self._owners.get(key)
        other = owner() if owner is not None else None
        if other is not None and other is not param:
            raise errors.ValueError(
                f"{self.name}: two different parameters are named {key!r}; their optimiser "
                f"state would mix. Give them distinct names (layers do this from attribute "
                f"names) or use one optimiser per model")
        if owner is not None and other is None and key in self._slots:
            self._unchecked.add(key)  # a new tensor under an old name: check the slots' shapes
        self._owners[key] = weakref.ref(param)
        self._keys[id(param)] = (weakref.ref(param), key)
        return key

    def _key(self, param):
        entry = self._keys.get(id(param))
        if entry is not None and entry[0]() is param:
            return entry[1]
        if param.name:
            return self._bind(param, param.name)
        while f"param{self._unnamed}" in self._owners:
            self._unnamed += 1
        return self._bind(param, f"param{self._unnamed}")

    def _known_params(self):
        if self.params is not None:
            return list(self.params)
        return [p for p in (r() for r in self._owners.values()) if p is not None]

    # ---- updating ---------------------------------------------------------------------

    def update(self, param, grad):
        """Updates one parameter in place from its gradient, at the current step's lr."""
        grad = self._gradient_of(param, grad)
        with no_grad():
            key = self._key(param)
            slots = self._slots_of(key, param)
            self._note_recording()
            values = self._host_update(slots, self.lr)
            if not _core.recording():
                self._update(param, grad, slots, values)
                return
            # recorded: the values are 0-d tensors the plan reads, and a replay hook writes
            # each later step's values there. Values that are the step's alone (the base
            # rule's -lr: no per-parameter count) are one tensor per dtype and device that
            # every update reads, written once per replay; values with per-parameter counts
            # (Adam's) are the parameter's own
            shared = type(self)._host_update is Optimizer._host_update
            held = (None, param.dtype.code, _core.device_key(param._h)) if shared else key
            step_values = self._step_values.get(held)
            if step_values is None:
                step_values = self._step_values[held] = StepValues()
            self._update(param, grad, slots,
                         {k: step_values.get(k, v, param) for k, v in values.items()})
            on_replay_each(self._replay_updates, held, once=shared)

    def _replay_updates(self, keys):
        """The host side of recorded updates (consecutive ones, in their order), before a
        replay: advances the counts as the eager updates would and writes this step's values
        where the plan reads them. The lr is read once: nothing between these updates
        changes the step count (lr schedules are functions of it). A key is a parameter's,
        or (None, dtype, device) for values every parameter of that dtype and device shares."""
        lr, host, slots, values = self.lr, self._host_update, self._slots, self._step_values
        for key in keys:
            step_values = values[key]
            for k, v in host(slots[key] if type(key) is str else None, lr).items():
                step_values.set(k, v)

    def _host_update(self, slots, lr):
        """The Python side of one parameter's update: advances its counts (count_slots) and
        returns the per-step values the device side reads ({name: float}), computed in
        double precision exactly as the eager arithmetic always did."""
        return {"neg_lr": -lr}

    def _note_recording(self):
        """While a plan is recorded: registers (once) how to undo this recording's changes to
        the Python state, should the recording be abandoned."""
        if _core.recording():
            saved = self._python_state()
            on_abort_once(self, lambda: self._set_python_state(saved))

    def _python_state(self):
        """The Python values a step changes: the step count and the per-parameter counts."""
        return (self.step_count, {k: {n: v for n, v in s.items() if n in self.count_slots}
                                  for k, s in self._slots.items()})

    def _set_python_state(self, saved):
        self.step_count = saved[0]
        for key, slots in self._slots.items():
            counts = saved[1].get(key, {})
            for name in self.count_slots:
                if name in counts:
                    slots[name] = counts[name]
                else:
                    slots.pop(name, None)

    def _slot(self, slots, name, make):
        """The slot `name`, created by make() on first use."""
        s = slots.get(name)
        return s if s is not None else self._new_slot(slots, name, make)

    def _new_slot(self, slots, name, make):
        """Creates a slot (make() builds its tensor). Creating one while a plan is recorded
        would put its initialisation into every replay: graph mode runs that step eagerly."""
        if _core.recording():
            raise errors.GraphBreak(f"{self.name}: the optimiser slot {name!r} would be "
                                    f"created while a plan is recorded", op=f"{self.name} slot",
                                    transient=True)
        self._version += 1
        s = slots[name] = make()
        return s

    def graph_stamp(self):
        """What a recorded plan depends on besides tensors: the optimiser's configuration
        (hyperparameters are constants in a plan; the lr is not) and its slots' version."""
        return (self._version,) + tuple(
            (k, v) for k, v in self.__dict__.items()
            if type(v) in _PLAIN and k not in _PER_STEP and k not in self.per_step_attrs)

    def graph_check(self):
        """A no-argument callable telling whether ``graph_stamp()`` still equals its value
        now: what a replay checks. It compares the attributes' types and the plain values
        with C-level map/compare (no stamp is built per replay) and falls back to the stamp
        only when an attribute came or went."""
        d, stamp = self.__dict__, self.graph_stamp()
        skip = _PER_STEP + tuple(self.per_step_attrs)
        names = tuple(k for k in d if k not in skip)
        now = tuple(d[k] for k in names)
        kinds = tuple(map(type, now))
        plain = tuple(k in _PLAIN for k in kinds)
        values = tuple(compress(now, plain))
        version, size, missing = self._version, len(d), repeat(_MISSING)

        def still():
            if self._version != version:  # (a wrapper's may be its inner optimiser's)
                return False
            cur = tuple(map(d.get, names, missing))  # a deleted name reads as _MISSING
            if not all(map(is_, cur, now)):  # something was assigned: compare as the stamp
                if tuple(map(type, cur)) != kinds or tuple(compress(cur, plain)) != values:
                    return False
            return len(d) == size or self.graph_stamp() == stamp  # one was added
        return still

    def _gradient_of(self, param, grad):
        """grad as a tensor of param's shape and dtype (a mismatched shape raises)."""
        if not isinstance(grad, Tensor):
            grad = as_tensor(grad, dtype=param.dtype, device=param.device)
        if tuple(grad.shape) != tuple(param.shape):
            raise errors.ShapeError(
                f"{self.name}.update: the gradient of {param.name or 'a parameter'} has shape "
                f"{tuple(grad.shape)}, the parameter {tuple(param.shape)}")
        return grad.astype(param.dtype) if grad.dtype is not param.dtype else grad

    def _update(self, param, grad, slots, values):
        """The device side: writes param and the slot tensors in place. ``values`` holds what
        _host_update returned, as Python floats eagerly or as 0-d tensors (read at replay)
        while a plan is being recorded."""
        raise NotImplementedError

    def step(self):
        """Ends a training step. PyTorch-style (params given), it first updates every
        parameter that has a ``.grad`` (clipped by ``clip_norm`` when set); SINGA-style it only
        advances the step count that lr schedules read."""
        if self.params is not None:
            pairs = [(p, p.grad) for p in self.params if p.grad is not None]
            self._update_all(pairs)
        self._count_step()

    def _update_all(self, pairs):
        if self.clip_norm is None:
            for p, g in pairs:
                self.update(p, g)
            return
        with no_grad():
            _, coef = _clip_coefficient([g for _, g in pairs], self.clip_norm, 2.0)
        for p, g in pairs:
            with no_grad():
                g = F.mul(g, coef)  # a new tensor: the gradient may be a shared, broadcast view
            self.update(p, g)

    def backward_and_update(self, loss, dy=None):
        """SINGA's training step: runs backward from loss and updates each parameter as its
        gradient arrives (all gradients are gathered first when clip_norm is set, since the
        clipping needs their global norm), then advances the step count once."""
        if self.clip_norm is None:
            for p, g in _backward(loss, dy):
                self.update(p, g)
        else:
            self._update_all(list(_backward(loss, dy)))
        self._count_step()  # not self.step(): PyTorch-style it would update from .grad again

    def _count_step(self):
        """step_count += 1, also at each replay of a recorded step."""
        self._note_recording()
        self._advance_step()
        on_replay(self._advance_step)

    def _advance_step(self):
        self.step_count += 1

    def __call__(self, loss, dy=None):
        """``opt(loss)``: SINGA's shorthand for ``backward_and_update(loss)``."""
        return self.backward_and_update(loss, dy=dy)  # by name: DistOpt takes a threshold second

    def zero_grad(self, set_to_none=True):
        """Clears ``.grad`` of the parameters given in params (or, SINGA-style, of those this
        optimiser has updated)."""
        for p in self._known_params():
            if set_to_none or p.grad is None:
                p.grad = None
            else:
                with no_grad():
                    p.grad = ops.zeros_like(p.grad)

    # ---- slots ------------------------------------------------------------------------

    def _slots_of(self, key, param):
        slots = self._slots.get(key)
        if slots is None:
            slots = self._slots[key] = {}
        elif key in self._unchecked:
            self._adopt_loaded(key, param, slots)
        device = _core.device_of(param._h)  # one C call: the check every update pays
        if self._slot_device.get(key) != device:
            self._follow_device(key, param, slots, device)
        return slots

    def _follow_device(self, key, param, slots, device):
        """The parameter is on another device than its slots (Module.to moved it after the
        optimiser made them): the slots follow it, as PyTorch's load_state_dict casts the
        state to each parameter's device. New tensors: a plan that held the old ones
        records again. A move while a plan is recorded would be recorded into every replay:
        that step runs eagerly (the move happens there)."""
        moving = [n for n, v in slots.items()
                  if isinstance(v, Tensor) and _core.device_of(v._h) != device]
        if moving:
            if _core.recording():
                raise errors.GraphBreak(f"{self.name}: the optimiser state of {key!r} would "
                                        f"move to {param.device} while a plan is recorded",
                                        op=f"{self.name} slot", transient=True)
            for name in moving:
                slots[name] = slots[name].to(param.device)
            self._version += 1
        self._slot_device[key] = device

    def _adopt_loaded(self, key, param, slots):
        """Slots from set_states meet their parameter: check shapes, move to its device."""
        for name, v in slots.items():
            if isinstance(v, Tensor):
                if tuple(v.shape) != tuple(param.shape):
                    raise errors.ShapeError(
                        f"{self.name}: the loaded state {key}:{name} has shape "
                        f"{tuple(v.shape)}, the parameter {key} {tuple(param.shape)}")
                slots[name] = as_tensor(v, dtype=param.dtype, device=param.device)
        self._unchecked.discard(key)
        self._version += 1

    # ---- states -----------------------------------------------------------------------

    def get_states(self):
        """Everything needed to resume: ``step``, the schedule's values and each parameter's
        slots (copies, so later updates do not change what was taken)."""
        states = {"step": self.step_count}
        for k, v in self.schedule.get_states().items():
            states[_SCHEDULE_PREFIX + k] = v
        for key, slots in self._slots.items():
            for name, v in slots.items():
                states[f"{key}:{name}"] = v.clone() if isinstance(v, Tensor) else v
        return states

    def set_states(self, states):
        """Restores what get_states gave (tensors may come back as numpy arrays). Unknown
        slot names, and with params given, unknown parameter names, raise a ValueError."""
        if "step" not in states:
            raise errors.ValueError(f"{self.name}.set_states: no 'step' entry; the states "
                                    f"have {sorted(states)[:8]}")
        schedule, slots, bad = {}, {}, []
        known = None if self.params is None else {self._key(p) for p in self.params}
        for k, v in states.items():
            if k == "step":
                continue
            if k.startswith(_SCHEDULE_PREFIX):
                schedule[k[len(_SCHEDULE_PREFIX):]] = v
                continue
            key, sep, slot = k.rpartition(":")
            if not sep or slot not in self.slot_names or (known is not None and key not in known):
                bad.append(k)
                continue
            slots.setdefault(key, {})[slot] = (int(np.asarray(v)) if slot in self.count_slots
                                                else _restore(v))
        if bad:
            raise errors.ValueError(
                f"{self.name}.set_states: unexpected entries {sorted(bad)}; {self.name} keeps "
                f"the slots {list(self.slot_names)} per parameter"
                + ("" if known is None else f" for the parameters {sorted(known)}"))
        self.schedule.set_states(schedule)
        self.step_count = int(states["step"])
        self._slots = slots
        self._unchecked = set(slots)
        self._slot_device = {}
        self._version += 1

    def __repr__(self):
        return f"{self.name}(lr={self.schedule!r}, step={self.step_count})"

    # ---- pickling (hl.save) -----------------------------------------------------------

    def __getstate__(self):
        """The weak references of the parameter-key maps cannot be pickled: they travel as
        (parameter, key) pairs and are rebuilt on load."""
        state = self.__dict__.copy()
        state["_keys"] = [(ref(), key) for ref, key in self._keys.values() if ref() is not None]
        del state["_owners"]
        state.pop("_step_values", None)  # derived per-step values: rebuilt on use
        return state

    def __setstate__(self, state):
        """Checked (hl.load admits it): the parameter-key pairs and the slots must be what
        __getstate__ writes, tensors keyed by strings."""
        pairs = state.pop("_keys", None) if isinstance(state, dict) else None
        if not isinstance(pairs, list) or not all(
                isinstance(p, (tuple, list)) and len(p) == 2 and isinstance(p[0], Tensor) and
                isinstance(p[1], str) for p in pairs) or \
                not all(isinstance(k, str) for k in state):
            raise errors.ValueError(f"{type(self).__name__}: a pickled optimiser's state must "
                                    f"hold '_keys' as (tensor, name) pairs")
        slots = state.get("_slots", {})
        if not isinstance(slots, dict) or not all(
                isinstance(k, str) and isinstance(v, dict) and
                all(isinstance(n, str) and isinstance(t, (Tensor, int)) for n, t in v.items())
                for k, v in slots.items()):
            raise errors.ValueError(f"{type(self).__name__}: a pickled optimiser's slots must "
                                    f"map parameter names to {{slot name: tensor}}")
        self.__dict__.update(state)
        self._step_values = {}
        self._version = getattr(self, "_version", 0) + 1
        self._unchecked = set(self._slots)  # every slot's shape is checked before its use
        self._slot_device = {}  # and every slot meets its parameter's device
        self._keys, self._owners = {}, {}
        for param, key in pairs:
            self._bind(param, key)  # slots meeting their parameter again are re-checked
    __setstate__.checks_its_state = True


def _restore(v):
    """A tensor slot as the optimiser keeps it: a copy (later updates must not write into the
    caller's states)."""
    if isinstance(v, Tensor):
        return v.clone()
    return as_tensor(np.array(v))
