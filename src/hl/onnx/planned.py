"""Inference runs of a Program as libcore plans, one per input signature (issue 20, item 8).

The first run of a signature (input names, shapes, dtypes, and the identity of the parameter
tensors) runs node by node, as always; the second records the same run into a plan, with the
inputs declared as slots; from then on a run binds the new inputs to the slots and replays the
plan in one C call. Nothing is copied on the way in or out where it can be avoided: a numpy
input on the CPU is read in place (a borrowed tensor over its buffer; the entry keeps the array
until the next bind, since the plan's slot points at it until then: onnxruntime reads the
caller's buffer in place too, and copying MobileNetV2's 600 KB image cost its replay 4%), and
each output's memory is handed to the caller, the plan taking fresh memory for the next replay
(hl_plan_take_output; a copy only when something else views that memory). A recording that
meets a value it cannot plan (a host read of a computed value, a data-dependent shape such as
NonZero) is dropped with one warning naming the error, and that signature runs node by node
from then on. At most PLANS signatures keep a
plan; past that the oldest goes. A plan replays on one thread at a time: a run that finds its
plan busy runs node by node instead.
"""
import threading
import warnings

from .. import _core, errors
from .. import devices as _devices
from .. import dtypes as _dtypes
from .._tensor import Tensor, _wrap, tensor as _tensor

# How many input signatures keep a plan.
PLANS = 4


class _Entry:
    __slots__ = ("plan", "slots", "outputs", "shared", "arrays", "lock", "borrowed")

    def __init__(self, plan, slots, outputs):
        self.plan, self.slots, self.outputs = plan, slots, outputs
        # outputs viewing the memory of another output (merged nodes, Identity): copied,
        # since handing the memory to one would leave the other to read fresh memory
        self.shared = {a for a, ta in outputs.items() for b, tb in outputs.items()
                       if a != b and _core.shares_storage(ta._h, tb._h)}
        # the outputs as arrays made before each replay (the shortest path), when every
        # output is a CPU tensor of a dtype numpy has, not empty, of its own memory
        simple = not self.shared and all(
            t.device.kind == "cpu" and t.dtype.np is not None and t.dtype.np.kind != "V" and
            t.size for t in outputs.values())
        self.arrays = _core.PlanOutputs(
            plan, [t._h for t in outputs.values()],
            [_core.array_layout(t._h, t.dtype.np) for t in outputs.values()]) \
            if simple else None
        self.lock = threading.Lock()
        self.borrowed = ()  # the numpy arrays the plan's slots read in place


class PlanCache:
    def __init__(self, device):
        self.entries = {}    # signature -> _Entry, or None: runs node by node
        self.seen = set()    # signatures run once
        self.lock = threading.Lock()
        device = _devices.device(device)
        self.device = device                        # where numpy inputs go
        self.device_key = (device.code, device.index)  # as _core.device_of names it
        self.on_cpu = device.kind == "cpu"

    def run(self, feeds, params, run_nodes_eagerly, output_names):
        """{output name: Tensor} for feeds ({name: Tensor or C-contiguous numpy array}),
        through a plan when there is one; run_nodes_eagerly(feeds) is the node-by-node run
        on tensors (recorded on the second call)."""
        signature = (tuple((k, tuple(v.shape), _dtype_name(v), self._device_of(v))
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
                return self._eager(feeds, run_nodes_eagerly)
            entry = self._record(signature, to_tensors(feeds, self.device), run_nodes_eagerly,
                                 output_names)
            if entry is None:
                return self._eager(feeds, run_nodes_eagerly)
        elif entry is None:
            return self._eager(feeds, run_nodes_eagerly)
        outputs = self._replay(entry, feeds)
        return outputs if outputs is not None else self._eager(feeds, run_nodes_eagerly)

    def _eager(self, feeds, run_nodes_eagerly):
        return run_nodes_eagerly(to_tensors(feeds, self.device))

    def replay_arrays(self, feeds):
        """The outputs as numpy arrays, in the graph's order, for feeds ({name: numpy
        array}, no parameters) when their signature already replays a plan, else None. The
        run's shortest path (BackendRep.run takes it first: Python right after a replay runs
        from cold caches, so every step counts): a signature gets a plan only after
        check_feeds passed it, and check_feeds reads nothing the signature does not hold
        (names, shapes, dtypes)."""
        if _core.plan_recording():
            return None
        try:
            signature = (tuple((k, v.shape, _numpy_dtype_name(v.dtype), self.device_key)
                               for k, v in sorted(feeds.items())), ())
        except errors.DTypeError:
            return None
        entry = self.entries.get(signature)
        return None if entry is None else self._replay(entry, feeds, as_arrays=True)

    def _replay(self, entry, feeds, as_arrays=False):
        """Binds feeds to entry's slots, replays its plan and takes its outputs ({name:
        Tensor}, or a list of arrays); None when another thread replays it now."""
        if not entry.lock.acquire(blocking=False):
            return None
        try:
            self._bind(entry, feeds)
            if as_arrays and entry.arrays is not None and entry.arrays.copies:
                return entry.arrays.run_copy()
            if as_arrays and entry.arrays is not None:
                arrays = entry.arrays.arrays()
                _core.plan_run(entry.plan)
                entry.arrays.take(arrays)
                return arrays
            _core.plan_run(entry.plan)
            outputs = {name: self._take(entry, name) for name in entry.outputs}
            return [t.numpy() for t in outputs.values()] if as_arrays else outputs
        finally:
            entry.lock.release()

    def _bind(self, entry, feeds):
        # the arrays are kept from before the first bind: a bind failing half-way leaves the
        # slots bound so far reading arrays that are still alive (the previous ones are not
        # read again: every replay binds every slot first)
        entry.borrowed = borrowed = []
        for name, slot in entry.slots.items():
            x = feeds[name]
            if isinstance(x, Tensor):
                _core.plan_bind(entry.plan, slot, x._h)
            elif self.on_cpu and x.flags.carray and x.size:  # carray: C-contiguous, aligned
                borrowed.append(x)
                _core.plan_bind_host(entry.plan, slot, x)
            else:
                _core.plan_bind(entry.plan, slot, _tensor(x, device=self.device)._h)

    def _take(self, entry, name):
        t = entry.outputs[name]
        if name in entry.shared:
            return t.clone()
        return _wrap(_core.plan_take_output(entry.plan, t._h)[0], t.dtype)

    def _device_of(self, x):
        return _core.device_of(x._h) if isinstance(x, Tensor) else self.device_key

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


def to_tensors(feeds, device):
    """feeds ({name: Tensor, numpy array or None}) with each array copied into a new tensor
    on device."""
    return {name: x if x is None or isinstance(x, Tensor) else _tensor(x, device=device)
            for name, x in feeds.items()}


def _dtype_name(x):
    return x.dtype.name if isinstance(x, Tensor) else _numpy_dtype_name(x.dtype)


_NAMES = {}  # numpy dtype -> hl dtype name, for the signatures of runs


def _numpy_dtype_name(np_dtype):
    name = _NAMES.get(np_dtype)
    if name is None:
        name = _NAMES[np_dtype] = _dtypes.from_numpy(np_dtype).name  # DTypeError if none
    return name
