"""The main job: train the MNIST CNN of SINGA's documentation and report test accuracy.

    python -m hl.demo                  # on the shipped digits, upsampled to 28x28
    python -m hl.demo --mnist DIR      # on real MNIST IDX files in DIR
    python -m hl.demo --epochs 15 --batch-size 64 --lr 0.01 --seed 0

Conv2d(20, 5) -> ReLU -> MaxPool(2, 2) -> Conv2d(50, 5) -> ReLU -> MaxPool(2, 2) -> Flatten
-> Linear(500) -> ReLU -> Linear(10), softmax cross-entropy, SGD with momentum.
examples/train_cnn.py is the same, written as a script to read top to bottom.
"""
import argparse
import sys
import time

import numpy as np

import hl
from hl import layers as L


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
        self.loss_fn = hl.losses.SoftmaxCrossEntropy()

    def forward(self, x):
        y = self.pool1(self.conv1(x).relu())
        y = self.pool2(self.conv2(y).relu())
        return self.fc2(self.fc1(self.flatten(y)).relu())

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optim.backward_and_update(loss)
        return out, loss


def evaluate(model, x, y, batch_size=256):
    """Test accuracy, computed in eval mode without recording gradients."""
    model.eval()
    correct = 0
    with hl.no_grad():
        for i in range(0, len(x), batch_size):
            logits = model(hl.tensor(x[i:i + batch_size]))
            correct += int((logits.numpy().argmax(axis=1) == y[i:i + batch_size]).sum())
    model.train()
    return correct / len(x)


def train(data, epochs=15, batch_size=64, lr=0.01, seed=0, progress=True):
    """Trains the CNN on ((x_train, y_train), (x_test, y_test)); returns (model, accuracy)."""
    from tqdm import tqdm
    (x_train, y_train), (x_test, y_test) = data
    hl.manual_seed(seed)
    model = CNN()
    model.optim = hl.opt.SGD(lr=lr, momentum=0.9)
    model.compile([hl.Placeholder((batch_size, *x_train.shape[1:]))], is_train=True)
    loader = hl.data.DataLoader(x_train, y_train, batch_size=batch_size, shuffle=True,
                                seed=seed)
    for epoch in range(epochs):
        bar = tqdm(loader, desc=f"epoch {epoch + 1}/{epochs}", unit="batch",
                   disable=not progress, leave=True)
        seen = correct = 0
        for xb, yb in bar:
            out, loss = model.train_one_batch(hl.tensor(xb), hl.tensor(yb))
            correct += int((out.numpy().argmax(axis=1) == yb).sum())
            seen += len(yb)
            bar.set_postfix(loss=f"{loss.item():.4f}", acc=f"{correct / seen:.3f}")
    return model, evaluate(model, x_test, y_test)


def main(argv=None):
    ap = argparse.ArgumentParser(description="Train the MNIST CNN and print test accuracy.")
    ap.add_argument("--mnist", metavar="DIR", help="a folder with MNIST IDX files (gzipped or "
                    "not); without it, the shipped digits upsampled to 28x28")
    ap.add_argument("--epochs", type=int, default=None, help="default 15 (digits), 2 (MNIST)")
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--seed", type=int, default=0)
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
    model, acc = train(data, epochs, args.batch_size, args.lr, args.seed)
    print(f"test accuracy: {acc:.4f}  ({time.perf_counter() - t0:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
