"""fit's throughput and overhead, and predict's latency at batch 1: hl beside Keras 3 on its
PyTorch backend, the same MNIST CNN (SINGA's: Conv 20@5x5, pool, Conv 50@5x5, pool, 500, 10),
SGD with momentum, batch 64, same run.

    python bench/fit.py                      # needs keras and torch (the bench extra)
    python bench/fit.py --samples 3200 --epochs 4 --threads 2

Each library runs in processes of its own (another library's idle threads would otherwise
steal the cores), twice round, and the figures are medians over the timed epochs (the first
epoch of each process is warm-up) and calls.

- fit samples/s: samples per second of a fit epoch (verbose=0; hl also with its progress bar,
  verbose=1, drawn to /dev/null).
- fit overhead (hl): how much longer a fit epoch takes than the model's own steps, i.e.
  train_one_batch over the same batches already made into tensors, timed in the same process:
  (fit epoch - bare steps) / fit epoch. The goal is under 5%.
- predict at batch 1: ms per ``model.predict(x, verbose=0)`` call on one image, after warm-up;
  hl's ``predict_on_batch`` and Keras's ``predict_on_batch`` beside them.
"""
import argparse
import contextlib
import os
import statistics
import sys
import time

from _common import report, run_worker, setup

BATCH = 64


def _data(n, layout):
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.random((n, 1, 28, 28), dtype=np.float32)
    y = rng.integers(0, 10, n).astype(np.int64)
    return (x.transpose(0, 2, 3, 1).copy() if layout == "nhwc" else x), y


class _EpochTimer:
    def __init__(self):
        self.times = []

    def on_epoch_begin(self, epoch, logs=None):
        self.t0 = time.perf_counter()

    def on_epoch_end(self, epoch, logs=None):
        self.times.append(time.perf_counter() - self.t0)


def hl_worker(args):
    import hl
    from hl import layers as L
    if args.threads:
        hl.set_num_threads(args.threads)

    class Timer(_EpochTimer, hl.callbacks.Callback):
        def __init__(self):
            hl.callbacks.Callback.__init__(self)
            _EpochTimer.__init__(self)

    def model():
        hl.manual_seed(0)
        m = hl.Sequential(L.Conv2d(20, 5), L.ReLU(), L.MaxPool2d(2, 2), L.Conv2d(50, 5),
                          L.ReLU(), L.MaxPool2d(2, 2), L.Flatten(), L.Linear(500), L.ReLU(),
                          L.Linear(10))
        m.compile(optimizer=hl.opt.SGD(lr=0.01, momentum=0.9), loss="cross_entropy",
                  metrics=["accuracy"])
        return m

    x, y = _data(args.samples, "nchw")
    out = {"fit": [], "fit_bar": [], "bare": []}
    m = model()
    batches = [(hl.tensor(x[i:i + BATCH]), hl.tensor(y[i:i + BATCH]))
               for i in range(0, len(x), BATCH)]
    for _ in range(args.epochs):  # interleaved, so drifts in the machine's speed hit both
        timer = Timer()
        m.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, callbacks=[timer])
        out["fit"] += timer.times
        timer = Timer()
        with open(os.devnull, "w") as null, contextlib.redirect_stdout(null):
            m.fit(x, y, batch_size=BATCH, epochs=1, verbose=1, callbacks=[timer])
        out["fit_bar"] += timer.times
        t0 = time.perf_counter()
        for xb, yb in batches:
            m.train_one_batch(xb, yb)
        out["bare"].append(time.perf_counter() - t0)
    for k in out:
        out[k] = out[k][1:]  # the first is warm-up
    one = x[:1]
    out["predict"] = _latency(lambda: m.predict(one, verbose=0), args.calls)
    out["predict_on_batch"] = _latency(lambda: m.predict_on_batch(one), args.calls)
    return out


