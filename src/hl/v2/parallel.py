"""paddle.trainer.SGD.train on several ranks (mpiexec), data-parallel.

v2 minimises the *sum* of a batch's per-sample costs, so splitting a batch over N ranks and
summing their gradients gives exactly the gradient one process computes on the whole batch:
no weights, no averaging. What each rank does per batch:

- Data: rank 0 reads the reader (the only rank that does: a shuffling reader would give
  each rank another order) and broadcasts each batch's checked arrays; every rank keeps its
  contiguous slice (sizes differ by at most one, as fit's shards). A rank whose slice of a
  short batch is empty still takes part with zero gradients.
- Gradients: summed over the ranks by the distributed Reducer (buckets reduced while
  backward runs, large gradients in their own memory), then the v2 optimiser updates with
  the sum, the same update on every rank; start_batch gets the global batch size, so
  learning-rate schedules and model averages count samples as one process does.
- Cost and evaluators: summed over the ranks (the cost) and merged (each evaluator's counts
  absorbed), so EndIteration / EndPass report the whole batch and pass on every rank; a
  non-finite cost on any rank skips the update on all of them.
- Events: the event handler runs on rank 0 only (it prints, saves parameters, tests).
- Start: every rank checks that it built the same parameters (names, shapes, dtypes) and
  takes rank 0's values.

``trainer.test`` and ``paddle.infer`` shard the same way when asked (``distribute=True``, or
a distribution set with hl.distribution.set_distribution): test's batches come from rank 0
and its cost and evaluators are summed over the ranks; infer's samples are split in
contiguous slices and the outputs gathered in order. Every rank gets the whole result.
Inside train's event handler (rank 0 only) they run whole on rank 0, as the other ranks are
not there to take part.
"""
import contextlib
import threading

import numpy as np

from .. import errors
from .._tensor import Tensor, tensor
from ..autograd.engine import backward
from ..training.distributed import resolve as resolve_distribute, slice_bounds

WHAT = "paddle.trainer.SGD.train"
_handler = threading.local()


@contextlib.contextmanager
def main_rank_only():
    """Marks code that runs on rank 0 alone (train's event handler)."""
    before = getattr(_handler, "inside", False)
    _handler.inside = True
    try:
        yield
    finally:
        _handler.inside = before


def resolve(distribute, what):
    """The group test() / infer() shard over, or None (alone, not asked, or inside the event
    handler, which only rank 0 runs)."""
    if getattr(_handler, "inside", False):
        if distribute:
            raise errors.ValueError(
                f"{what}: distribute=True inside train's event handler, which runs on rank 0 "
                f"only: the other ranks could never take part. Leave distribute out there "
                f"(rank 0 then runs it alone, on all the data), or call it on every rank "
                f"after train()")
        return None
    return resolve_distribute(distribute, what)


def broadcast_batches(world, read, what):
    """Rank 0's sequence of batches (``read()`` yields them on rank 0) on every rank; the end
    is broadcast as None."""
    from ..distributed.collectives import bcast_object
    if world.rank == 0:
        for arrays in read():
            bcast_object(arrays, what + " (the batches)", world)
            yield arrays
        bcast_object(None, what + " (the batches)", world)
        return
    while True:
        arrays = bcast_object(None, what + " (the batches)", world)
        if arrays is None:
            return
        yield arrays


def my_slice(arrays, world):
    """(this rank's contiguous slice of a batch's arrays, or None when it is empty; the
    batch's size)."""
    first = next(iter(arrays.values()))  # an array, or (padded array, lengths)
    n = len(first[1] if isinstance(first, tuple) else first)
    lo, hi = slice_bounds(n, world)
    if lo == hi:
        return None, n
    return {k: (a[0][lo:hi], a[1][lo:hi]) if isinstance(a, tuple) else a[lo:hi]
            for k, a in arrays.items()}, n


def merge_evaluators(world, evaluators, what):
    """Each evaluator with the counts of every rank's (fresh copies absorb them)."""
    from ..distributed.collectives import allgather_object
    everyone = allgather_object(evaluators, what + " (the evaluators)", world)
    for i, e in enumerate(evaluators):
        e.reset()
        for theirs in everyone:
            e.absorb(theirs[i])


def sum_over(world, values, what):
    """The sums over the ranks of a few numbers."""
    from ..distributed.collectives import allreduce_
    sums = np.array(values, np.float64)
    allreduce_(sums, what, world)
    return [float(v) for v in sums]


class Shards:
    """This rank's part of training: the group, the reader's batches from rank 0, the
    gradient reduction and the sums of costs and evaluators."""

    def __init__(self, world, network):
        from ..distributed import sync
        self.world = world
        self.named = dict(network.get_params())
        sync.check_same(world, sync.signature(self.named), WHAT)
        sync.broadcast_tensors(world, list(self.named.values()), WHAT)
        self.reducer = None

    @property
    def is_main(self):
        return self.world.rank == 0

    def batches(self, read):
        """Every rank gets rank 0's sequence of checked batches."""
        return broadcast_batches(self.world, read, WHAT)

    def count(self, n):
        """Rank 0's number of batches, on every rank."""
        from ..distributed.collectives import bcast_object
        return bcast_object(n, WHAT, self.world)

    def mine(self, arrays):
        """(this rank's slice of the batch, or None when it is empty; the global size)."""
        return my_slice(arrays, self.world)

    def total(self, value):
        """The sum of the ranks' costs (a NaN or inf anywhere makes it non-finite)."""
        return sum_over(self.world, [value], WHAT + " (the cost)")[0]

    def merge(self, evaluators):
        """Each evaluator with the counts of every rank's."""
        merge_evaluators(self.world, evaluators, WHAT)

    def gradients(self, objective):
        """[(parameter, summed gradient)]: backward of this rank's objective (or zeros
        when its slice is empty), reduced over the ranks."""
        from ..distributed.buckets import Reducer
        pairs = None
        if self.reducer is None:  # the first step's arrival order fixes the buckets
            pairs = list(backward(objective)) if objective is not None else []
            from ..distributed.collectives import allgather_object
            # a rank with an empty first slice has no order: take one that has
            name_of = {id(t): n for n, t in self.named.items()}
            orders = allgather_object([name_of[id(p)] for p, _ in pairs], WHAT, self.world)
            order = next(o for o in orders if o)
            self.reducer = Reducer(self.world, [self.named[n] for n in order],
                                   what=WHAT + "'s gradient allreduce")
        self.reducer.start_step()
        if objective is None:
            self.reducer.contribute_nothing()
        else:
            for p, g in (pairs if pairs is not None else backward(objective)):
                self.reducer.add(p, g, owned=True)
        return [(p, g if isinstance(g, Tensor) else tensor(g))
                for p, g in self.reducer.finish()]
