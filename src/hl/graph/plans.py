"""Graph mode's runner: a function over tensors (a training step, a forward pass) run as a
recorded plan, one plan per input signature.

Per signature (the shapes, dtypes and devices of the tensor arguments, the other arguments'
values, and what the caller adds: the training flag, which step), in calls:
1. eager: the step runs as ordinary Python (lazy layers build their parameters, optimisers
   create their slots);
2. recorded: the step runs once more with every core call recorded instead of run, on input
   tensors the plan owns (its input slots); then the plan runs once to compute this step;
3. and later: the batch is bound to the input slots (the plans read the batch's tensors in
   place, see ``_bind``), the replay hooks advance the Python state (recording.py) and the
   plan is replayed by one core call, with no Python per op.

The cache is small and bounded (``PlanCache(size)``): the short last batch of an epoch gets
its own plan; a signature past the bound runs eagerly, with one warning. A recording that
meets something a plan cannot hold (a host read such as ``.item()``, a data-dependent shape
such as nonzero) is abandoned, the step runs eagerly, and that signature stays eager, with
one warning naming the op. A plan is only replayed while ``still_valid()`` (given by the
owner at recording time) holds: a swapped parameter tensor, optimiser or layer mode makes it
record again.
"""
import warnings
from collections import OrderedDict

import numpy as np

from .. import _core, errors
from .._tensor import Tensor, _fill, tensor
from . import profiling as _profile
from . import recording

DEFAULT_SIZE = 8


def _flatten(x, leaves):
    """Tensors and arrays of a nested argument go to leaves; returns a hashable picture of
    the structure with each leaf's signature (shape, dtype, device) in its place and the
    other values themselves (they are constants of a plan). (Run at every replay: the common
    kinds are tested first, by exact type.)"""
    t = type(x)
    if t is tuple or t is list:
        parts = [t.__name__]
        for v in x:
            if type(v) is Tensor:  # the usual argument, without a call of its own
                leaves.append(v)
                parts.append(("T", Tensor, v.shape, v._dtype.code, _core.device_key(v._h),
                              v.requires_grad))
            else:
                parts.append(_flatten(v, leaves))
        return tuple(parts)
    if t is Tensor or isinstance(x, Tensor):
        leaves.append(x)
        return ("T", t, x.shape, x._dtype.code, _core.device_key(x._h), x.requires_grad)
    if t is dict:
        return ("D",) + tuple([(k, _flatten(v, leaves)) for k, v in x.items()]) if x else ("D",)
    if isinstance(x, np.ndarray):
        leaves.append(x)
        dt = np.float32 if x.dtype == np.float64 else x.dtype  # as hl.training.to_tensor
        return ("A", x.shape, np.dtype(dt).str)
    if isinstance(x, (list, tuple)):
        return (type(x).__name__,) + tuple(_flatten(v, leaves) for v in x)
    if isinstance(x, dict):
        return ("D",) + tuple((k, _flatten(v, leaves)) for k, v in x.items())
    try:
        hash(x)
    except TypeError:
        raise _Unhashable(type(x).__name__) from None
    return ("V", t, x)


class _Unhashable(Exception):
    pass


def _rebuild(x, slots):
    """x with each tensor/array leaf replaced, in order, by the next input slot."""
    if isinstance(x, (Tensor, np.ndarray)):
        return next(slots)
    if isinstance(x, (list, tuple)):
        return type(x)(_rebuild(v, slots) for v in x)
    if isinstance(x, dict):
        return {k: _rebuild(v, slots) for k, v in x.items()}  # the order _flatten took
    return x


def _slot_for(leaf):
    """A new tensor of the leaf's signature: the plan's input slot."""
    if isinstance(leaf, Tensor):  # of the leaf's class (SINGA's Tensor...) and flags
        h = _core.empty(leaf.shape, leaf.dtype.code, *_core.device_of(leaf._h))
        slot = _fill(object.__new__(type(leaf)), h, leaf.dtype)
        slot.requires_grad, slot.stores_grad = leaf.requires_grad, leaf.stores_grad
        return slot
    return tensor(np.ascontiguousarray(leaf.astype(np.float32) if leaf.dtype == np.float64
                                       else leaf))