def keras_worker(args):
    os.environ["KERAS_BACKEND"] = "torch"
    import torch
    if args.threads:
        torch.set_num_threads(args.threads)
    import keras
    from keras import layers as K

    class Timer(_EpochTimer, keras.callbacks.Callback):
        def __init__(self):
            keras.callbacks.Callback.__init__(self)
            _EpochTimer.__init__(self)

    keras.utils.set_random_seed(0)
    m = keras.Sequential([keras.Input((28, 28, 1)), K.Conv2D(20, 5, activation="relu"),
                          K.MaxPooling2D(2), K.Conv2D(50, 5, activation="relu"),
                          K.MaxPooling2D(2), K.Flatten(), K.Dense(500, activation="relu"),
                          K.Dense(10)])
    m.compile(optimizer=keras.optimizers.SGD(0.01, momentum=0.9),
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
              metrics=["accuracy"])
    x, y = _data(args.samples, "nhwc")
    timer = Timer()
    m.fit(x, y, batch_size=BATCH, epochs=args.epochs, verbose=0, callbacks=[timer])
    one = x[:1]
    return {"fit": timer.times[1:],
            "predict": _latency(lambda: m.predict(one, verbose=0), max(20, args.calls // 5)),
            "predict_on_batch": _latency(lambda: m.predict_on_batch(one), args.calls)}


def _latency(fn, calls):
    for _ in range(10):
        fn()
    times = []
    for _ in range(calls):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def run(args):
    libs = ["hl"]
    try:
        os.environ["KERAS_BACKEND"] = "torch"
        import keras  # noqa: F401 - only whether it imports
        libs.append("keras")
    except Exception as e:  # noqa: BLE001 - without keras, hl's figures alone
        print(f"keras is not importable ({e}): hl's figures only")
    res = {lib: {} for lib in libs}
    for _ in range(2):
        for lib in libs:
            cmd = ["--worker", lib, "--samples", args.samples, "--epochs", args.epochs,
                   "--calls", args.calls] + (["--threads", args.threads] if args.threads else [])
            r = run_worker(__file__, cmd, lib)
            for k, v in r.items():
                res[lib].setdefault(k, []).extend(v)
    med = {lib: {k: statistics.median(v) for k, v in r.items()} for lib, r in res.items()}
    h = med["hl"]
    k = med.get("keras")
    print(f"MNIST CNN, batch {BATCH}, {args.samples} samples per epoch, threads: "
          f"{args.threads or 'default'}; medians over {len(res['hl']['fit'])} timed epochs and "
          f"{len(res['hl']['predict'])} calls per library")

    def row(name, ours, theirs, unit, fmt):
        """speed-up: hl's rate over Keras's, or Keras's time over hl's (> 1: hl is faster)."""
        up = (ours / theirs if unit.endswith("/s") else theirs / ours) if theirs else None
        ratio = f"{up:9.2f}x" if up else f"{'-':>10}"
        print(f"{name:34} {fmt.format(ours):>12} {fmt.format(theirs) if theirs else '-':>12} "
              f"{ratio}  {unit}")
    print(f"{'':34} {'hl':>12} {'keras':>12} {'hl speed-up':>10}")
    sps = args.samples / h["fit"]
    row("fit samples/s (verbose=0)", sps, args.samples / k["fit"] if k else None, "samples/s",
        "{:.0f}")
    row("fit samples/s (hl verbose=1)", args.samples / h["fit_bar"],
        args.samples / k["fit"] if k else None, "samples/s", "{:.0f}")
    row("predict, batch 1", h["predict"] * 1e3, k["predict"] * 1e3 if k else None, "ms/call",
        "{:.3f}")
    row("predict_on_batch, batch 1", h["predict_on_batch"] * 1e3,
        k["predict_on_batch"] * 1e3 if k else None, "ms/call", "{:.3f}")
    for key, label in (("fit", "verbose=0"), ("fit_bar", "verbose=1")):
        over = (h[key] - h["bare"]) / h[key]
        print(f"hl fit overhead ({label}): {over * 100:.1f}% of an epoch (fit epoch "
              f"{h[key] * 1e3:.0f} ms, its bare steps {h['bare'] * 1e3:.0f} ms; goal < 5%)")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--samples", type=int, default=3200)
    ap.add_argument("--epochs", type=int, default=4, help="per process; the first is warm-up")
    ap.add_argument("--calls", type=int, default=300, help="predict calls timed per process")
    ap.add_argument("--threads", type=int)
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    setup(args.threads)
    if args.worker:
        fn = hl_worker if args.worker == "hl" else keras_worker
        report(fn(args))
        return 0
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
