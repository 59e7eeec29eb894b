"""SINGA's DistOpt variants training the shipped digits; prints nothing, saves the test
accuracy. Alone, every variant is the wrapped SGD (the single-process reference)."""
import numpy as np

import hl
from common import MLP, args, save, shard

a = args(("method", str, "plain"), ("epochs", int, 8), ("batch", int, 32),
         ("threshold", int, 1000))
hl.manual_seed(5)
(x, y), (xt, yt) = hl.data.digits(flat=True)
model = MLP(hidden=48)
model.compile([hl.Placeholder((a.batch, 64))], is_train=True)
opt = hl.opt.DistOpt(hl.opt.SGD(lr=0.05, momentum=0.9))
loss_fn = hl.losses.SoftmaxCrossEntropy()
steps = len(x) // a.batch
for epoch in range(a.epochs):
    order = np.random.default_rng(epoch).permutation(len(x))
    xs, ys = x[order], y[order]
    for s in range(steps):
        loss = loss_fn(model(hl.tensor(shard(xs, a.batch, s))), hl.tensor(shard(ys, a.batch, s)))
        if a.method == "plain":
            opt.backward_and_update(loss, threshold=a.threshold)
        elif a.method == "half":
            opt.backward_and_update_half(loss, threshold=a.threshold, clipping=True,
                                         clip_Value=10)
        elif a.method == "partial":
            opt.backward_and_partial_update(loss, threshold=a.threshold)
        elif a.method == "sparse_topk":
            opt.backward_and_sparse_update(loss, threshold=a.threshold, spars=0.1, topK=True)
        elif a.method == "sparse_threshold":
            opt.backward_and_sparse_update(loss, threshold=a.threshold, spars=0.002,
                                           topK=False)
model.eval()
with hl.no_grad():
    acc = hl.metrics.accuracy(model(hl.tensor(xt)), yt)
params = {k: v.numpy().copy() for k, v in model.get_params().items()}
save(a.out, accuracy=np.float64(acc), **params)
