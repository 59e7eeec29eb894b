"""Gradient buckets: gradients fused into flat buffers, each reduced by one allreduce started
as soon as its last gradient arrives, while backward goes on.

MPI moves data only inside its calls, so a non-blocking allreduce started from the main
thread advances only when that thread polls it. A communication thread (CommThread) makes
the blocking call instead, with the GIL released, so the reduction of one bucket truly
overlaps the copy of the next and the backward kernels (PyTorch DDP's design); the main
thread waits on it with the timeout and failure checks of collectives.py. Without
MPI_THREAD_MULTIPLE, the buckets fall back to Iallreduce polled from the main thread.

The layout is fixed once (the parameters in the order their gradients arrive, grouped by
dtype into buckets of at most ``bucket_bytes``; a larger tensor gets a bucket of its own):
PyTorch DDP's rule with SINGA's threshold. Every rank builds the same layout from the same
model, so bucket i holds the same tensors everywhere.

Copies cost as much as the reduction itself on a CPU (a 25 MB copy takes about half the
time of a 2-rank shared-memory allreduce of it), so large gradients are not copied: a
gradient of at least ``SOLO_BYTES`` is a bucket of its own and is reduced where it lies,
in the memory backward produced (the autograd engine hands out gradients that nothing else
uses: engine._owned), and that same tensor goes to the optimiser. Only the small gradients,
for which one MPI call each would cost more than the copy, are fused into flat buffers.
DistOpt folds the rank's weight into the loss's gradient (backward's dy), so no pass
multiplies the gradients either. This is PyTorch DDP's gradient_as_bucket_view aim (no copy
in or out) reached the other way round: the bucket is a view of the gradient.

Each bucket's reduction is one self-contained record: (flat buffer, wire format, sum over
the group). Eager mode starts it at once; graph mode, when it exists, can append the same
record to a plan so replay keeps the overlap with backward.

Wire formats: ``None`` sends the gradients' own dtype and sums with MPI_SUM; ``"float16"``
halves the bytes: each rank's bucket travels as float16 (Iallgather) and is summed on
arrival in float32 (MPI has no portable float16 sum).
"""
import functools
import queue
import threading
import time

import numpy as np

from .. import _core, errors
from .._tensor import Tensor, from_numpy
from ..autograd import functional as F
from ..autograd.mode import no_grad
from ..graph import recording
from . import faults
from .collectives import timed_out, wait

DEFAULT_BUCKET_BYTES = 25 * 1024 * 1024
# From this size a gradient is reduced in its own memory by a call of its own; smaller ones
# are copied into a fused bucket. On an idle host one more MPI call costs ~10 us (the copy
# of ~64 KB), but where the ranks share busy cores each call is a few rendezvous that wait
# for both ranks to be scheduled: at a load of 15 on 2 cores, bare mpi4py took 16 ms for
# one 4 MB Allreduce and 61 ms for the same bytes in 5 calls. A high bar keeps the calls
# few there and still spares the copy of the big tensors (ResNet-18's 512-channel convs).
SOLO_BYTES = 4 * 1024 * 1024
# The last bucket of a step is reduced by the main thread (MPI_Iallreduce, polled): nothing
# is left to overlap with it, and the hand-over to the communication thread and back costs
# ~0.1 ms (its wake-up, the GIL twice). Fastest of 150, 2 ranks (load 18): 1 MB Allreduce
# 313 us, Iallreduce polled 294 us, the thread's Allreduce 425 us; 4 MB 1334 / 1285 / 1432
# us; 10 and 25 MB the same order. (Up to the third stop only last buckets up to 1 MB were.)


