"""K steps of DistOpt (SGD with momentum, float64) on a small CNN with BatchNorm2d and
BatchNorm1d, each rank on its equal shard of every global batch. --sync 1 converts the batch
norms with SyncBatchNorm.convert_sync_batchnorm; alone (the reference) the model keeps its
plain batch norms and trains on the whole global batches."""
import numpy as np

import hl
from common import args, digits, save, shard

a = args(("steps", int, 4), ("batch", int, 16), ("sync", int, 1), ("fit_rows", int, 0))
hl.manual_seed(2)
x, y = digits(flat=False)
x = x.astype(np.float64)


class Net(hl.Module):
    def __init__(self):
        super().__init__()
        self.conv = hl.layers.Conv2d(4, 3, padding=1, bias=False)  # batch norm cancels biases
        self.bn2 = hl.layers.BatchNorm2d()
        self.fc1 = hl.layers.Linear(16, bias=False)
        self.bn1 = hl.layers.BatchNorm1d()
        self.fc2 = hl.layers.Linear(10)

    def forward(self, x):
        h = hl.relu(self.bn2(self.conv(x)))
        h = hl.relu(self.bn1(self.fc1(hl.reshape(h, (h.shape[0], -1)))))
        return self.fc2(h)

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = hl.losses.SoftmaxCrossEntropy()(out, y)
        # small buckets: the communication thread reduces gradients while backward's
        # SyncBatchNorm collectives run on the main thread
        self.optim.backward_and_update(loss, threshold=64)
        return out, loss


model = Net()
n = hl.distributed.world_size()
model.compile([hl.Placeholder((a.batch // n, 1, 8, 8), "float64")], is_train=True)
if a.sync:
    model = hl.distributed.SyncBatchNorm.convert_sync_batchnorm(model)
    assert type(model.bn2).__name__ == type(model.bn1).__name__ == "SyncBatchNorm"
if a.fit_rows:  # fit with a last batch that leaves a rank no samples: refused at the start
    model.compile(optimizer=hl.opt.SGD(lr=0.1), loss="cross_entropy")
    try:
        model.fit(x[:a.fit_rows], y[:a.fit_rows], batch_size=a.batch, epochs=1, verbose=0,
                  distribute=True)
    except hl.errors.ValueError as e:
        print(f"rank {hl.distributed.rank()}: {e}")
    raise SystemExit(0)
model.optim = hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9))
model.train()
for step in range(a.steps):
    model(hl.tensor(shard(x, a.batch, step)), hl.tensor(shard(y, a.batch, step)))
save(a.out, **{k: v.numpy().copy() for k, v in model.get_states().items()})
