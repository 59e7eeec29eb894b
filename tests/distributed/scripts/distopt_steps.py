"""K steps of SINGA-style training with DistOpt (SGD with momentum) on equal shards of each
global batch; alone, the same script trains on the whole global batches."""
import numpy as np

import hl
from common import MLP, args, digits, params, save, shard

a = args(("steps", int, 4), ("batch", int, 32), ("method", str, "plain"),
         ("solo_bytes", int, 0))
if a.solo_bytes:  # gradients from this size are reduced in place, in their own memory
    hl.distributed.buckets.SOLO_BYTES = a.solo_bytes
hl.manual_seed(1)
x, y = digits()
x = x.astype(np.float64)


class Net(MLP):
    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = hl.losses.SoftmaxCrossEntropy()(out, y)
        self.optim.backward_and_update(loss)
        return out, loss


model = Net()
model.compile([hl.Placeholder((a.batch, 64), "float64")], is_train=True)
model.optim = hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9))
for step in range(a.steps):
    out, loss = model(hl.tensor(shard(x, a.batch, step)), hl.tensor(shard(y, a.batch, step)))
save(a.out, **params(model))
if a.solo_bytes and hl.distributed.is_main():
    buckets = [b for r in model.optim._reducers.values() for b in r.buckets]
    print(f"reduced in place: {sum(b.in_place is not None for b in buckets)} of "
          f"{len(buckets)} buckets")
