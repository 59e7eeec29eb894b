"""Where graph mode's time goes: per-record and per-op times of plan replays.

    with hl.graph.profile(skip=2) as prof:
        model.fit(x, y, epochs=1)            # a model in graph mode (compile(use_graph=True))
    print(prof.table())                       # per op: calls, total, mean, share

While a profile is active, every plan that replays (on any thread) times each of its records
(the core's clock, after waiting for the record's device); ``skip`` replays of each plan are
left untimed first (a plan's first run measures its kernels' work buffers and its second
places its memory: both are slower than the ones after). A fused chain of element-wise
records runs as one pass and is timed as one row, named ``fused(add+mul+relu)``. Eager ops are
not timed: only plans are. Off, a replay pays one list test in Python and one pointer test in
the core.

Only one profile is active at a time. It keeps the plans it timed alive until it stops (a plan
re-recorded meanwhile still shows, under its own name), then keeps their totals.
SINGA's ``dev.SetVerbosity(1 or 2)`` / ``dev.PrintTimeProfiling()`` print from one of these
(hl.singa.device).
"""
import threading

from .. import _core, errors

_active = []  # the active Profile, if any (a list: Plan.run tests it without a lock)
_lock = threading.Lock()


class Profile:
    """Per-record times of the plans replayed while it is active (``start``/``stop``, or a
    ``with`` block). Read with ``records()``, ``by_op()``, ``total()`` or ``table()``."""

    def __init__(self, skip=0):
        if int(skip) < 0:
            raise errors.ValueError(f"hl.graph.profile: skip must be >= 0, got {skip}")
        self.skip = int(skip)
        self._plans = {}      # id(plan) -> (plan, name), while active
        self._order = []      # plan ids in the order they first ran
        self._rows = None     # the records, once stopped

    # ---- switching ----------------------------------------------------------------------

    def start(self):
        with _lock:
            if _active:
                raise errors.ValueError("hl.graph.profile: a profile is active already; stop "
                                        "it first (one profile at a time)")
            self._rows = None
            _active.append(self)
        return self

    def stop(self):
        """Stops timing; the totals stay readable."""
        with _lock:
            if self not in _active:
                return self
            _active.remove(self)
            for plan, _ in self._plans.values():
                for core in plan.cores():
                    _core.plan_set_profiling(core, False)
            self._rows = self._read()
            self._plans.clear()
            self._order.clear()
        return self

    @property
    def active(self):
        return self in _active

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def seen(self, plan, name):
        """Called by a plan before it runs while this profile is active."""
        if id(plan) in self._plans:
            return
        with _lock:
            if id(plan) in self._plans or self not in _active:
                return
            self._plans[id(plan)] = (plan, name or f"plan #{len(self._order) + 1}")
            self._order.append(id(plan))
            for core in plan.cores():
                _core.plan_profile_reset(core)  # a profile counts from its own start
                _core.plan_set_profiling(core, True, self.skip)

    # ---- reading ------------------------------------------------------------------------

    def _read(self):
        rows = []
        for number, key in enumerate(self._order):
            plan, name = self._plans[key]
            cores = plan.cores()
            for part, core in enumerate(cores):
                label = name if len(cores) == 1 else f"{name} part {part + 1}"
                rows += _rows(core, label, number)
        return rows

    def records(self):
        """One dict per timed row, in replay order, plan by plan: ``plan`` (its name; two
        models of one class give the same names), ``plan_number`` (in the order plans first
        ran under this profile), ``index`` (of the record in the plan), ``op``, ``ops`` (the
        records a fused row ran), ``replays`` (timed replays of that plan) and ``seconds``
        (total over them)."""
        if self._rows is not None:
            return [dict(r) for r in self._rows]
        with _lock:
            return self._read()

    def by_op(self):
        """{op: {'calls': record runs timed, 'seconds': their total}}, slowest first."""
        out = {}
        for r in self.records():
            e = out.setdefault(r["op"], {"calls": 0, "seconds": 0.0})
            e["calls"] += r["replays"]
            e["seconds"] += r["seconds"]
        return dict(sorted(out.items(), key=lambda kv: -kv[1]["seconds"]))

    def total(self):
        """Seconds of every timed record together."""
        return sum(r["seconds"] for r in self.records())

    def table(self, limit=None):
        """The per-op table as text: calls, total ms, mean us per call, share of the total."""
        ops = self.by_op()
        total = sum(e["seconds"] for e in ops.values()) or 1.0
        width = max([len("op")] + [len(k) for k in ops])
        lines = [f"{'op':<{width}}  {'calls':>8}  {'total ms':>10}  {'mean us':>10}  "
                 f"{'share':>6}"]
        for k, e in list(ops.items())[:limit]:
            mean = e["seconds"] / e["calls"] * 1e6 if e["calls"] else 0.0
            lines.append(f"{k:<{width}}  {e['calls']:>8}  {e['seconds'] * 1e3:>10.3f}  "
                         f"{mean:>10.1f}  {e['seconds'] / total:>6.1%}")
        lines.append(f"{'total':<{width}}  {'':>8}  {self.total() * 1e3:>10.3f}")
        return "\n".join(lines)


def _rows(core, name, number):
    """The timed rows of one core plan (a fused group is one row, under its first record)."""
    timed, ops, first, ns = _core.plan_profile(core)
    groups, rows = {}, []
    for i, f in enumerate(first):
        groups.setdefault(f, []).append(ops[i])
    for i, op in enumerate(ops):
        if first[i] != i:
            continue  # timed under its group's first record
        members = groups[i]
        rows.append({"plan": name, "plan_number": number, "index": i,
                     "op": op if len(members) == 1 else f"fused({'+'.join(members)})",
                     "ops": members, "replays": timed, "seconds": ns[i] / 1e9})
    return rows


def profile(skip=0):
    """A Profile to use as ``with hl.graph.profile(skip=n) as prof:`` (or start()/stop())."""
    return Profile(skip)


def active_profile():
    """The active Profile, or None."""
    return _active[0] if _active else None