def _bind(core, k, slot, leaf):
    """Makes this call's value of an input what the plan's slot k reads. A tensor is bound:
    the plan (and the plans linked to it: a step's backward) reads the tensor's own memory, no
    copy (the core copies only a tensor of other strides, or one a plan writes), and holds a
    reference to it until the next bind. A numpy array is written into the slot's own memory
    (one copy, as turning it into a tensor would make)."""
    if isinstance(leaf, Tensor):
        _core.plan_bind(core, k, leaf._h)
    else:
        _core.write(slot._h, np.ascontiguousarray(leaf, dtype=slot.dtype.np))


class Plan:
    """One recorded step: the core plan, its input slots, the outputs it writes, the Python
    hooks to run before each replay and the owner's validity check. A recording that was cut
    (recording.cut) gives its segments: ``core`` is then the first (the one that declared
    the input slots) and ``then`` the [(fn, next core plan)] that follow it."""

    __slots__ = ("core", "then", "slots", "outputs", "hooks", "still_valid", "size", "name",
                 "after")

    def __init__(self, core, slots, outputs, hooks, still_valid, segments=(), name=None,
                 after=()):
        cores = [c for c, _ in segments] + [core]
        self.core = cores[0]
        self.then = [(fn, c) for (_, fn), c in zip(segments, cores[1:])]
        self.name = name  # in hl.graph.profile's tables
        self.slots = slots
        self.outputs = outputs
        self.hooks = hooks
        self.after = after  # recording.after_run's functions
        self.still_valid = still_valid
        self.size = sum(_core.plan_size(c) for c in cores)

    def cores(self):
        return [self.core] + [c for _, c in self.then]

    def prepare(self, options, *later):
        """Before the first run: the PLAN_* options on every core plan, and every core plan
        after the first (this plan's later segments, and those of ``later``: a step's
        backward) linked to the first's input slots, so that binding a batch retargets them
        all (they read it too)."""
        others = [c for p in (self,) + later for c in p.cores()][1:]
        for c in [self.core] + others:
            _core.plan_set_options(c, options)
        if self.slots:
            for c in others:
                _core.plan_link_inputs(self.core, c)

    def run(self, leaves, hooks=True):
        core = self.core
        for k, leaf in enumerate(leaves):
            if type(leaf) is Tensor:  # the common case, without _bind's call
                _core.plan_bind(core, k, leaf._h)
            else:
                _bind(core, k, self.slots[k], leaf)
        if hooks:
            for fn in self.hooks:
                fn()
        if _profile._active:
            _profile._active[0].seen(self, self.name)
        _core.plan_run(core)
        if self.then:
            for fn, later in self.then:
                fn()
                _core.plan_run(later)
        if self.after:
            for fn in self.after:
                fn()
        return self.outputs


class _Entry:
    __slots__ = ("calls", "plan", "second", "eager_reason")

    def __init__(self):
        self.calls = 0
        self.plan = self.second = None
        self.eager_reason = None


