"""SINGA's device-level graph and time profile on hl's plans.

SINGA's Device buffers the ops called between ``EnableGraph(True)`` and ``EnableGraph(False)``
into its graph instead of running them; ``RunGraph(serial)`` runs the graph (every time it is
called), ``ResetGraph()`` empties it (src/core/device/device.cc, scheduler/scheduler.cc). Here
the buffer is an hl plan: EnableGraph(True) starts recording one on this thread (ops are
checked, their outputs allocated, nothing runs), EnableGraph(False) ends it and appends it to
the device's graph, RunGraph replays the graph's plans in order. Values computed by buffered
ops exist only after RunGraph, as in SINGA; reading one before raises hl.errors.GraphBreak.

The time profile: ``SetVerbosity(v > 0)`` starts an hl.graph.Profile (each plan's first
``SetSkipIteration`` runs untimed, 5 by default as in SINGA) and ``PrintTimeProfiling()``
prints SINGA's report from it: at verbosity 1 the forward and backward time per iteration,
at 2 each op's time per iteration, at 3 the distributed ops'.
"""
import threading

from .. import _core, errors
from ..graph.profiling import Profile, active_profile
from ..graph import recording
from ..graph.plans import Plan


class DeviceGraph:
    """The ops buffered on one SINGA device: hl plans, replayed in order by RunGraph."""

    def __init__(self, name):
        self.name = name
        self.plans = []        # recorded plans, in buffering order
        self.unrun = {}        # plan -> its recording's abort hooks, until its first run
        self.buffering = None  # (Recording, thread id, GraphBreak count) while buffering
        self.enabled = False   # SINGA's graph_enabled_

    # ---- buffering ----------------------------------------------------------------------

    def enable(self, on):
        if on and not self.enabled:
            self.enabled = True
            if not _core.plan_recording():  # else an hl plan records these ops already
                self.buffering = (recording.begin(), threading.get_ident(),
                                  errors.graph_breaks())
        elif not on and self.enabled:
            self.enabled = False
            self._end()

    def _own_buffer(self, what):
        """The buffering in progress, which must be this thread's (hl records per thread)."""
        rec, thread, breaks = self.buffering
        if thread != threading.get_ident() and any(t.ident == thread
                                                   for t in threading.enumerate()):
            raise errors.ValueError(f"{self.name}.{what}: ops are being buffered on another "
                                    f"thread (hl records a graph per thread); call it on the "
                                    f"thread that called EnableGraph(True)")
        self.buffering = None
        if thread != threading.get_ident():  # that thread has ended: its recording went too
            raise errors.ValueError(f"{self.name}.{what}: the thread that called "
                                    f"EnableGraph(True) ended while buffering; what it "
                                    f"buffered is lost (the graph is no longer enabled)")
        return rec, breaks

    def _end(self):
        """Ends the recording in progress and appends it to the graph."""
        if self.buffering is None:
            return
        rec, breaks = self._own_buffer("EnableGraph(False)")
        if errors.graph_breaks() != breaks:  # a GraphBreak was raised (and caught) meanwhile
            recording.abandon()
            raise errors.GraphBreak(
                f"{self.name}: the ops buffered since EnableGraph(True) are incomplete: "
                f"something that cannot be buffered (a host read, an optimiser creating its "
                f"state, a data-dependent shape) raised hl.errors.GraphBreak while buffering; "
                f"the buffered ops were dropped. Create parameters and optimiser states "
                f"before buffering (model.compile, one eager step), as SINGA does")
        core = recording.end()
        if _core.plan_size(core) == 0 and not rec.segments:
            return
        plan = Plan(core, [], None, rec.replay_hooks, lambda: True, rec.segments,
                    f"{self.name} graph #{len(self.plans) + 1}")
        self.plans.append(plan)
        self.unrun[plan] = rec.abort_hooks

    # ---- running and clearing -----------------------------------------------------------

    def run(self, serial=False):
        """SINGA's RunGraph: runs every buffered op (buffering stops for the run and, as in
        SINGA, starts again after it: ops called next join the graph)."""
        was = self.enabled
        self.enable(False)
        try:
            for plan in self.plans:
                first = plan in self.unrun
                if first:
                    if not serial:  # SINGA's default: by dependencies
                        plan.prepare(_core.PLAN_TOPOLOGICAL)
                    del self.unrun[plan]
                # the recording advanced the Python side of its step (optimiser counts); the
                # replay hooks advance it for each later run
                plan.run((), hooks=not first)
        finally:
            self.enable(was)

    def reset(self):
        """SINGA's ResetGraph: forgets the buffered ops (a recording in progress included;
        buffering goes on if it was on). Steps buffered but never run put back the Python
        state their recording advanced."""
        was = self.enabled
        if self.buffering is not None:
            self.enabled = False
            try:
                self._own_buffer("ResetGraph()")
                recording.abandon()
            except errors.ValueError:
                if self.buffering is not None:  # another live thread buffers: leave it be
                    self.enabled = True
                    raise
                was = False  # its thread ended: forgetting it is all ResetGraph can do
        for plan in reversed(self.plans):
            for fn in reversed(self.unrun.pop(plan, ())):
                fn()
        self.plans.clear()
        self.unrun.clear()
        if was:
            self.enabled = False
            self.enable(True)


