"""DistOpt and data-parallel fit in graph mode: the same training as graph_steps.py --graph 0
(eager), recorded once and replayed, with the bucket reductions run between the plan's
segments. Writes the parameters and how the steps ran (eager / recorded / replayed)."""
import json

import numpy as np

import hl
from common import MLP, args, digits, place, params, save, shard

a = args(("steps", int, 6), ("batch", int, 32), ("graph", int, 1), ("way", str, "distopt"),
         ("method", str, "plain"), ("solo_bytes", int, 0), ("threshold", int, 300),
         ("device", str, "cpu"))
a.device = place(a.device)
if a.solo_bytes:  # gradients from this size are reduced in place, in their own memory
    hl.distributed.buckets.SOLO_BYTES = a.solo_bytes
hl.manual_seed(1)
x, y = digits()
dtype = "float32" if a.method == "half" else "float64"
x = x.astype(dtype)


class Net(MLP):
    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = hl.losses.SoftmaxCrossEntropy()(out, y)
        if a.method == "half":
            self.optim.backward_and_update_half(loss, threshold=a.threshold)
        else:  # a small threshold: several buckets, so the plan is cut several times
            self.optim.backward_and_update(loss, threshold=a.threshold)
        return out, loss


if a.way == "distopt":
    model = Net()
    model.compile([hl.Placeholder((a.batch // hl.distributed.world_size(), 64), dtype)],
                  is_train=True, use_graph=bool(a.graph))
    model.to(a.device)
    model.optim = hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9))
    losses = []
    for step in range(a.steps):
        out, loss = model(hl.tensor(shard(x, a.batch, step), device=a.device),
                          hl.tensor(shard(y, a.batch, step), device=a.device))
        losses.append(float(loss.item()))
    stats = model._graph.stats() if a.graph else {}
    if a.graph:  # the plan is cut once per bucket and once before the update
        entries = model._graph.caches["train_one_batch"].entries.values()
        stats["segments"] = [1 + len(e.plan.then) for e in entries if e.plan is not None]
        stats["buckets"] = [len(r.buckets) for r in model.optim._reducers.values()]
else:  # fit, DataParallel: 203 rows, batch 30: a short last batch of 23 (12 + 11 rows)
    model = MLP(dtype=dtype)
    model.to(a.device)
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9), loss="cross_entropy",
                  jit_compile=bool(a.graph))
    hl.distribution.set_distribution(hl.distribution.DataParallel())
    history = model.fit(x[:203], y[:203], batch_size=30, epochs=3, shuffle=False, verbose=0)
    losses = history.history["loss"]
    stats = model._graph.stats() if a.graph else {}
save(a.out, **params(model))
if hl.distributed.is_main():
    with open(f"{a.out}.json", "w") as f:
        json.dump({"losses": losses, "stats": stats,
                   "backend": hl.distributed.backend(a.device)}, f)
