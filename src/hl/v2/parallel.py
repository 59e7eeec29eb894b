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
"""
import numpy as np

from .._tensor import Tensor, tensor
from ..autograd.engine import backward

WHAT = "paddle.trainer.SGD.train"


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
        """Every rank gets rank 0's sequence of checked batches (``read()`` yields them on
        rank 0); the end is broadcast as None."""
        from ..distributed.collectives import bcast_object
        if self.is_main:
            for arrays in read():
                bcast_object(arrays, WHAT + " (the batches)", self.world)
                yield arrays
            bcast_object(None, WHAT + " (the batches)", self.world)
            return
        while True:
            arrays = bcast_object(None, WHAT + " (the batches)", self.world)
            if arrays is None:
                return
            yield arrays

    def count(self, n):
        """Rank 0's number of batches, on every rank."""
        from ..distributed.collectives import bcast_object
        return bcast_object(n, WHAT, self.world)

    def mine(self, arrays):
        """(this rank's slice of the batch, or None when it is empty; the global size)."""
        first = next(iter(arrays.values()))
        n = len(first[1] if isinstance(first, tuple) else first)
        from ..training.distributed import slice_bounds
        lo, hi = slice_bounds(n, self.world)
        if lo == hi:
            return None, n
        part = {k: (a[0][lo:hi], a[1][lo:hi]) if isinstance(a, tuple) else a[lo:hi]
                for k, a in arrays.items()}
        return part, n

    def total(self, value):
        """The sum of the ranks' costs (a NaN or inf anywhere makes it non-finite)."""
        from ..distributed.collectives import allreduce_
        sums = np.array([value], np.float64)
        allreduce_(sums, WHAT + " (the cost)", self.world)
        return float(sums[0])

    def merge(self, evaluators):
        """Each evaluator with the counts of every rank's (fresh copies absorb them)."""
        from ..distributed.collectives import allgather_object
        everyone = allgather_object(evaluators, WHAT + " (the evaluators)", self.world)
        for i, e in enumerate(evaluators):
            e.reset()
            for theirs in everyone:
                e.absorb(theirs[i])

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