class PlanCache:
    """The plans of one function of one owner (a model's training step, its forward...),
    keyed by input signature; at most ``size`` signatures get plans."""

    def __init__(self, what, size=DEFAULT_SIZE, topological=False):
        self.what = what
        self.size = int(size)
        # graph_alg='topological': each plan's calls run in dependency order (libcore's
        # plan/order.c), which gives exactly the results of the recorded order
        self.options = _core.PLAN_TOPOLOGICAL if topological else 0
        self.entries = OrderedDict()
        self._warned_full = False
        self.stats = {"eager": 0, "recorded": 0, "replayed": 0}

    def __len__(self):
        return sum(1 for e in self.entries.values() if e.plan is not None)

    def clear(self):
        self.entries.clear()

    def call(self, fn, args, key=(), validity=None, second=None):
        """fn(*args) through the cache. ``key`` adds to the signature (the training flag...);
        ``validity()`` is called after recording and returns a no-argument callable telling
        whether the plan still fits the owner's state.

        With ``second`` (a function of fn's outputs: a training step's backward and update),
        returns ``(outputs, finish)``: ``finish(True)`` runs second on the outputs (as a plan
        of its own, recorded with the first), ``finish(False)`` leaves it out (fit skips the
        update of a non-finite loss); the caller must call finish once."""
        leaves = []
        try:
            sig = (key, _flatten(args, leaves))
        except _Unhashable as e:
            return self._eager(fn, args, second, f"an argument of type {e} (not hashable)")
        entry = self.entries.get(sig)
        if entry is None:
            if len(self.entries) >= self.size:
                return self._eager(fn, args, second, None, full=True)
            entry = self.entries[sig] = _Entry()
        if entry.eager_reason is not None or entry.calls == 0:
            entry.calls += 1
            return self._eager(fn, args, second, None)
        entry.calls += 1
        plan = entry.plan
        if plan is not None and plan.still_valid():
            self.stats["replayed"] += 1
            outputs = plan.run(leaves)
            if second is None:
                return outputs
            return outputs, lambda run: entry.second.run(()) if run else None
        entry.plan = entry.second = None
        return self._record(entry, fn, args, leaves, validity, second)

    def _record(self, entry, fn, args, leaves, validity, second):
        slots = [_slot_for(leaf) for leaf in leaves]
        rec = recording.begin()
        try:
            for slot in slots:  # slot k is leaf k; reading one on the host is a GraphBreak
                _core.plan_input(slot._h)
            outputs = fn(*_rebuild(args, iter(slots)))
            if second is not None:
                first = (recording.end(), rec)
                rec = recording.begin()
                second(outputs)
        except Exception as e:  # noqa: BLE001 - any failure: abandon, then try eagerly
            recording.abandon()
            out = self._eager(fn, args, second, None)  # a real error raises here, as eagerly
            if getattr(e, "transient", False):
                return out  # this step made what the next recording needs
            entry.eager_reason = _reason(e)
            warnings.warn(f"graph mode: {self.what} runs eagerly for this input signature: "
                          f"{entry.eager_reason}", stacklevel=4)
            return out
        core = recording.end()
        still_valid = validity() if validity is not None else (lambda: True)
        self.stats["recorded"] += 1
        name = f"{self.what} #{self.stats['recorded']}"
        if second is None:
            entry.plan = Plan(core, slots, outputs, rec.replay_hooks, still_valid,
                              rec.segments, name, rec.after_hooks)
            entry.plan.prepare(self.options)
            return entry.plan.run(leaves, hooks=False)  # this step's Python state is advanced
        entry.plan = Plan(first[0], slots, outputs, first[1].replay_hooks, still_valid,
                          first[1].segments, name, first[1].after_hooks)
        entry.second = Plan(core, [], None, rec.replay_hooks, still_valid, rec.segments,
                            f"{name} (backward and update)", rec.after_hooks)
        entry.plan.prepare(self.options, entry.second)  # one bind serves both plans
        entry.plan.run(leaves, hooks=False)

        def finish(run):
            if run:
                entry.second.run((), hooks=False)
            else:  # the recorded update advanced the Python state: put it back
                for fn_ in reversed(rec.abort_hooks):
                    fn_()
        return outputs, finish

    def _eager(self, fn, args, second, reason, full=False):
        if full and not self._warned_full:
            self._warned_full = True
            warnings.warn(f"graph mode: {self.what} has plans for {self.size} input "
                          f"signatures already (the bound); other signatures run eagerly",
                          stacklevel=4)
        elif reason is not None:
            warnings.warn(f"graph mode: {self.what} runs eagerly: {reason}", stacklevel=4)
        self.stats["eager"] += 1
        outputs = fn(*args)
        if second is None:
            return outputs
        return outputs, lambda run: second(outputs) if run else None


def _reason(e):
    if isinstance(e, errors.GraphBreak):
        return str(e)
    if isinstance(e, errors.UnsupportedError) and "record" in str(e):
        return f"{e} (an op whose output shape depends on the data cannot be recorded)"
    return f"recording failed with {type(e).__name__}: {e}"
