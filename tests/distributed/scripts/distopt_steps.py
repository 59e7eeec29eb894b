"""K steps of SINGA-style training with DistOpt (SGD with momentum) on equal shards of each
global batch; alone, the same script trains on the whole global batches.

--model: mlp (two Linear layers); shared (a Linear applied twice: its gradient has two
contributions, accumulated in its bucket); unused (a Linear used on even steps only: on odd
steps its gradient is missing, counts as zeros, and it is not updated); cnn (a convolution
with bias, LayerNorm, Linear). --views 0 turns DistOpt's gradient_as_bucket_view off."""
import numpy as np

import hl
from common import args, digits, params, save, shard

a = args(("steps", int, 4), ("batch", int, 32), ("method", str, "plain"),
         ("solo_bytes", int, 0), ("views", int, 1), ("model", str, "mlp"),
         ("threshold", int, 2097152))
if a.solo_bytes:  # gradients from this size are reduced in place, in their own memory
    hl.distributed.buckets.SOLO_BYTES = a.solo_bytes
hl.manual_seed(1)
x, y = digits(flat=a.model != "cnn")
x = x.astype(np.float64)
L = hl.layers


class Net(hl.Module):
    def __init__(self):
        super().__init__()
        self.step = 0
        if a.model == "cnn":
            self.conv = L.Conv2d(4, 3, padding=1)
            self.norm = L.LayerNorm(4 * 8 * 8)
        else:
            self.fc1 = L.Linear(32)
        if a.model in ("shared", "unused"):
            self.mid = L.Linear(32)
        self.fc2 = L.Linear(10)

    def forward(self, x):
        if a.model == "cnn":
            h = hl.relu(self.conv(x))
            h = self.norm(hl.reshape(h, (h.shape[0], -1)))
        else:
            h = hl.relu(self.fc1(x))
        if a.model == "shared":
            h = hl.relu(self.mid(hl.relu(self.mid(h))))
        elif a.model == "unused" and self.step % 2 == 0:
            h = h + hl.relu(self.mid(h))
        return self.fc2(h)

    def train_one_batch(self, x, y):
        if a.method == "scaler":  # hl.amp.GradScaler, SINGA style
            out = self.forward(x)
            loss = hl.losses.SoftmaxCrossEntropy()(out, y)
            scaler.backward_and_update(self.optim, loss)
            self.step += 1
            return out, loss
        if a.method == "scaler_torch":  # hl.amp.GradScaler, PyTorch style
            self.optim.zero_grad()
            out = self.forward(x)
            loss = hl.losses.SoftmaxCrossEntropy()(out, y)
            scaler.scale(loss).backward()
            scaler.step(self.optim)
            scaler.update()
            self.step += 1
            return out, loss
        if a.method == "torch":  # PyTorch-style, .grad accumulated over two half batches
            self.optim.zero_grad()
            half = x.shape[0] // 2
            for part in (slice(0, half), slice(half, None)):
                out = self.forward(x[part])
                loss = hl.losses.SoftmaxCrossEntropy()(out, y[part]) * 0.5
                loss.backward()
            self.optim.step()
            self.step += 1
            return out, loss
        out = self.forward(x)
        loss = hl.losses.SoftmaxCrossEntropy()(out, y)
        self.optim.backward_and_update(loss, threshold=a.threshold)
        self.step += 1
        return out, loss


# loss scaling: growth every 2 clean steps; a NaN in the last sample of step 2's global
# batch (the last rank's shard) makes every gradient NaN: the step is skipped everywhere
scaler = hl.amp.GradScaler(init_scale=1024.0, growth_interval=2)
if a.method.startswith("scaler"):
    x = x.copy()
    x[3 * a.batch - 1] = np.nan
model = Net()
model.compile([hl.Placeholder((a.batch,) + x.shape[1:], "float64")], is_train=True)
model.optim = hl.opt.DistOpt(hl.opt.SGD(lr=0.1, momentum=0.9),
                             gradient_as_bucket_view=bool(a.views), buffSize=a.threshold,
                             params=model.get_params() if a.method in ("torch", "scaler_torch")
                             else None)
copied, before = [], 0
for step in range(a.steps):
    out, loss = model(hl.tensor(shard(x, a.batch, step)), hl.tensor(shard(y, a.batch, step)))
    total = sum(r.copied for r in model.optim._reducers.values())
    copied.append(total - before)
    before = total
save(a.out, **params(model))
if a.method.startswith("scaler"):
    print(f"loss scale after {a.steps} steps: {scaler.get_scale()}")
if hl.distributed.is_main():
    buckets = [b for r in model.optim._reducers.values() for b in r.buckets]
    if a.solo_bytes:
        print(f"reduced in place: {sum(b.in_place is not None for b in buckets)} of "
              f"{len(buckets)} buckets")
    print(f"buckets: {len(buckets)}; gradients copied into buckets per step: {copied}")
