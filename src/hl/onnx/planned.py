"""Inference runs of a Program as libcore plans, one per input signature (issue 20, item 8).

The first run of a signature (input names, shapes, dtypes, and the identity of the parameter
tensors) runs node by node, as always; the second records the same run into a plan, with the
inputs declared as slots; from then on a run binds the new inputs to the slots (no copy) and
replays the plan in one C call, then copies the outputs out (the plan writes the same output
tensors on every replay). A recording that meets a value it cannot plan (a host read of a
computed value, a data-dependent shape such as NonZero) is dropped with one warning naming
the error, and that signature runs node by node from then on. At most PLANS signatures keep a
plan; past that the oldest goes. A plan replays on one thread at a time: a run that finds its
plan busy runs node by node instead.
"""
import threading
import warnings

from .. import _core, errors

# How many input signatures keep a plan.
PLANS = 4


class _Entry:
    __slots__ = ("plan", "slots", "outputs", "lock")

    def __init__(self, plan, slots, outputs):
        self.plan, self.slots, self.outputs = plan, slots, outputs
        self.lock = threading.Lock()


class PlanCache:
    def __init__(self):
        self.entries = {}    # signature -> _Entry, or None: runs node by node
        self.seen = set()    # signatures run once
        self.lock = threading.Lock()

    def run(self, feeds, params, run_nodes_eagerly, output_names):
        """{output name: Tensor} for feeds, through a plan when there is one;
        run_nodes_eagerly(feeds) is the node-by-node run (recorded on the second call)."""
        signature = (tuple((k, tuple(v.shape), v.dtype.name, _core.device_of(v._h))
                           for k, v in sorted(feeds.items()) if v is not None),
                     # the C tensors, which the plan keeps alive: a parameter given another
                     # tensor (a loaded checkpoint) is a new signature, never a stale read
                     tuple((k, _core.handle_address(v._h))
                           for k, v in sorted((params or {}).items())))
        entry = self.entries.get(signature, False)
        if entry is False:
            with self.lock:
                first = signature not in self.seen
                if len(self.seen) > 16 * PLANS:
                    self.seen.clear()
                self.seen.add(signature)
            if first or _core.plan_recording():
                return run_nodes_eagerly(feeds)
            entry = self._record(signature, feeds, run_nodes_eagerly, output_names)
            if entry is None:
                return run_nodes_eagerly(feeds)
        elif entry is None:
            return run_nodes_eagerly(feeds)
        if not entry.lock.acquire(blocking=False):  # another thread replays it now
            return run_nodes_eagerly(feeds)
        try:
            for name, slot in entry.slots.items():
                _core.plan_bind(entry.plan, slot, feeds[name]._h)
            _core.plan_run(entry.plan)
            return {name: t.clone() for name, t in entry.outputs.items()}
        finally:
            entry.lock.release()

    def _record(self, signature, feeds, run_nodes_eagerly, output_names):
        _core.plan_begin()
        try:
            slots = {name: _core.plan_input(t._h) for name, t in feeds.items() if t is not None}
            values = run_nodes_eagerly(feeds)
            outputs = {name: values[name] for name in output_names}
        except errors.UnsupportedError as e:
            _core.plan_end()
            warnings.warn(f"ONNX inference: this input signature runs node by node, not as a "
                          f"plan: {e}", RuntimeWarning, stacklevel=4)
            self._store(signature, None)
            return None
        except BaseException:
            _core.plan_end()
            raise
        plan = _core.plan_end()
        del values
        entry = _Entry(plan, slots, outputs)
        self._store(signature, entry)
        return entry

    def _store(self, signature, entry):
        with self.lock:  # copy, change, swap: other threads read the dict without the lock
            entries = dict(self.entries)
            if len(entries) >= PLANS and signature not in entries:
                entries.pop(next(iter(entries)))
            entries[signature] = entry
            self.entries = entries
