"""What Python code does while a plan is being recorded, beyond the core calls the plan keeps.

A recorded step runs its Python once; each replay runs only the core calls. Python state that
a step changes (an optimiser's step count, Adam's per-parameter counts) and the per-step values
derived from it (the learning rate of this step, bias corrections) therefore register here:
- ``on_replay(fn)``: fn runs before every later replay, in registration order, so the host
  side of each update advances exactly as an eager step would and writes this step's values
  into the 0-d tensors the plan reads (see ``StepValues``); ``on_replay_each(fn, item)``
  groups consecutive registrations of one fn into one call (an optimiser's parameters);
- ``on_abort(fn)``: fn runs when the recording is abandoned (a GraphBreak: the step then runs
  eagerly), to put back the Python state the abandoned recording advanced;
- ``after_run(fn)``: fn runs after each run of the plan (a value the device decided, read
  back to put the host state in line with it).
Outside a recording both are no-ops, so eager code calls them unconditionally.

A step may also need Python to run *between* its core calls at every replay, with values the
plan has computed so far: DistOpt starts a gradient bucket's allreduce (MPI, outside the
core) as soon as the calls filling it have run, while the rest of backward goes on.
``cut(fn)`` ends the core plan recorded so far as one segment and records the rest into a
new one; a replay runs the segments in order with fn between them (the core releases the GIL
while a segment runs, so a thread fn started works meanwhile). Tensors crossing a cut are
held by both segments, so no segment's memory plan reuses them.
"""
import threading

import numpy as np

from .. import _core, errors

_tls = threading.local()


class Recording:
    """The Python side of one plan being recorded on this thread."""

    def __init__(self):
        self.replay_hooks = []
        self.after_hooks = []  # run after every run of the plan, the first one included
        self.abort_hooks = []
        self.touched = set()  # ids of objects that registered an abort hook already
        self.segments = []  # [(core plan, fn)] cut off so far (see cut)


def current():
    """The Recording in progress on this thread, or None."""
    return getattr(_tls, "recording", None)


def begin():
    rec = Recording()
    _core.plan_begin()
    _tls.recording = rec
    _core.set_recording(True)
    return rec


def end():
    """Stops recording; returns the core plan (the last segment when the recording was
    cut: the earlier ones are in the Recording's ``segments``)."""
    _tls.recording = None
    _core.set_recording(False)
    return _core.plan_end()


def abandon():
    """Stops a recording that failed: the partial plan is dropped, abort hooks run (last
    registered first)."""
    rec = current()
    _tls.recording = None
    if _core.recording():
        _core.set_recording(False)
        _core.plan_end()
    if rec is not None:
        for fn in reversed(rec.abort_hooks):
            fn()


def cut(fn):
    """While recording: the calls recorded so far become a segment of their own, and fn()
    runs after it (before the next segment) at every run of the plan. fn must not read
    values of later segments. Refused outside a recording (eager code calls fn itself)."""
    rec = current()
    if rec is None:
        raise errors.ValueError("hl.graph.recording.cut: no plan is being recorded on this "
                                "thread (outside a recording, call the function itself)")
    rec.segments.append((_core.plan_end(), fn))
    _core.plan_begin()


def on_replay(fn):
    rec = current()
    if rec is not None:
        rec.replay_hooks.append(fn)


class _Each:
    """One replay hook standing for consecutive on_replay_each registrations of one fn: at a
    replay it calls fn once with their items, in order."""

    __slots__ = ("fn", "items")

    def __init__(self, fn):
        self.fn = fn
        self.items = []

    def __call__(self):
        self.fn(self.items)


def on_replay_each(fn, item, once=False):
    """As ``on_replay(lambda: fn([item]))``, but consecutive registrations with an equal fn
    (the same bound method) share one hook, ``fn([item1, item2, ...])``: an optimiser's
    per-parameter updates cost one Python call per replay, not one per parameter. The order
    of every hook is kept (a hook registered in between starts a new group). ``once``: an
    item already in the group is not added again."""
    rec = current()
    if rec is None:
        return
    hooks = rec.replay_hooks
    last = hooks[-1] if hooks else None
    if type(last) is not _Each or last.fn != fn:
        last = _Each(fn)
        hooks.append(last)
    elif once and item in last.items:
        return
    last.items.append(item)


def after_run(fn):
    """fn runs after every run of the plan being recorded (the run that follows the
    recording, and each replay), once its core calls are done: the host learning what the
    device decided (hl.amp.GradScaler: whether the step was skipped)."""
    rec = current()
    if rec is not None:
        rec.after_hooks.append(fn)


def on_abort_once(owner, fn):
    """Registers fn (restoring owner's Python state) once per recording and owner."""
    rec = current()
    if rec is not None and id(owner) not in rec.touched:
        rec.touched.add(id(owner))
        rec.abort_hooks.append(fn)


class StepValues:
    """0-d tensors for values that change from step to step (learning rates, bias
    corrections), one per name, so that a plan reads this step's value at replay rather than
    the value baked in when it was recorded.

    ``get(name, value, like)`` returns the Python float itself when no plan is being recorded
    (eager arithmetic is unchanged: hl turns a Python scalar into a 0-d tensor of the
    operand's dtype, exactly what is written here), and while recording the named tensor
    holding value, of like's dtype and device. ``set(name, value)`` writes a later step's value.
    """

    __slots__ = ("_tensors", "_writers")

    def __init__(self):
        self._tensors = {}
        self._writers = {}  # name -> its tensor's _core.scalar_writer (set runs every replay)

    def get(self, name, value, like):
        if not _core.recording():
            return value
        t = self._tensors.get(name)
        if t is None or t.dtype is not like.dtype or t.device != like.device:
            from .._tensor import tensor
            t = self._tensors[name] = tensor(np.array(value, like.dtype.np), device=like.device)
            self._writers[name] = _core.scalar_writer(t._h, np.dtype(t.dtype.np))
        self.set(name, value)
        return t

    def set(self, name, value):
        self._writers[name](value)

    def __getstate__(self):  # derived values: never saved
        return {}

    def __setstate__(self, state):
        self._tensors = {}
        self._writers = {}