# ---- PrintTimeProfiling ------------------------------------------------------------------

def _split(rows):
    """Per plan: seconds before its first backward record (SINGA's rule: ops up to the first
    one named *Backward are forward), from it on, and the plan's timed replays."""
    plans = {}
    for r in rows:
        p = plans.setdefault(r["plan_number"], {"forward": 0.0, "backward": 0.0,
                                                "replays": 0, "back": "(backward" in r["plan"]})
        p["back"] = p["back"] or any(op.endswith("_grad") for op in r["ops"])
        p["forward" if not p["back"] else "backward"] += r["seconds"]
        p["replays"] = max(p["replays"], r["replays"])
    return plans


def time_report(prof, verbosity):
    """SINGA's Graph::PrintTimeProfiling text for hl's profile `prof`."""
    if verbosity not in (1, 2, 3):  # SINGA prints nothing for other levels
        return ""
    rows = prof.records() if prof is not None else []
    out = ["", "Time Profiling:"]
    if verbosity == 1:
        plans = _split(rows)
        # a training step is one plan (train_one_batch) or two (forward and loss; backward
        # and update): iterations are the replays of the plans that hold the forward part
        iters = sum(p["replays"] for p in plans.values() if p["forward"] > 0) or 1
        fwd = sum(p["forward"] for p in plans.values()) / iters
        bwd = sum(p["backward"] for p in plans.values()) / iters
        out += [f"Forward Propagation Time : {fwd:g} sec",
                f"Backward Propagation Time : {bwd:g} sec"]
    elif verbosity == 2:
        several = len(set(r["plan_number"] for r in rows)) > 1
        last = None
        for r in rows:
            if several and r["plan_number"] != last:
                out.append(f"[{r['plan']}]")
            last = r["plan_number"]
            per = r["seconds"] / r["replays"] if r["replays"] else 0.0
            if per > 0:
                out.append(f"OP_ID{r['index']}. {r['op']} : {per:g} sec")
    else:
        out.append("(no distributed ops among hl's plan records: DistOpt's all-reduce runs "
                   "outside the core, between plan segments or eagerly, and is not timed)")
    return "\n".join(out) + "\n"


class Profiler:
    """The door's profile: on while the verbosity is above 0."""

    def __init__(self):
        self.prof = None

    def verbosity(self, v, skip):
        if v > 0 and (self.prof is None or not self.prof.active):
            if active_profile() is None:
                self.prof = Profile(skip).start()
        elif v <= 0 and self.prof is not None:
            self.prof.stop()

    def skip(self, n):
        if self.prof is not None:
            self.prof.skip = int(n)  # for the plans it has not timed yet

    def report(self, verbosity):
        return time_report(self.prof, verbosity)
