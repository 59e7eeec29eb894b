"""Keras-style training on the handwritten digits shipped with hl: compile, fit with a
validation split, early stopping and checkpoints, then evaluate, predict, and reload the best
checkpoint into a fresh model.

    python examples/keras_style.py [--out DIR]
"""
import argparse
import os
import tempfile

import numpy as np

import hl
from hl import layers as L
from hl.callbacks import CSVLogger, EarlyStopping, ModelCheckpoint


def make_model():
    return hl.Sequential(
        L.Conv2d(16, 3, padding=1), L.ReLU(), L.MaxPool2d(2, 2),   # 8x8 -> 4x4
        L.Flatten(), L.Linear(64), L.ReLU(), L.Dropout(0.2), L.Linear(10))


def main(out):
    (x_train, y_train), (x_test, y_test) = hl.data.digits()   # (N, 1, 8, 8) in [0, 1]
    # validation_split takes the last 20%: shuffle once so it is a fair sample
    order = np.random.default_rng(0).permutation(len(x_train))
    x_train, y_train = x_train[order], y_train[order]

    hl.manual_seed(0)
    model = make_model()
    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy",
                  metrics=["accuracy"])
    best = os.path.join(out, "best.zip")
    history = model.fit(
        x_train, y_train, batch_size=32, epochs=30, validation_split=0.2, verbose="auto",
        callbacks=[EarlyStopping(monitor="val_loss", patience=4, restore_best_weights=True),
                   ModelCheckpoint(best, monitor="val_loss", save_best_only=True),
                   CSVLogger(os.path.join(out, "log.csv"))])
    epochs = len(history.epoch)
    print(f"trained {epochs} epochs; best val_loss {min(history.history['val_loss']):.4f}")

    loss, acc = model.evaluate(x_test, y_test, verbose=0)
    print(f"test loss {loss:.4f}, accuracy {acc:.4f}")
    logits = model.predict(x_test[:8], verbose=0)
    print("predicted", logits.argmax(axis=1), "true", y_test[:8])

    # A fresh model, built from a placeholder, takes the best checkpoint's states.
    fresh = make_model()
    fresh.compile([hl.Placeholder((1, 1, 8, 8))], is_train=False,
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    aux = fresh.load_states(best)
    print(f"reloaded the checkpoint of epoch {aux['epoch']}: test accuracy "
          f"{fresh.evaluate(x_test, y_test, verbose=0)[1]:.4f}")
    try:
        history.plot(os.path.join(out, "history.png"))
        print(f"curves drawn to {os.path.join(out, 'history.png')}")
    except ImportError as e:
        print(e)
    return acc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", help="folder for the checkpoint, log and plot (default: a new "
                                  "temporary folder)")
    args = ap.parse_args()
    main(args.out or tempfile.mkdtemp(prefix="hl-keras-style-"))
