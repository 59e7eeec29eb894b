"""Gradient buckets on a cuda device, reduced by NCCL: the same layout as buckets.py (the
parameters in the order their gradients arrive, grouped by dtype into buckets of at most
``bucket_bytes``, a large gradient a bucket of its own), but each bucket is device memory
and its sum is an ncclAllReduce enqueued on the device's compute stream as soon as its last
gradient is in. Nothing goes through the host: a gradient is copied into its bucket by a
device kernel (one core call), the reduction runs after it in stream order, and the
optimiser's update, enqueued later on the same stream, reads the sum where it lies (a view
of the bucket, or the gradient itself for a large one reduced in place).

``finish()`` waits once per step for the device to pass the last reduction (Group.wait:
NCCL's errors, other ranks' failures and the timeout are checked meanwhile), so a failure
stops the step instead of surfacing at some later read.

Wire format ``"float16"`` (DistOpt.backward_and_update_half): each bucket is float16 on
the device, the gradients are cast into it, NCCL sums float16 (SINGA's ncclHalf), and the
sum is cast back into a float32 buffer for the update.

Graph mode (as buckets.py): while a step is recorded, the copies into the buckets are
recorded like any core call (on cuda, captured into the plan's CUDA Graphs), and each
bucket's start, and the final wait, become cuts of the plan (hl.graph.recording.cut): a
replay runs the recorded kernels up to a bucket's last gradient, enqueues that bucket's
ncclAllReduce on the stream, runs on, and waits before the update.
"""

import numpy as np

from .. import _core
from .._tensor import Tensor, from_numpy
from ..autograd import functional as F
from ..autograd.mode import no_grad
from .buckets import Reducer
from .nccl import group_for


def make_reducer(world, params, bucket_bytes, wire, what, **options):
    """NCCL buckets for parameters on a cuda device with an NCCL group, else MPI's
    (``options`` go to buckets.Reducer)."""
    group = group_for(world, params)
    if group is None:
        return Reducer(world, params, bucket_bytes, wire, what, **options)
    return NcclReducer(world, params, bucket_bytes, wire, what, group)


class NcclBucket:
    def __init__(self, params, dtype, wire, device, solo):
        self.params = params
        self.dtype = np.dtype(dtype)
        self.sizes = [int(np.prod(p.shape)) for p in params]
        self.offsets = np.concatenate([[0], np.cumsum(self.sizes)]).astype(int)
        self.wire = wire
        self.device = device
        self.solo = solo and wire is None
        self.flat = self.views = self.total_views = None
        self.in_place = None  # the gradient tensor a solo bucket reduces this step
        if not self.solo:
            self._make_buffer()
        self.request = None  # True once this step's reduction is enqueued (buckets.py's name)
        self.got = [False] * len(params)
        self.arrived = 0

    def _make_buffer(self):
        dtype = np.float16 if self.wire == "float16" else self.dtype
        self.flat, self.views = self._memory(dtype)
        if self.wire == "float16":  # where the float16 sum is widened for the update
            self.total, self.total_views = self._memory(np.float32)

    def _memory(self, dtype):
        n = int(self.offsets[-1])
        flat = from_numpy(np.zeros(n, dtype)).to(self.device)
        with no_grad():
            views = [flat[int(a):int(b)].reshape(tuple(p.shape))
                     for p, a, b in zip(self.params, self.offsets, self.offsets[1:])]
        return flat, views

    def own_buffer(self):
        if self.flat is None:
            self._make_buffer()
        self.in_place = None
        return self.flat

    def sent(self):
        """The device tensor NCCL reduces this step."""
        return self.in_place if self.in_place is not None else self.flat

    def reduced(self, i):
        if self.in_place is not None:
            return self.in_place
        return self.total_views[i] if self.wire == "float16" else self.views[i]


class NcclReducer(Reducer):
    """buckets.Reducer over NCCL: its layout, step control and plan cuts (start_step,
    finish, the recording's cuts) are the Reducer's; what touches a bucket's memory or the
    wire (filling, starting, waiting) is here."""

    def __init__(self, world, params, bucket_bytes, wire, what, group):
        self.group = group
        super().__init__(world, params, bucket_bytes, wire, what)

    def _add_bucket(self, group, dtype, solo=False):
        b = NcclBucket(group, dtype, self.wire, group[0].device, solo)
        for i, p in enumerate(group):
            self.where[id(p)] = (b, i)
        self.buckets.append(b)

    def add(self, param, grad, scale=1.0, owned=False):
        b, i = self._member(param)
        if not isinstance(grad, Tensor):
            grad = from_numpy(np.asarray(grad))
        with no_grad():
            if grad.device != b.device:
                grad = grad.to(b.device)
            if scale != 1.0:
                grad = F.mul(grad, scale)
                owned = True
        if (b.solo and owned and grad.dtype.np == b.dtype and grad.is_contiguous()):
            b.in_place = grad  # reduced where backward wrote it (at every replay too)
        else:
            if b.solo:
                b.own_buffer()
            _core.copy_into(b.views[i]._h, grad._h)  # a device kernel, casting as needed
        b.got[i] = True
        b.arrived += 1
        if b.arrived == len(b.params):
            self._start(b)

    def _replay_start(self, b, in_place):
        """A replay's start of bucket b: the plan has enqueued the kernels that fill it."""
        b.in_place = in_place
        self._start_now(b)

    def _start_now(self, b):
        self.group.all_reduce_(b.sent(), self.what)
        b.request = True

    def contribute_nothing(self):
        for b in self.buckets:
            _core.fill(b.own_buffer()._h, 0)
            b.got = [True] * len(b.params)
            self._start_now(b)

    def _start_missing(self, b, missing):
        """Starts a bucket some of whose gradients did not come (they count as zeros)."""
        if b.solo and missing:
            b.own_buffer()
        for i in missing:
            _core.fill(b.views[i]._h, 0)
        self._start_now(b)

    def _wait_all(self):
        self.group.wait(self.what)
        for b in self.buckets:
            if b.wire == "float16":
                _core.copy_into(b.total._h, b.flat._h)  # the float16 sum, widened

    def _replay_finish(self, rest):
        for b, missing in rest:  # (a bucket of several never reduces a gradient in place)
            self._start_missing(b, missing)
        self._wait_all()

    def progress(self):
        """NCCL progresses on its own: nothing to poll."""
