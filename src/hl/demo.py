"""The main job: train the MNIST CNN of SINGA's documentation with Keras's fit and report the
test accuracy of the best model, saved and loaded back.

    python -m hl.demo                  # on the shipped digits, upsampled to 28x28
    python -m hl.demo --mnist DIR      # on real MNIST IDX files in DIR
    python -m hl.demo --epochs 15 --batch-size 64 --lr 0.01 --seed 0 --out DIR

Conv2d(20, 5) -> ReLU -> MaxPool(2, 2) -> Conv2d(50, 5) -> ReLU -> MaxPool(2, 2) -> Flatten
-> Linear(500) -> ReLU -> Linear(10), softmax cross-entropy, SGD with momentum.

fit holds out the last 10% of the training images for validation, shows a progress bar,
stops early once the validation loss has not improved for 3 epochs, and keeps the best
epoch's states in a checkpoint. The best model is then saved whole (hl.save), loaded into a
fresh object (hl.load) and evaluated on the test images. examples/keras_style.py is the same
flow written as a script; examples/train_cnn.py trains SINGA-style with train_one_batch.
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np

import hl
from hl import layers as L
from hl.callbacks import EarlyStopping, ModelCheckpoint


class CNN(hl.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = L.Conv2d(20, 5)
        self.pool1 = L.MaxPool2d(2, 2)
        self.conv2 = L.Conv2d(50, 5)
        self.pool2 = L.MaxPool2d(2, 2)
        self.flatten = L.Flatten()
        self.fc1 = L.Linear(500)
        self.fc2 = L.Linear(num_classes)

    def forward(self, x):
        y = self.pool1(self.conv1(x).relu())
        y = self.pool2(self.conv2(y).relu())
        return self.fc2(self.fc1(self.flatten(y)).relu())


def train(data, epochs=15, batch_size=64, lr=0.01, seed=0, verbose=1, out=None, patience=3):
    """Trains the CNN on ((x_train, y_train), (x_test, y_test)) with fit; saves the best model
    to `out` (a folder; a temporary one by default) and reloads it. Returns (the reloaded
    model, its test accuracy, fit's History, the saved model's path)."""
    (x_train, y_train), (x_test, y_test) = data
    # validation_split holds out the *last* 10% (Keras's rule); the files list writers in
    # runs, so shuffle once first or the held-out images all come from the last writers
    order = np.random.default_rng(seed).permutation(len(x_train))
    x_train, y_train = x_train[order], y_train[order]
    out = out or tempfile.mkdtemp(prefix="hl-demo-")
    best_states = os.path.join(out, "best-states.zip")
    hl.manual_seed(seed)
    model = CNN()
    model.compile(optimizer=hl.opt.SGD(lr=lr, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    history = model.fit(
        x_train, y_train, batch_size=batch_size, epochs=epochs, validation_split=0.1,
        verbose=verbose,
        callbacks=[EarlyStopping(monitor="val_loss", patience=patience,
                                 restore_best_weights=True),
                   ModelCheckpoint(best_states, monitor="val_loss", save_best_only=True)])
    model.load_states(best_states)  # the best epoch (EarlyStopping has restored it too)
    path = os.path.join(out, "mnist-cnn.hl")
    hl.save(model, path)
    fresh = hl.load(path)
    _, acc = fresh.evaluate(x_test, y_test, batch_size=256, verbose=0)
    return fresh, acc, history, path


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train the MNIST CNN with fit and print the best "
                                             "model's test accuracy.")
    ap.add_argument("--mnist", metavar="DIR", help="a folder with MNIST IDX files (gzipped or "
                    "not); without it, the shipped digits upsampled to 28x28")
    ap.add_argument("--epochs", type=int, default=None, help="at most this many (default 15 "
                    "for the digits, 2 for MNIST); early stopping may end sooner")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", metavar="DIR", help="where the checkpoint and the saved model go "
                    "(default: a new temporary folder)")
    ap.add_argument("--verbose", type=int, choices=(0, 1, 2), default=None,
                    help="0 silent, 1 progress bars, 2 a line per epoch (default: 1 on a "
                         "terminal, else 2)")
    ap.add_argument("--threads", type=int, help="CPU threads (default: all available)")
    args = ap.parse_args(argv)
    if args.threads:
        hl.set_num_threads(args.threads)
    if args.mnist:
        data, what = hl.data.mnist(args.mnist), f"MNIST from {args.mnist}"
        epochs = args.epochs or 2
    else:
        data, what = hl.data.digits(size=28), "digits (8x8 upsampled to 28x28)"
        epochs = args.epochs or 15
    (x_train, _), (x_test, _) = data
    print(f"hl {hl.__version__}: training the MNIST CNN on {what}: {len(x_train)} training "
          f"and {len(x_test)} test images, {hl.get_num_threads()} threads")
    t0 = time.perf_counter()
    verbose = "auto" if args.verbose is None else args.verbose
    model, acc, history, path = train(data, epochs, args.batch_size, args.lr, args.seed,
                                      verbose, args.out)
    best = min(range(len(history.history["val_loss"])),
               key=history.history["val_loss"].__getitem__)
    print(f"best epoch {best + 1} of {len(history.epoch)} (val_loss "
          f"{history.history['val_loss'][best]:.4f}); saved to {path} and loaded back")
    print(f"test accuracy: {acc:.4f}  ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
