"""Same model everywhere: a check that every rank built the same parameters, and the
broadcast of rank 0's values (parameters, buffers, optimiser states) to the others."""
import numpy as np

from .. import _core, errors
from .._tensor import Tensor, from_numpy
from .collectives import allgather_object, bcast_, bcast_object


def signature(named):
    """[(name, shape, dtype)] of a {name: tensor} dict or a list of tensors."""
    items = named.items() if isinstance(named, dict) else \
        ((t.name or f"#{i}", t) for i, t in enumerate(named))
    return [(str(k), tuple(int(s) for s in t.shape), t.dtype.name) for k, t in items]


def check_same(world, sig, what):
    """Raises DistributedError naming the first tensor in which some rank's model differs
    from rank 0's."""
    every = allgather_object(sig, what, world)
    ref = every[0]
    for r, theirs in enumerate(every[1:], start=1):
        if theirs == ref:
            continue
        for i, (a, b) in enumerate(zip(ref, theirs)):
            if a != b:
                raise errors.DistributedError(
                    f"hl.distributed: {what}: rank {r} built a different model from rank 0: "
                    f"tensor {i} is {_fmt(b)} on rank {r} but {_fmt(a)} on rank 0; every "
                    f"rank must build the same model (same code, same arguments)")
        raise errors.DistributedError(
            f"hl.distributed: {what}: rank {r} has {len(theirs)} tensors, rank 0 "
            f"{len(ref)}; the first {min(len(ref), len(theirs))} agree, then "
            f"{_fmt((ref + theirs)[min(len(ref), len(theirs))])} is on one rank only; every "
            f"rank must build the same model")


def _fmt(entry):
    name, shape, dtype = entry
    return f"{name!r} {dtype} {shape}"


def broadcast_tensors(world, tensors, what):
    """Copies rank 0's values into every rank's tensors, one fused buffer per dtype (through
    NCCL, on the device, for tensors on a cuda device with an NCCL group)."""
    from .nccl import group_for
    group = group_for(world, tensors)
    if group is not None:
        return _broadcast_nccl(group, tensors, what)
    for dtype in sorted({t.dtype.name for t in tensors}):
        group = [t for t in tensors if t.dtype.name == dtype]
        # numpy() is a view of a CPU tensor, a host copy of a CUDA one (staged through
        # the host: MPI moves host memory)
        flat = np.concatenate([np.ascontiguousarray(t.numpy()).reshape(-1) for t in group])
        bcast_(flat, what, world)
        if world.rank != 0:
            at = 0
            for t in group:
                n = int(np.prod(t.shape))
                write_(t, flat[at:at + n].reshape(t.shape))
                at += n


def _broadcast_nccl(group, tensors, what):
    for t in tensors:
        if t.is_contiguous():
            group.broadcast_(t, what)
        else:  # NCCL needs one buffer: a contiguous copy, broadcast, copied back
            c = t.contiguous()
            group.broadcast_(c, what)
            _core.copy_into(t._h, c._h)
    group.wait(what)


def write_(t, values):
    """Puts numpy values into hl tensor t, on whatever device it lives."""
    if t.device.kind == "cpu":
        t.numpy()[...] = values
    else:
        t.copy_(from_numpy(np.ascontiguousarray(values, t.dtype.np)))


def broadcast_model(world, model, what="the start of training"):
    """Checks that every rank built the same states (names, shapes, dtypes) and gives
    every rank rank 0's values."""
    states = model.get_states()
    check_same(world, signature(states), what)
    broadcast_tensors(world, list(states.values()), what)


def broadcast_optimizer(world, opt, what="the start of training"):
    """Gives every rank rank 0's optimiser states (step count, schedule, slots), so a run
    resumed on rank 0 alone continues identically everywhere."""
    mine = None
    if world.rank == 0:
        mine = {k: (v.numpy().copy() if isinstance(v, Tensor) else v)
                for k, v in opt.get_states().items()}
    states = bcast_object(mine, what, world)
    if world.rank != 0:
        opt.set_states(states)
