"""SINGA's DistOpt.all_reduce / fused_all_reduce on tensors of a device (NCCL on cuda, MPI on
the CPU), a non-contiguous view among them; each rank writes what it got."""
import numpy as np

import hl
from common import args, place, save

a = args(("device", str, "cpu"), ("deny_rank", int, -1))
if hl.distributed.rank() == a.deny_rank:  # as if this rank had no NCCL wheel
    hl._nccl._why_not = "NCCL is not installed (the test pretends)"
opt = hl.opt.DistOpt(hl.opt.SGD())
r = hl.distributed.rank()
device = place(a.device)
t = hl.tensor(np.arange(6, dtype=np.float32).reshape(2, 3) * (r + 1), device=device)
u = hl.tensor(np.full((3, 2), r + 1.0), device=device).T  # a view: not contiguous
opt.fused_all_reduce([t, u])
once = t.numpy().copy()
opt.all_reduce(t)
save(a.out, once=once, twice=t.numpy(), u=u.numpy(),
     backend=np.array(hl.distributed.backend(device)))
