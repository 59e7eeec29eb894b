"""DistOpt: SINGA's data-parallel optimiser wrapper, over MPI.

    sgd = hl.opt.SGD(lr=0.1, momentum=0.9)
    model.optim = hl.opt.DistOpt(sgd)          # then train_one_batch as usual

Each rank computes the gradients of its own batch; ``backward_and_update`` averages them
over the ranks (fused buckets, reduced while backward runs: buckets.py) and applies the
wrapped optimiser's update with the average, so every rank takes the same step. The
experimental variants of SINGA are here too: ``_half`` (float16 on the wire), ``_partial``
(local updates, one rotating partition of the parameters averaged per step) and ``_sparse``
(only the largest or above-threshold gradient entries sent, the rest kept locally as a
residual added to the next step's gradient).

Sizes are in elements, as SINGA's: ``threshold`` (default 2**21) is the bucket size of a
step, ``buffSize`` the wrapper's default one. Run alone (not under mpiexec), DistOpt is
its wrapped optimiser.

At its first step DistOpt fixes the bucket layout from the gradients' order, checks that
every rank has the same parameters (names, shapes, dtypes: a clear error names the first
difference) and copies rank 0's parameter values to the others before applying the update,
so all ranks hold the same model from then on (hl's default generator starts from the same
seed on every rank, so freshly built models agree already; fit broadcasts before training).
"""
import math

import numpy as np

from .. import errors
from .._tensor import tensor
from ..autograd.engine import backward as _backward
from ..autograd.mode import no_grad
from ..graph.recording import StepValues, on_replay
from ..opt.optimizer import Optimizer
from . import sync
from .buckets import reduce_arrays
from .collectives import require_same
from .nccl import group_for
from .nccl_buckets import make_reducer
from .world import init
from ..autograd import functional as F

SINGA_THRESHOLD = 2097152


