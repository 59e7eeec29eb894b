"""fit / evaluate / predict on several ranks: ``distribute=True`` or a distribution set with
hl.distribution.set_distribution(DataParallel()).

- Data: ``batch_size`` is the global batch (Keras's rule). Every rank draws the same shuffled
  order (rank 0's seed) and takes its contiguous slice of each global batch (sizes differ by
  at most one; a rank whose slice of a short last batch is empty still takes part with
  zeros), so every rank runs the same number of steps. The union of the slices is exactly
  the batch one process would train on.
- Gradients: model.optim is wrapped in a DistOpt for the run (it is put back afterwards);
  each rank's gradient is weighted by its share of the global batch before the sum, so the
  step equals one process's step on the whole batch for a loss averaged over samples.
- Metrics: GlobalTracker sums the running loss and every metric's (total, count) over the
  ranks, so every rank's logs, History and callbacks see the whole batch's values and
  EarlyStopping / ReduceLROnPlateau decide the same everywhere.
- Side effects: callbacks with ``main_rank_only`` (ProgbarLogger, ModelCheckpoint,
  CSVLogger) run on rank 0 only.
"""
import numpy as np

from .. import errors
from ..data.loader import DataLoader
from .data import ArrayData, Batch, Source
from .loop import Tracker


def resolve(distribute, what):
    """The MPI group to run on, or None to run alone (not asked, or a single rank)."""
    if distribute is None:
        from ..distribution import distribution
        distribute = distribution() is not None
    if not isinstance(distribute, bool):
        raise errors.ValueError(f"{what}: distribute must be True, False or None (follow "
                                f"hl.distribution), got {distribute!r}")
    if not distribute:
        return None
    from ..distributed import init
    world = init()
    return world if world is not None and world.size > 1 else None


def slice_bounds(n, world):
    """[lo, hi) of this rank's part of n rows (numpy.array_split's sizes)."""
    base, extra = divmod(n, world.size)
    lo = world.rank * base + min(world.rank, extra)
    return lo, lo + base + (1 if world.rank < extra else 0)


def sharded_source(data, batch_size, world, what, shuffle=False, seed=None, steps=None):
    """A Source of this rank's slices of each global batch of an ArrayData."""
    if not isinstance(data, ArrayData):
        raise errors.UnsupportedError(
            f"{what}: with distribute=True the data must be arrays (numpy, hl Tensors, or "
            f"lists / dicts of them), which hl shards across the ranks; for another source "
            f"of batches give each rank its own part and train with hl.opt.DistOpt")
    if data.n < world.size:
        raise errors.ValueError(f"{what}: {data.n} samples cannot be shared by {world.size} "
                                f"ranks; give at least one sample per rank")
    if batch_size < world.size:
        raise errors.ValueError(f"{what}: batch_size {batch_size} is the global batch, "
                                f"split over {world.size} ranks; give at least "
                                f"{world.size}")
    arrays = data.arrays()
    loader = DataLoader(*arrays, batch_size=batch_size, shuffle=shuffle,
                        seed=0 if seed is None else seed)

    def epoch_batches(epoch):
        order = loader.order(epoch)
        for b in range(len(loader)):
            rows = order[b * batch_size:(b + 1) * batch_size]
            lo, hi = slice_bounds(len(rows), world)
            mine = rows[lo:hi]
            part = data._from_arrays([a[mine] for a in arrays])
            yield Batch(part.x, part.y, part.sample_weight, len(rows))
    return Source(epoch_batches, reiterable=True, steps=steps, length=len(loader))


def check_sync_batchnorm(model, n, batch_size, world, what):
    """SyncBatchNorm makes every rank take part in its statistics at every training step, so
    a short last batch that leaves a rank no samples (fit then skips that rank's forward)
    would leave the others waiting until the timeout: refused before training."""
    from ..distributed.sync_batchnorm import SyncBatchNorm
    if not any(isinstance(layer, SyncBatchNorm) for _, layer in model.named_layers()):
        return
    last = n % batch_size
    if 0 < last < world.size:
        raise errors.ValueError(
            f"{what}: the model has SyncBatchNorm layers, whose statistics need samples on "
            f"every rank at every step, but the last batch of each epoch ({n} samples in "
            f"batches of {batch_size}) has {last} rows for {world.size} ranks; choose a "
            f"batch_size that leaves a last batch of at least {world.size} rows (or none), "
            f"or train on {n - last} samples")


def share_seed(seed, world):
    from ..distributed.collectives import bcast_object
    return bcast_object(seed, "fit's shuffling seed", world)


class GlobalTracker(Tracker):
    """A Tracker whose logs are those of all ranks' samples together (one small allreduce
    of the running sums per call)."""

    global_ = True

    def __init__(self, world, metrics=(), prefix=""):
        self.world = world
        super().__init__(metrics, prefix)

    def logs(self):
        from ..distributed.collectives import allreduce_
        sums = np.array([self.loss_sum, self.samples]
                        + [v for m in self.metrics for v in (m.total, m.count)], np.float64)
        allreduce_(sums, f"the {self.prefix or 'training '}metrics", self.world)
        p = self.prefix
        out = {p + "loss": sums[0] / sums[1] if sums[1] else 0.0}
        for i, m in enumerate(self.metrics):
            total, count = sums[2 + 2 * i], sums[3 + 2 * i]
            out[p + m.name] = float(total / count) if count else 0.0
        return out


def wrap_optimizer(model, world):
    """model.optim as a DistOpt over the model's trainable parameters (in the reverse of
    their order, roughly the order backward delivers their gradients); returns (dist,
    restore) where restore() puts the user's optimiser back."""
    from ..distributed.dist_opt import DistOpt
    from ..distributed.sync import broadcast_model, broadcast_optimizer
    own = model.__dict__.get("optim")
    params = [p for p in model.get_params().values() if p.requires_grad][::-1]
    broadcast_model(world, model)
    if isinstance(own, DistOpt):
        dist = own
        if dist._layout is None:
            dist._layout = params
        restore = lambda: None  # noqa: E731
    else:
        dist = DistOpt(own, params=params)
        model.__dict__["optim"] = dist
        restore = lambda: model.__dict__.__setitem__("optim", own)  # noqa: E731
    broadcast_optimizer(world, dist.opt)
    dist._checked = True  # the model was checked and broadcast just now
    return dist, restore


def local_only(callbacks, world):
    """The callbacks this rank runs: all on rank 0; on the others, those that neither
    print nor write files."""
    if world.rank == 0:
        return callbacks
    return [cb for cb in callbacks if not getattr(cb, "main_rank_only", False)]


def gather_predictions(out, world):
    """The outputs of every rank's slice of a batch, in rank order (= batch order)."""
    from ..distributed.collectives import allgather_object
    parts = [p for p in allgather_object(out, "predict", world) if p is not None]
    if isinstance(parts[0], list):
        return [np.concatenate([p[k] for p in parts]) for k in range(len(parts[0]))]
    return np.concatenate(parts)
