"""hl.distribution: Keras 3's names for data parallelism (keras.distribution).

    hl.distribution.set_distribution(hl.distribution.DataParallel())
    model.fit(x, y, batch_size=64)      # now data-parallel over the MPI ranks

With a distribution set, fit / evaluate / predict run as with ``distribute=True``: each rank
takes its slice of every (global) batch, gradients are averaged, metrics are those of the
whole batch, and rank 0 alone prints and writes files. Keras spreads one process over local
devices; hl spreads over the processes mpiexec started (one per CPU socket, machine or,
later, GPU), so ``devices`` lists ranks.
"""
from .. import errors

_current = None


def list_devices(device_type=None):
    """The ranks of the group, as 'cpu:<rank>' names (Keras lists local devices): the
    process, wherever its model lives (a model on cuda trains data-parallel too, its
    gradients staged through the host for MPI: docs/distributed.md)."""
    if device_type not in (None, "cpu", "CPU"):
        raise errors.UnsupportedError(f"hl.distribution.list_devices: device_type "
                                      f"{device_type!r}: hl lists the ranks (processes) as "
                                      f"'cpu:<rank>' whatever device each rank's model is on; "
                                      f"put the model on cuda with model.to('cuda') (each "
                                      f"rank picks its GPU by hl.distributed.local_rank())")
    from ..distributed import world_size
    return [f"cpu:{r}" for r in range(world_size())]


class DataParallel:
    """Every rank holds the whole model and trains on its share of each batch (Keras's
    DataParallel). ``devices`` (default: every rank) must name all the ranks: hl does not
    train on a subset of the group."""

    def __init__(self, devices=None, device_mesh=None, auto_shard_dataset=True):
        if device_mesh is not None:
            raise errors.UnsupportedError("DataParallel(device_mesh=...): hl's data "
                                          "parallelism spans all ranks; give devices or none")
        everyone = list_devices()
        if devices is not None and sorted(map(str, devices)) != sorted(everyone):
            raise errors.ValueError(f"DataParallel: devices must be all the ranks "
                                    f"{everyone}, got {list(devices)}")
        self.devices = everyone
        self.auto_shard_dataset = bool(auto_shard_dataset)

    def __repr__(self):
        return f"DataParallel(devices={self.devices})"


def set_distribution(value):
    """Makes fit / evaluate / predict data-parallel (a DataParallel) or not (None)."""
    global _current
    if value is not None and not isinstance(value, DataParallel):
        raise errors.ValueError(f"set_distribution: expected hl.distribution.DataParallel "
                                f"or None, got {type(value).__name__}")
    _current = value


def distribution():
    """The distribution set by set_distribution, or None."""
    return _current


__all__ = ["DataParallel", "distribution", "list_devices", "set_distribution"]