class DistOpt(Optimizer):
    """``DistOpt(opt=SGD(), nccl_id=None, local_rank=None, world_size=None,
    buffSize=4194304)``: SINGA's signature. ``nccl_id`` / ``local_rank`` / ``world_size``
    belong to SINGA's NCCL-with-multiprocessing start, which hl does not have: hl joins the
    MPI group that mpiexec started (``timeout=`` bounds every wait) and, for a model on
    cuda, starts NCCL through it (nccl.py). ``gradient_as_bucket_view`` (default True,
    PyTorch DDP's name): backward writes each gradient into its place in the gradient
    buckets, and the update reads it there, so no gradient is copied; False copies them in
    (the way before). Host buckets only: NCCL's device buckets are copied into."""

    def __init__(self, opt=None, nccl_id=None, local_rank=None, world_size=None,
                 buffSize=4194304, *, params=None, timeout=None, gradient_as_bucket_view=True):
        if opt is None:
            from ..opt.sgd import SGD
            opt = SGD()
        if not isinstance(opt, Optimizer) or isinstance(opt, DistOpt):
            raise errors.ValueError(f"DistOpt: opt must be an hl.opt optimiser (not itself a "
                                    f"DistOpt), got {type(opt).__name__}")
        if nccl_id is not None or local_rank is not None or world_size is not None:
            raise errors.UnsupportedError(
                "DistOpt: nccl_id / local_rank / world_size start SINGA's NCCL group from "
                "Python processes without MPI, which hl does not build: hl starts its NCCL "
                "group through MPI (models on cuda then reduce with NCCL); start the ranks "
                "with mpiexec -n N python script.py (or python -m hl.distributed -n N "
                "script.py) and call DistOpt(opt)")
        if isinstance(buffSize, bool) or not isinstance(buffSize, int) or buffSize < 1:
            raise errors.ValueError(f"DistOpt: buffSize must be a number of elements >= 1, "
                                    f"got {buffSize!r}")
        self.__dict__["opt"] = opt
        self.buffSize = buffSize
        # backward writes the gradients straight into the buckets (PyTorch DDP's option of
        # the same name); False copies each gradient in after backward made it
        self.gradient_as_bucket_view = bool(gradient_as_bucket_view)
        self.world = init(timeout)
        self.world_size = 1 if self.world is None else self.world.size
        self.global_rank = 0 if self.world is None else self.world.rank
        self.local_rank = 0 if self.world is None else self.world.local_rank
        self.grad_scale = None   # set per step by fit: this rank's share of the batch
        if isinstance(params, dict):
            params = params.values()
        self._layout = list(params) if params is not None else None
        self._checked = False
        self._reducers = {}
        self._partial = 0
        self._residuals = {}
        self._step_values = StepValues()  # graph mode: the rank's weight, read at replay
        self._grads_averaged = False  # average_gradients() ran since the last step()

    # ---- the wrapped optimiser's face ---------------------------------------------------

    @property
    def name(self):
        return self.opt.name

    @property
    def lr(self):
        return self.opt.lr

    @lr.setter
    def lr(self, value):
        self.opt.lr = value

    @property
    def schedule(self):
        return self.opt.schedule

    @property
    def step_count(self):
        return self.opt.step_count

    @step_count.setter
    def step_count(self, value):
        self.opt.step_count = value

    @property
    def clip_norm(self):
        return self.opt.clip_norm

    def get_states(self):
        """The wrapped optimiser's states: the same whatever the number of ranks, so a
        checkpoint saved by N ranks resumes on M."""
        return self.opt.get_states()

    def set_states(self, states):
        self.opt.set_states(states)

    def zero_grad(self, set_to_none=True):
        self.opt.zero_grad(set_to_none)

    def step(self):
        """PyTorch-style (params given to DistOpt or to the wrapped optimiser): after
        ``loss.backward()``, once or several times (``.grad`` accumulates), the ``.grad`` of
        every parameter is averaged over the ranks, in the buckets (one reduction after
        backward: unlike backward_and_update it cannot overlap backward), and the wrapped
        optimiser updates with the averages, which ``.grad`` then holds (views of the
        buckets: the next step's reduction overwrites them, as with PyTorch DDP's
        gradient_as_bucket_view). A parameter whose ``.grad`` is None is sent as zeros and
        not updated. SINGA-style (no params known) it only advances the step count."""
        params = self.opt.params if self.opt.params is not None else self._layout
        if params is None or self.world is None or self.world.size == 1:
            if params is not None and self.opt.params is None:  # params given to DistOpt
                self.opt._update_all([(p, p.grad) for p in params if p.grad is not None])
                self.opt._count_step()
                return
            self.opt.step()
            return
        if not self._grads_averaged:
            self._average_grads(params)
        self._grads_averaged = False
        self.opt._update_all([(p, p.grad) for p in self._layout if p.grad is not None])
        self.opt._count_step()

    def _update_all(self, pairs):
        """The wrapped optimiser's update with gradients already averaged (average_gradients;
        hl.amp.GradScaler calls this): not Optimizer's, whose update() here is SINGA's
        (a sum divided by world_size)."""
        self.opt._update_all(pairs)

    def _known_params(self):  # what GradScaler.unscale_ divides: params given here too
        if self.opt.params is not None:
            return list(self.opt.params)
        return list(self._layout) if self._layout is not None else self.opt._known_params()

    def average_gradients(self, pairs=None):
        """Averages gradients over the ranks now, for a caller that must look at the
        averages before the update: hl.amp.GradScaler, whose step skipped for an inf or
        NaN must be skipped on every rank. ``pairs`` ((param, grad) made on this rank) are
        returned averaged; without them (PyTorch style) every ``.grad`` is averaged in place
        and the next step() updates without reducing again. Alone, nothing changes."""
        if self.world is None or self.world.size == 1:
            return pairs
        if pairs is not None:
            if self._layout is None:
                self._layout = [p for p, _ in pairs]
            return self._reduce(pairs)
        params = self.opt.params if self.opt.params is not None else self._layout
        if params is not None:
            self._average_grads(params)
            self._grads_averaged = True
        return None

    def _average_grads(self, params):
        if self._layout is None:
            self._layout = list(params)
        for p, g in self._reduce([(p, p.grad) for p in self._layout if p.grad is not None]):
            p.grad = g

    def _reduce(self, pairs):
        """(param, grad) pairs -> the same averaged over the ranks (missing ones as zeros)."""
        reducer = self._reducer(self.buffSize, None)
        reducer.start_step()
        scale = self._scale()
        for p, g in pairs:
            reducer.add(p, g, scale)
        return self._on_param_devices(reducer.finish())

    def __getattr__(self, name):  # momentum, betas...: the wrapped optimiser's
        if name.startswith("__") or "opt" not in self.__dict__:
            raise AttributeError(name)
        return getattr(self.__dict__["opt"], name)

    def __repr__(self):
        return f"DistOpt({self.opt!r}, world_size={self.world_size})"

    def __reduce_ex__(self, protocol):
        # A live MPI group cannot be saved: a DistOpt pickles (hl.save) as the optimiser it
        # wraps, whose states are the same whatever the number of ranks.
        # (Optimizer classes build with their defaults, then take the state.)
        return type(self.opt), (), self.opt.__getstate__()

    # ---- SINGA's primitives -------------------------------------------------------------

    def update(self, param, grad):
        """SINGA's update after an all_reduce (a sum): divides by world_size, then updates."""
        with no_grad():
            grad = F.mul(grad, 1.0 / self.world_size)
        self.opt.update(param, grad)

    @property
    def communicator(self):
        """SINGA's name for what reduces the gradients (its NCCL communicator): here the MPI
        group (None outside mpiexec). SINGA's programs test ``hasattr(opt, "communicator")``
        to know they train distributed (train_cnn.py then partitions the data and reduces
        its metrics); hl's DistOpt always has it, as SINGA's does."""
        return self.world

    def all_reduce(self, t):
        """Sums an hl tensor over the ranks, in place."""
        self.fused_all_reduce([t])

    def fused_all_reduce(self, tensors, send=True):
        """Sums hl tensors over the ranks, in place: through NCCL on their cuda device
        (each in place), else over MPI in one fused host buffer."""
        if self.world is None:
            return
        group = group_for(self.world, tensors)
        if group is not None:
            what = "DistOpt.all_reduce"
            for t in tensors:
                c = t if t.is_contiguous() else t.contiguous()
                group.all_reduce_(c, what)
                if c is not t:
                    t.copy_(c)
            group.wait(what)
            return
        summed = reduce_arrays(self.world, [t.numpy() for t in tensors], "DistOpt.all_reduce")
        for t, s in zip(tensors, summed):
            sync.write_(t, s)

    def wait(self):
        """SINGA waits for its CUDA streams here; hl's reductions are complete on return."""

    # ---- the steps ----------------------------------------------------------------------

    def backward_and_update(self, loss, threshold=SINGA_THRESHOLD, dy=None):
        """Backward, gradients averaged over the ranks in buckets of ``threshold`` elements
        (reduced while backward runs), then one update of the wrapped optimiser."""
        self._reduced_step(loss, threshold, None, dy)

    def backward_and_update_half(self, loss, threshold=SINGA_THRESHOLD, clipping=False,
                                 clip_Value=100):
        """As backward_and_update with the gradients sent as float16 (half the bytes);
        ``clipping`` first clips each gradient entry to [-clip_Value, clip_Value] (float16
        overflows past 65504). float32 parameters only, as SINGA's."""
        self._reduced_step(loss, threshold, "float16", None,
                           clip=float(clip_Value) if clipping else None)

    def _reduced_step(self, loss, threshold, wire, dy, clip=None):
        if self.world is None or self.world.size == 1:
            pairs = list(_backward(loss, dy))
            if clip is not None:
                pairs = [(p, F.clip(g, -clip, clip)) for p, g in pairs]
            self.opt._update_all(pairs)
            self.opt.step_count += 1
            return
        scale = self._scale()
        if clip is None:
            # the rank's weight rides on the loss's gradient: backward is linear in dy, so
            # every gradient arrives weighted and the buckets need no multiplying pass. A
            # recorded step reads this step's weight at each replay (fit's short last batch)
            weight = self._step_values.get("grad_scale", scale, loss)
            on_replay(self._set_replay_scale)
            with no_grad():
                dy = (F.full_like(loss, scale) if dy is None and weight is scale else
                      F.mul(F.ones_like(loss) if dy is None else dy, weight))
            scale = 1.0
        if self._layout is None:  # first step: the arrival order fixes the layout
            first = list(_backward(loss, dy))
            self._layout = [p for p, _ in first]
            grads = iter(first)
            reducer = self._reducer(threshold, wire)
        else:  # backward writes into the buckets (when they are views)
            reducer = self._reducer(threshold, wire, views=clip is None)
            grads = _backward(loss, dy, into=reducer.into)
        reducer.start_step()
        for p, g in grads:
            if wire == "float16" and p.dtype.name != "float32":
                raise errors.DTypeError(
                    f"DistOpt.backward_and_update_half: {p.name or 'a parameter'} is "
                    f"{p.dtype.name}; float16 transport is for float32 parameters (use "
                    f"backward_and_update)")
            if clip is not None:
                with no_grad():
                    g = F.clip(g, -clip, clip)
            reducer.add(p, g, scale, owned=True)
        self._apply(reducer.finish())

    def _scale(self):
        """This rank's weight: its share of fit's global batch, else 1 / world_size."""
        return self.grad_scale if self.grad_scale is not None else 1.0 / self.world.size

    def _set_replay_scale(self):
        self._step_values.set("grad_scale", self._scale())

    def contribute_nothing(self, threshold=SINGA_THRESHOLD):
        """A rank without samples in this step (the last batch of an epoch smaller than the
        number of ranks) still takes part in the reduction with zeros, and updates with
        the others' average. Needs the parameter list (given, or from a first step)."""
        reducer = self._reducer(threshold, None)
        reducer.start_step()
        reducer.contribute_nothing()
        self._apply(reducer.finish())

    def _apply(self, reduced):
        """The wrapped optimiser's update with the reduced gradients."""
        pairs = self._on_param_devices(reduced)
        self.opt._update_all(pairs)
        self.opt._count_step()
        return pairs

    @staticmethod
    def _on_param_devices(reduced):
        """Reduced gradients as hl tensors (views of the buckets, or the gradients
        themselves where reduced in place) on their parameter's device (MPI may have
        reduced a host copy)."""
        with no_grad():
            return [(p, tensor(g) if isinstance(g, np.ndarray) else
                     g if g.device == p.device else g.to(p.device)) for p, g in reduced]

    def _reducer(self, threshold, wire, views=True):
        if isinstance(threshold, bool) or not isinstance(threshold, int) or threshold < 1:
            raise errors.ValueError(f"DistOpt: threshold must be a number of elements >= 1, "
                                    f"got {threshold!r}")
        if self._layout is None:
            raise errors.ValueError("DistOpt: the parameters are not known yet; run a first "
                                    "training step, or give params= to DistOpt")
        self._first_check()
        if not self._reducers:  # the bucket layout depends on it: every rank must agree
            what = "DistOpt's first step"
            require_same(self.gradient_as_bucket_view, what, self.world, lambda r, mine, ref: (
                f"hl.distributed: {what}: DistOpt's gradient_as_bucket_view is {mine} on rank "
                f"{r} but {ref} on rank 0; the gradient buckets would differ: give every rank "
                f"the same setting"))
        views = views and wire is None and self.gradient_as_bucket_view
        key = (threshold, wire, views)
        if key not in self._reducers:
            bytes_per = max(np.dtype(p.dtype.np).itemsize for p in self._layout)
            # NCCL's device buckets for a model on cuda, else MPI's
            self._reducers[key] = make_reducer(self.world, self._layout, threshold * bytes_per,
                                               wire, "DistOpt's gradient allreduce",
                                               views=views)
        return self._reducers[key]

    def _first_check(self):
        if self._checked:
            return
        sync.check_same(self.world, sync.signature(self._layout), "DistOpt's first step")
        sync.broadcast_tensors(self.world, self._layout, "DistOpt's first step")
        self._checked = True

    def backward_and_partial_update(self, loss, threshold=SINGA_THRESHOLD):
        """Every rank updates its parameters with its own gradients; then one partition of
        the parameters (buckets of ``threshold`` elements, taken in turn, one per step) is
        averaged over the ranks. Optimiser slots stay local."""
        pairs = list(_backward(loss))
        self.opt._update_all(pairs)
        self.opt.step_count += 1
        if self.world is None or self.world.size == 1:
            return
        if self._layout is None:
            self._layout = [p for p, _ in pairs]
        partitions = self._reducer(threshold, None, views=False).buckets
        part = partitions[self._partial % len(partitions)]
        self._partial = (self._partial + 1) % len(partitions)
        summed = reduce_arrays(self.world, [p.numpy() for p in part.params],
                               "DistOpt.backward_and_partial_update")
        for p, s in zip(part.params, summed):
            sync.write_(p, s / self.world.size)

    def backward_and_sparse_update(self, loss, threshold=SINGA_THRESHOLD, spars=0.05,
                                   topK=False, corr=True):
        """Sends only part of each bucket's gradient: with ``topK`` the fraction ``spars``
        of entries largest in magnitude, otherwise the entries with ``|g| >= spars``. With
        ``corr`` the entries not sent are kept locally and added to the next step's
        gradient (error feedback). The sent entries are summed over the ranks and the
        update uses their average."""
        if not (isinstance(spars, (int, float)) and not isinstance(spars, bool)
                and spars > 0 and (not topK or spars <= 1)):
            raise errors.ValueError(f"DistOpt.backward_and_sparse_update: spars must be > 0 "
                                    f"(a fraction in (0, 1] with topK), got {spars!r}")
        pairs = list(_backward(loss))
        if self.world is None or self.world.size == 1:
            self.opt._update_all(pairs)
            self.opt.step_count += 1
            return
        if self._layout is None:
            self._layout = [p for p, _ in pairs]
        grads = {id(p): g for p, g in pairs}
        reduced = []
        for bi, b in enumerate(self._reducer(threshold, None, views=False).buckets):
            flat = np.concatenate([
                (grads[id(p)].numpy() if id(p) in grads else np.zeros(p.shape, b.dtype))
                .reshape(-1).astype(b.dtype) for p in b.params])
            if corr:
                residual = self._residuals.setdefault((threshold, bi), np.zeros_like(flat))
                flat += residual
            if topK:
                k = max(1, int(math.ceil(spars * flat.size)))
                idx = np.argpartition(np.abs(flat), flat.size - k)[flat.size - k:]
            else:
                idx = np.flatnonzero(np.abs(flat) >= spars)
            idx = idx.astype(np.int64)
            values = flat[idx]
            if corr:
                flat[idx] = 0
                residual[...] = flat
            total = _sparse_sum(self.world, idx, values, flat.size, b.dtype)
            for i, p in enumerate(b.params):
                if id(p) in grads:
                    reduced.append((p, total[b.offsets[i]:b.offsets[i + 1]].reshape(p.shape)
                                    / self.world.size))
        self._apply(reduced)


def _sparse_sum(world, idx, values, size, dtype):
    from .collectives import allgather_arrays
    what = "DistOpt.backward_and_sparse_update"
    total = np.zeros(size, dtype)
    all_idx = allgather_arrays(idx, what, world)
    all_values = allgather_arrays(values, what, world)
    for i, v in zip(all_idx, all_values):
        np.add.at(total, i, v)
    return total