class Bucket:
    def __init__(self, params, dtype, wire, world_size, solo=False):
        self.params = params
        self.dtype = np.dtype(dtype)
        self.sizes = [int(np.prod(p.shape)) for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.wire = wire
        # a solo bucket reduces its gradient's own memory; its buffer is made only if a
        # step hands it a gradient it may not write into
        self.solo = solo and wire is None
        self.flat = self.buffer = self.views = None
        if not self.solo:
            self._make_buffer()
        self.send = self.buffer
        self.in_place = None  # the gradient tensor a solo bucket reduces this step
        n = int(self.offsets[-1])
        self.gathered = (np.empty(n * world_size, np.float16) if wire == "float16" else None)
        self.request = None
        self.done = None  # a threading.Event when the CommThread reduces it
        self.error = None
        self.arrived = 0
        self.got = [False] * len(params)

    def _make_buffer(self):
        """The bucket's memory: an hl tensor (``flat``), the numpy array over the same memory
        that MPI reduces (``buffer``), and one hl view of it per member, shaped as the
        parameter (``views``): a gradient is copied in by one core call, and the optimiser
        reads the reduced gradient where it lies (no copy out)."""
        n = int(self.offsets[-1])
        dtype = np.float16 if self.wire == "float16" else self.dtype
        self.flat, self.buffer, self.views = self._memory(n, dtype)
        if self.wire == "float16":  # where the float16 contributions are summed, in float32
            _, self.total, self.total_views = self._memory(n, np.float32)

    def _memory(self, n, dtype):
        flat = from_numpy(np.zeros(n, dtype))
        with no_grad():
            views = [flat[int(a):int(b)].reshape(tuple(p.shape))
                     for p, a, b in zip(self.params, self.offsets, self.offsets[1:])]
        return flat, flat.numpy(), views

    def own_buffer(self):
        if self.buffer is None:
            self._make_buffer()
        self.send, self.in_place = self.buffer, None
        return self.buffer

    def view(self, i):
        """Member i's part of the bucket's memory, as a numpy array."""
        return self.send[self.offsets[i]:self.offsets[i + 1]].reshape(self.params[i].shape)

    def reduced(self, i):
        """The reduced gradient of member i, an hl tensor at a fixed place: the gradient
        tensor itself for a solo bucket reduced in place, else a view of the bucket (of its
        float32 sum for float16 on the wire)."""
        if self.in_place is not None:
            return self.in_place
        return self.total_views[i] if self.wire == "float16" else self.views[i]

    def sum_gathered(self):
        """float16 on the wire: the ranks' contributions summed in float32."""
        np.sum(self.gathered.reshape(-1, self.total.size), axis=0, dtype=np.float32,
               out=self.total)


class Reducer:
    """One step's reduction over a fixed layout. ``add(param, grad, scale)`` puts
    scale * grad into its bucket (and starts the bucket when it is full); ``finish()``
    starts what is left (missing gradients count as zeros), waits, and returns
    [(param, reduced gradient)] for the parameters that had a gradient.

    While graph mode records the step, the copies into the buckets are recorded like any
    core call, and each start (and the final wait) becomes a cut of the plan
    (hl.graph.recording.cut): every replay runs the backward calls up to a bucket's last
    gradient, starts that bucket's reduction, runs on, and waits before the update, so
    replay keeps eager mode's overlap."""

    def __init__(self, world, params, bucket_bytes=DEFAULT_BUCKET_BYTES, wire=None,
                 what="the gradient allreduce"):
        self.world = world
        self.what = what
        self.wire = wire
        self.buckets = []
        self.where = {}
        group, size, dtype = [], 0, None
        for p in params:
            dt = np.dtype(p.dtype.np)
            nbytes = int(np.prod(p.shape)) * dt.itemsize
            solo = nbytes >= min(SOLO_BYTES, bucket_bytes)
            if group and (solo or dt != dtype or size + nbytes > bucket_bytes):
                self._add_bucket(group, dtype)
                group, size = [], 0
            if solo:
                self._add_bucket([p], dt, solo=True)
                continue
            group.append(p)
            size += nbytes
            dtype = dt
        if group:
            self._add_bucket(group, dtype)
        self.start_step()

    def _add_bucket(self, group, dtype, solo=False):
        b = Bucket(group, dtype, self.wire, self.world.size, solo)
        for i, p in enumerate(group):
            self.where[id(p)] = (b, i)
        self.buckets.append(b)

    @property
    def params(self):
        return [p for b in self.buckets for p in b.params]

    def start_step(self):
        for b in self.buckets:
            b.request, b.arrived, b.got = None, 0, [False] * len(b.params)
            b.in_place = None
        self._cut = set()  # ids of the buckets whose start a recording has cut in
        # asked once per step, not per gradient (a thread-local lookup costs microseconds)
        self._recording = recording.current() is not None

    def add(self, param, grad, scale=1.0, owned=False):
        """``owned``: grad is an hl tensor nobody else uses (as backward hands them out),
        which a solo bucket may reduce in place and hand on."""
        b, i = self._member(param)
        if self._recording:
            self._record_fill(b, i, grad, scale, owned)
        elif b.solo:
            g = _host(grad)
            if (owned and scale == 1.0 and g.dtype == b.dtype and g.flags.writeable
                    and g.flags.c_contiguous and _on_cpu(grad)):
                b.send, b.in_place = g.reshape(-1), grad
            else:
                np.multiply(g, scale, out=b.own_buffer().reshape(g.shape), casting="unsafe")
        elif scale == 1.0 and b.wire is None and _on_cpu(grad):
            _core.copy_into(b.views[i]._h, grad._h)  # one core call, casting as needed
        else:
            np.multiply(_host(grad), scale, out=b.view(i), casting="unsafe")
        b.got[i] = True
        b.arrived += 1
        if b.arrived == len(b.params):
            self._start(b)
        self.progress()

    def _member(self, param):
        """(bucket, index) of param, which must not have had its gradient this step."""
        entry = self.where.get(id(param))
        if entry is None:
            raise errors.DistributedError(
                f"hl.distributed: {param.name or 'a parameter'} {tuple(param.shape)} got a "
                f"gradient, but it was not among the parameters of the first step, which "
                f"fixed the gradient buckets; every step must train the same parameters")
        b, i = entry
        if b.got[i]:
            raise errors.DistributedError(f"hl.distributed: {param.name or 'a parameter'} "
                                          f"got two gradients in one step")
        return b, i

    def _record_fill(self, b, i, grad, scale, owned):
        """add() while a plan is recorded: what puts the gradient into its bucket becomes
        part of the plan."""
        if not _on_cpu(grad):
            raise errors.GraphBreak(
                f"hl.distributed: {self.what}: a gradient on "
                f"{getattr(grad, 'device', 'the host')} is staged through host memory for "
                f"MPI, which a plan does not record; graph mode runs this step eagerly",
                op="DistOpt")
        if scale != 1.0:
            with no_grad():
                grad = F.mul(grad, scale)
        if (b.solo and owned and scale == 1.0 and grad.dtype.np == b.dtype
                and grad.is_contiguous()):
            b.in_place = grad  # reduced where backward writes it, at every replay
            return
        if b.solo:
            b.own_buffer()
        _core.copy_into(b.views[i]._h, grad._h)

    def contribute_nothing(self):
        """This rank had no samples this step: it adds zeros and still takes part."""
        for b in self.buckets:
            b.own_buffer().fill(0)
            b.got = [True] * len(b.params)
            self._start(b)

    def _start(self, b):
        if self._recording:
            self._cut.add(id(b))
            recording.cut(functools.partial(self._replay_start, b, b.in_place))
            return
        self._start_now(b)

    def _replay_start(self, b, in_place):
        """A replay's start of bucket b: the plan has run the calls that fill it."""
        b.in_place = in_place
        b.send = in_place.numpy().reshape(-1) if in_place is not None else b.buffer
        self._start_now(b)

    def _start_now(self, b):
        last = all(other.request is not None for other in self.buckets if other is not b)
        if self.world.threaded and not last:
            b.done, b.error, b.request = threading.Event(), None, True
            comm_thread(self.world).put(b)
            return
        if self.world.threaded:
            # the last bucket has nothing left to overlap with: the thread's hand-over
            # would only add latency. Its earlier buckets go first (one order of collectives).
            for other in self.buckets:
                if other is not b and other.done is not None:
                    self._wait(other)
        comm, MPI = self.world.grads, self.world.MPI
        if self.wire == "float16":
            b.request = comm.Iallgather(b.send, b.gathered)
        else:
            b.request = comm.Iallreduce(MPI.IN_PLACE, b.send, op=MPI.SUM)

    def progress(self):
        """Without the communication thread MPI moves data only inside its calls: a test on
        each open bucket lets the started reductions advance while backward computes."""
        if self.world.threaded:
            return
        for b in self.buckets:
            if b.request is not None:
                b.request.Test()

    def _wait(self, b):
        """Waits for a bucket the communication thread reduces."""
        if not b.done.wait(0.002):
            faults.waiting(self.what)
            try:
                start = time.monotonic()
                while not b.done.wait(0.02):
                    faults.check(self.world, self.what)
                    if time.monotonic() - start > self.world.timeout:
                        raise timed_out(self.what, self.world)
            finally:
                faults.waiting(None)
        if b.error is not None:
            raise errors.DistributedError(f"hl.distributed: {self.what} failed in MPI: "
                                          f"{b.error}") from b.error
        b.done = None

    def finish(self):
        if self._recording:
            return self._record_finish()
        for b in self.buckets:
            if b.request is None:
                self._start_missing(b, [i for i, got in enumerate(b.got) if not got])
        self._wait_all()
        return [(p, b.reduced(i)) for b in self.buckets for i, p in enumerate(b.params)
                if b.got[i]]

    def _start_missing(self, b, missing):
        """Starts a bucket some of whose gradients did not come (they count as zeros)."""
        if b.solo and missing:  # its one gradient did not come
            b.own_buffer()
        for i in missing:
            b.view(i).fill(0)
        self._start_now(b)

    def _wait_all(self):
        for b in self.buckets:
            if b.done is not None:
                self._wait(b)
            elif b.request is not True:
                wait(b.request, self.what, self.world)
            b.request = None
            if self.wire == "float16":
                b.sum_gathered()

    def _record_finish(self):
        """finish() while a plan is recorded: the buckets not started yet start, and all
        are waited for, at a last cut; the update that follows reads the reduced gradients
        where they lie (bucket views, or the gradients reduced in place)."""
        rest = [(b, [i for i, got in enumerate(b.got) if not got]) for b in self.buckets
                if id(b) not in self._cut]
        recording.cut(functools.partial(self._replay_finish, rest))
        out = [(p, b.reduced(i)) for b in self.buckets for i, p in enumerate(b.params)
               if b.got[i]]
        self.start_step()  # the recording's marks go; eager steps start from scratch
        return out

    def _replay_finish(self, rest):
        for b, missing in rest:
            if not b.solo:
                b.send = b.buffer
            self._start_missing(b, missing)
        self._wait_all()


def _on_cpu(grad):
    """An hl tensor in host memory (device kind 0), checked without building a Device."""
    return isinstance(grad, Tensor) and _core.device_of(grad._h)[0] == 0


def _host(grad):
    """A gradient's values as a numpy array: a view for a CPU tensor, a copy to the host
    for one on another device (MPI reduces host memory: the staging of a CUDA gradient)."""
    return grad.numpy() if isinstance(grad, Tensor) else np.asarray(grad)


class CommThread:
    """Reduces the buckets handed to it, in order, with blocking MPI calls on the group's
    ``grads`` communicator (mpi4py releases the GIL inside them)."""

    def __init__(self, world):
        self.world = world
        self.queue = queue.SimpleQueue()
        threading.Thread(target=self._run, name="hl.distributed buckets", daemon=True).start()

    def put(self, bucket):
        self.queue.put(bucket)

    def _run(self):
        comm, MPI = self.world.grads, self.world.MPI
        while True:
            b = self.queue.get()
            try:
                if b.wire == "float16":
                    comm.Allgather(b.send, b.gathered)
                else:
                    comm.Allreduce(MPI.IN_PLACE, b.send, op=MPI.SUM)
            except Exception as e:  # handed to the waiting main thread
                b.error = e
            finally:
                b.done.set()


_threads = {}
_threads_lock = threading.Lock()


def comm_thread(world):
    with _threads_lock:
        t = _threads.get(id(world))
        if t is None:
            t = _threads[id(world)] = CommThread(world)
        return t


def reduce_arrays(world, arrays, what):
    """Sums a list of numpy arrays over the group in one fused buffer (used for parameter
    averaging and for small statistics); returns the summed arrays."""
    flat = np.concatenate([np.asarray(a, np.float64).reshape(-1) for a in arrays])
    from .collectives import allreduce_
    allreduce_(flat, what, world)
    out, at = [], 0
    for a in arrays:
        a = np.asarray(a)
        out.append(flat[at:at + a.size].reshape(a.shape))
        at += a.size
    return out
