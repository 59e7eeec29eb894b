"""A DistOpt loop in which one rank fails at a given step: it raises, is killed, or hangs."""
import os
import signal
import time

import hl
from common import MLP, args, digits, place, shard

a = args(("mode", str, "raise"), ("rank", int, 1), ("step", int, 3), ("device", str, "cpu"))
a.device = place(a.device)
x, y = digits()
model = MLP()
model.compile([hl.Placeholder((8, 64))], is_train=True)
model.to(a.device)
opt = hl.opt.DistOpt(hl.opt.SGD(lr=0.05))
loss_fn = hl.losses.SoftmaxCrossEntropy()
for step in range(1000):
    if hl.distributed.rank() == a.rank and step == a.step:
        if a.mode == "raise":
            raise ValueError(f"a bug in the user's step {step}")
        if a.mode == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        time.sleep(3600)  # stuck outside MPI: the others time out
    loss = loss_fn(model(hl.tensor(shard(x, 8 * 2, step % 40), device=a.device)),
                   hl.tensor(shard(y, 16, step % 40), device=a.device))
    opt.backward_and_update(loss)
