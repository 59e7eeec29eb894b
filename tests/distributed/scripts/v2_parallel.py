"""paddle.trainer.SGD.train with distribute=True: a shuffled reader (each rank seeds
`random` differently: only rank 0's order may count), Momentum, an error-rate evaluator and
a short last batch (53 samples in batches of 10: on 4 ranks the last batch of 3 leaves one
rank without samples). Alone, the same script is the single-process reference: its
`random` seed is rank 0's. With DataParallel set as the distribution, the handler's
trainer.test runs alone on rank 0 (the handler runs there only); after training, test and
paddle.infer with distribute=True shard over every rank and give each the whole result."""
import json
import random

import numpy as np

import hl
import hl.v2 as paddle
from common import args, save

a = args(("passes", int, 2), ("batch", int, 10), ("n", int, 53))
r = hl.distributed.rank()
random.seed(r)
paddle.init(use_gpu=False, trainer_count=1)
x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(6))
label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(4))
h = paddle.layer.fc(input=x, size=8, act=paddle.activation.Tanh())
prob = paddle.layer.fc(input=h, size=4, act=paddle.activation.Softmax())
cost = paddle.layer.classification_cost(input=prob, label=label)
hl.manual_seed(5 + r)  # different initial values: the start broadcast must make them rank 0's
params = paddle.parameters.create(cost)
trainer = paddle.trainer.SGD(cost, params,
                             paddle.optimizer.Momentum(momentum=0.9, learning_rate=0.02))
rng = np.random.default_rng(0)
xs = rng.normal(size=(a.n, 6)).astype(np.float32)
ys = (xs[:, :4].argmax(1) + (rng.random(a.n) < 0.2)) % 4
samples = [(xs[i], int(ys[i])) for i in range(a.n)]
reader = paddle.batch(paddle.reader.shuffle(lambda: iter(samples), buf_size=100), a.batch)
events = []


def handler(e):
    with open(f"{a.out}.handler.rank{r}", "a") as f:  # which ranks ran the handler
        f.write(type(e).__name__ + "\n")
    if isinstance(e, paddle.event.EndIteration):
        events.append(["iteration", e.pass_id, e.batch_id, e.cost, e.metrics])
    elif isinstance(e, paddle.event.EndPass):
        result = trainer.test(test_reader)  # rank 0 alone, on the whole reader
        events.append(["pass", e.pass_id, e.metrics, result.cost, result.metrics])


test_reader = paddle.batch(lambda: iter(samples), a.batch)  # a short last batch too
hl.distribution.set_distribution(hl.distribution.DataParallel())
trainer.train(reader, num_passes=a.passes, event_handler=handler, distribute=True)
result = trainer.test(test_reader, distribute=True)
inferred = paddle.infer(output_layer=prob, parameters=params,
                        input=[(s[0],) for s in samples[:23]], distribute=True)
save(a.out, infer=inferred, **{n: params.get(n) for n in params.names()})
with open(f"{a.out}.test.rank{r}.json", "w") as f:
    json.dump([result.cost, result.metrics], f)
if r == 0:
    with open(f"{a.out}.events.json", "w") as f:
        json.dump(events, f)
