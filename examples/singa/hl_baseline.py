"""hl's own API on the data and settings of examples/singa/run_singa_examples.py: SINGA's
examples/cnn "cnn" and "mlp" models written with hl.Module and hl.layers, trained with the
same loop (SGD lr 0.005, momentum 0.9, weight decay 1e-5, batch 32, the same augmentation for
the CNN: 4-pixel symmetric padding, random crop, random horizontal flip), on hl's digits at
28x28. It prints the accuracies the SINGA programs print, for docs/singa.md.

    python examples/singa/hl_baseline.py [--epochs 6]
"""
import argparse
import time

import numpy as np

import hl
from hl import layers


class CNN(hl.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.conv1 = layers.Conv2d(20, 5)
        self.conv2 = layers.Conv2d(50, 5)
        self.pool1 = layers.MaxPool2d(2, 2)
        self.pool2 = layers.MaxPool2d(2, 2)
        self.linear1 = layers.Linear(500)
        self.linear2 = layers.Linear(num_classes)

    def forward(self, x):
        y = self.pool1(hl.relu(self.conv1(x)))
        y = self.pool2(hl.relu(self.conv2(y)))
        return self.linear2(hl.relu(self.linear1(hl.flatten(y, 1))))


class MLP(hl.Module):
    def __init__(self, num_classes=10):
        super().__init__()
        self.linear1 = layers.Linear(100)
        self.linear2 = layers.Linear(num_classes)

    def forward(self, x):
        return self.linear2(hl.relu(self.linear1(x)))


def augment(x, rng):
    """SINGA's train_cnn.py augmentation: symmetric 4-pixel padding, a random crop back to the
    image size, and a horizontal flip half the time."""
    pad = np.pad(x, [[0, 0], [0, 0], [4, 4], [4, 4]], "symmetric")
    size = x.shape[2]
    for i in range(len(x)):
        oy, ox = rng.integers(8, size=2)
        x[i] = pad[i, :, oy:oy + size, ox:ox + size]
        if rng.integers(2):
            x[i] = x[i, :, :, ::-1]
    return x


def train(kind, epochs, batch=32, lr=0.005, seed=0):
    hl.manual_seed(seed)
    rng = np.random.default_rng(seed)
    (x, y), (xt, yt) = hl.data.digits(size=28)
    x, xt = np.asarray(x), np.asarray(xt)
    if kind == "mlp":
        x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    model = CNN() if kind == "cnn" else MLP()
    sgd = hl.opt.SGD(lr=lr, momentum=0.9, weight_decay=1e-5)
    loss_fn = hl.losses.SoftmaxCrossEntropy()
    idx = np.arange(len(x))
    for epoch in range(epochs):
        t0 = time.time()
        rng.shuffle(idx)
        model.train()
        correct = 0
        for b in range(len(x) // batch):
            xb = x[idx[b * batch:(b + 1) * batch]].copy()
            if kind == "cnn":
                xb = augment(xb, rng)
            yb = y[idx[b * batch:(b + 1) * batch]]
            out = model(hl.tensor(xb))
            sgd.backward_and_update(loss_fn(out, hl.tensor(yb)))
            correct += int((out.numpy().argmax(1) == yb).sum())
        model.eval()
        test = 0
        with hl.no_grad():
            for b in range(len(xt) // batch):
                out = model(hl.tensor(xt[b * batch:(b + 1) * batch]))
                test += int((out.numpy().argmax(1) == yt[b * batch:(b + 1) * batch]).sum())
        print(f"{kind} epoch {epoch}: training accuracy = "
              f"{correct / (len(x) // batch * batch):.6f}, evaluation accuracy = "
              f"{test / (len(xt) // batch * batch):.6f}, {time.time() - t0:.1f}s", flush=True)


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--models", nargs="*", default=["cnn", "mlp"])
    a = ap.parse_args()
    for k in a.models:
        train(k, a.epochs)
