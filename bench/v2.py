"""The v2 door's cost: one pass of the v2 book's conv-pool digit classifier (conv 20@5x5,
pool 2, conv 50@5x5, pool 2, softmax 10, momentum SGD, batch 64) trained through hl.v2
beside the same model trained through ``fit``, in the same process, interleaved.

    python bench/v2.py                 # the shipped digits upsampled to 28x28 (1438 images)
    python bench/v2.py --passes 7 --threads 2

- v2 train() per pass: a ``trainer.train(reader, num_passes=1)`` call, all of it: the check
  of every sample before training, the feeding of v2 samples (tuples) into tensors, events.
- fit per epoch: ``model.fit(x, y, batch_size=64, epochs=1, verbose=0)`` on numpy arrays.
The goal: the v2 door costs at most 5% over fit. Medians over the timed passes (the first
of each is warm-up).
"""
import argparse
import statistics
import time

from _common import setup

BATCH = 64


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--passes", type=int, default=6, help="timed passes each, plus warm-up")
    ap.add_argument("--threads", type=int)
    args = ap.parse_args()
    setup(args.threads)
    import numpy as np

    import hl
    import hl.v2 as paddle
    from hl import layers as L
    if args.threads:
        hl.set_num_threads(args.threads)

    paddle.init()
    images = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(784),
                               height=28, width=28)
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    c1 = paddle.networks.simple_img_conv_pool(input=images, filter_size=5, num_filters=20,
                                              num_channel=1, pool_size=2, pool_stride=2,
                                              act=paddle.activation.Relu())
    c2 = paddle.networks.simple_img_conv_pool(input=c1, filter_size=5, num_filters=50,
                                              num_channel=20, pool_size=2, pool_stride=2,
                                              act=paddle.activation.Relu())
    predict = paddle.layer.fc(input=c2, size=10, act=paddle.activation.Softmax())
    cost = paddle.layer.classification_cost(input=predict, label=label)
    parameters = paddle.parameters.create(cost)
    trainer = paddle.trainer.SGD(cost=cost, parameters=parameters,
                                 update_equation=paddle.optimizer.Momentum(
                                     learning_rate=0.01 / BATCH, momentum=0.9))
    reader = paddle.batch(paddle.dataset.digits.train(size=28), BATCH)
    samples = list(paddle.dataset.digits.train(size=28)())
    x = np.stack([s[0] for s in samples]).reshape(-1, 1, 28, 28)
    y = np.array([s[1] for s in samples], np.int64)

    hl.manual_seed(0)
    model = hl.Sequential(L.Conv2d(20, 5), L.ReLU(), L.MaxPool2d(2, 2, ceil_mode=True),
                          L.Conv2d(50, 5), L.ReLU(), L.MaxPool2d(2, 2, ceil_mode=True),
                          L.Flatten(), L.Linear(10))
    model.compile(optimizer=hl.opt.SGD(lr=0.01, momentum=0.9), loss="cross_entropy",
                  metrics=["accuracy"])

    v2_times, fit_times = [], []
    for _ in range(args.passes + 1):
        t0 = time.perf_counter()
        trainer.train(reader, num_passes=1)
        v2_times.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        fit_times.append(time.perf_counter() - t0)
    v2, fit = statistics.median(v2_times[1:]), statistics.median(fit_times[1:])
    print(f"conv-pool digit classifier, 28x28, {len(samples)} images, batch {BATCH}, threads "
          f"{args.threads or 'default'}; medians of {args.passes} passes each")
    print(f"{'':28} {'hl.v2':>10} {'hl fit':>10} {'v2 / fit':>9}")
    print(f"{'seconds per pass':28} {v2:10.3f} {fit:10.3f} {v2 / fit:9.3f}")
    print(f"the v2 door costs {100 * (v2 / fit - 1):+.1f}% over fit (goal: at most +5%)")


if __name__ == "__main__":
    main()
