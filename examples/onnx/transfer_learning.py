"""Transfer learning with an imported ONNX model: a ResNet-18 body from the model zoo, frozen,
with a new Linear head trained on hl's handwritten digits.

    python examples/onnx/transfer_learning.py [path/to/resnet18.onnx]

Steps:
1. import the ONNX file as a trainable hl Module (hl.onnx.ONNXModel);
2. subclass it: keep the graph up to the pooled features (last_layers=-3 stops before the
   classifier, counted as SINGA does), put a Linear head on top;
3. freeze the imported weights (its batch norms then keep their statistics, as in Keras);
4. train the head with fit, and evaluate.

The zoo's ResNet-18 has random weights (see ../shared/onnx-zoo/README.md), so its features
are random projections: the head still learns from them, which is what this walk-through
shows. With a pretrained file the same script fine-tunes real features.
"""
import os
import sys

import numpy as np

import hl

HERE = os.path.dirname(os.path.abspath(__file__))
ZOO = os.environ.get("HL_ONNX_ZOO", os.path.join(HERE, "..", "..", "..", "shared", "onnx-zoo"))


class DigitNet(hl.onnx.ONNXModel):
    def __init__(self, onnx_model, classes=10):
        super().__init__(onnx_model)
        # Random-weight features differ little from image to image, so the head
        # standardises them (BatchNorm1d) before its Linear layer.
        self.norm = hl.layers.BatchNorm1d()
        self.head = hl.layers.Linear(classes)

    def forward(self, x):
        feats = super().forward(x, last_layers=-3)[0]  # Flatten's output: pooled features
        return self.head(self.norm(feats))


def digits_for_resnet(size=64):
    """The 8x8 grey digits, upsampled to size x size and repeated over 3 channels."""
    (x_train, y_train), (x_test, y_test) = hl.data.digits(size=size)
    rgb = lambda x: np.ascontiguousarray(np.repeat(x, 3, axis=1))  # noqa: E731
    return (rgb(x_train), y_train), (rgb(x_test), y_test)


def main(path=None, epochs=3, train_size=None, verbose=2):
    hl.manual_seed(0)
    path = path or os.path.join(ZOO, "resnet18-op17.onnx")
    model = DigitNet(path)
    frozen = model.freeze()  # every imported weight; the head is not an ONNX parameter
    if verbose:
        print(f"froze {len(frozen)} imported parameters; training the new head")
    (x_train, y_train), (x_test, y_test) = digits_for_resnet()
    if train_size:
        x_train, y_train = x_train[:train_size], y_train[:train_size]
    model.compile(optimizer=hl.opt.Adam(lr=0.01), loss="cross_entropy", metrics=["accuracy"])
    history = model.fit(x_train, y_train, epochs=epochs, batch_size=32, verbose=verbose)
    loss, acc = model.evaluate(x_test, y_test, verbose=0)
    if verbose:
        print(f"training loss {history.history['loss'][0]:.3f} -> "
              f"{history.history['loss'][-1]:.3f}; test accuracy {acc:.3f}")
    return history, acc


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
