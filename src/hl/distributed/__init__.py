"""hl.distributed: data-parallel training over MPI (mpi4py), one process per rank.

    mpiexec -n 4 python train.py              # the mpiexec of the `mpich` wheel: pip install 'hl[dist]'
    python -m hl.distributed -n 4 train.py    # the same, finding mpiexec for you

A script written for one process runs unchanged alone: world_size() is then 1 and nothing
imports MPI. Under a launcher:

  rank(), world_size(), local_rank(), is_main(), barrier()   who am I, wait for all
  DistOpt(opt)                  SINGA's wrapper (also hl.opt.DistOpt): averaged gradients
  Module.fit(..., distribute=True) or hl.distribution.set_distribution(DataParallel())
                                Keras's way: each rank trains on its shard of every batch

Files, bottom up:
  world.py        joining the group, rank / size / local rank, the version check
  collectives.py  non-blocking collectives completed by a wait bounded by a timeout
  faults.py       a failing rank tells the others; a dead rank is found; nobody hangs
  buckets.py      gradients fused into buckets reduced while backward runs
  sync_batchnorm.py  SyncBatchNorm: batch statistics over every rank's samples
  nccl.py         NCCL for models on cuda: MPI sends the id, NCCL reduces on the GPU
  nccl_buckets.py the gradient buckets in device memory, reduced by NCCL
  sync.py         same model on every rank: signature check, broadcast from rank 0
  dist_opt.py     DistOpt and SINGA's _half / _partial / _sparse variants
  launch.py       python -m hl.distributed: finds mpiexec, sets threads per rank
Models on cuda reduce through NCCL (SINGA's way on GPUs; backend() says which is used), or
over MPI with each gradient staged through host memory when NCCL is missing or
init(nccl=False) / HL_DIST_NCCL=0 asks for it (docs/distributed.md).
"""
from ..errors import DistributedError
from .dist_opt import DistOpt
from .sync import broadcast_model, broadcast_optimizer, check_same
from .sync_batchnorm import SyncBatchNorm
from .world import (backend, barrier, current, init, is_distributed, is_main, launched_by_mpi,
                    local_rank, rank, world_size)

__all__ = ["DistOpt", "DistributedError", "SyncBatchNorm", "backend", "barrier", "broadcast_model",
           "broadcast_optimizer", "check_same", "current", "init", "is_distributed",
           "is_main", "launched_by_mpi", "local_rank", "rank", "world_size"]
