"""Keras's functional API in hl: a model with two inputs, a shared layer and two outputs,
trained with fit, summarised, saved and reloaded three ways, and exported to ONNX.

    python examples/functional_api.py [--out DIR]

The model reads a handwritten digit (the shipped 8x8 digits) twice: as its 64 pixels, and
as the ink in each of its 8 rows and 8 columns. One Dense layer is *shared* by both views
(it is called on two inputs, and owns its weights once); the two views are concatenated and
feed two heads: the digit (10 logits) and whether it is odd (1 logit).
"""
import argparse
import os
import tempfile

import numpy as np

import hl
from hl import layers as L


def make_model():
    pixels = hl.Input(shape=(64,), name="pixels")     # the batch axis is left unknown
    profile = hl.Input(shape=(16,), name="profile")
    shared = L.Dense(32, activation="relu")            # called twice below: one set of weights
    a = shared(L.Dense(64, activation="relu")(pixels))
    b = shared(L.Dense(64, activation="tanh")(profile))
    h = L.Dense(64, activation="relu")(L.Concatenate()([a, b]))
    digit = L.Dense(10, name="digit")(h)
    odd = L.Dense(1, name="odd")(h)
    return hl.Model(inputs=[pixels, profile], outputs=[digit, odd], name="two_views")


def both_losses(outputs, y):
    """A loss over both heads: fit hands a multi-output model's outputs to the loss as they
    are. y holds the digit; the odd head learns y % 2."""
    digit, odd = outputs
    odd_target = (y % 2).astype(hl.float32).reshape(-1, 1)
    return (hl.losses.softmax_cross_entropy(digit, y) +
            hl.losses.binary_cross_entropy_with_logits(odd, odd_target))


def views(x):
    """(pixels, row and column ink) of images (N, 1, 8, 8)."""
    img = x.reshape(len(x), 8, 8)
    return [x.reshape(len(x), 64), np.concatenate([img.sum(2), img.sum(1)], 1) / 8.0]


def accuracy(model, x, y):
    digit, odd = model.predict(views(x), verbose=0)
    return float((digit.argmax(1) == y).mean()), float(((odd[:, 0] > 0) == (y % 2)).mean())


def main(out):
    (x_train, y_train), (x_test, y_test) = hl.data.digits()
    hl.manual_seed(0)
    model = make_model()
    model.summary()

    model.compile(optimizer="adam", loss=both_losses)
    model.fit(views(x_train), y_train, batch_size=32, epochs=15, verbose=0)
    digit_acc, odd_acc = accuracy(model, x_test, y_test)
    print(f"test accuracy: digit {digit_acc:.3f}, odd {odd_acc:.3f}")

    # 1. the states (hl's archive: every weight by name, no pickle inside)
    states = os.path.join(out, "two_views.zip")
    model.save_states(states)
    fresh = make_model()          # the same code names the layers the same way
    fresh.load_states(states)
    # 2. the whole model (object graph and weights) with hl.save / hl.load
    whole = os.path.join(out, "two_views.hl")
    hl.save(model, whole)
    loaded = hl.load(whole, allowed=[both_losses])  # the loss is a function of this script:
    # hl.load admits no function a file names unless the caller allows it
    # 3. a PyTorch-style state dict
    again = make_model()
    again.load_state_dict(model.state_dict())
    for m in (fresh, loaded, again):
        assert accuracy(m, x_test, y_test) == (digit_acc, odd_acc)
    print("reloaded three ways: same predictions")

    # ONNX: the inputs come from hl.Input (axis 0 left dynamic), names and all
    onnx_path = os.path.join(out, "two_views.onnx")
    batch = {0: "batch"}  # one name: both inputs share the batch size
    hl.onnx.to_onnx(model, dynamic_axes={"pixels": batch, "profile": batch}, path=onnx_path)
    print(f"exported to {onnx_path}")
    return digit_acc, odd_acc


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="where to write the files (default: a temporary folder)")
    main(ap.parse_args().out or tempfile.mkdtemp(prefix="hl-functional-"))
