"""hl's shipped digits for the training tests that compare runs on it (tests/cuda/
test_training.py: cuda against the CPU; tests/amp/test_training.py: mixed precision against
float32), and the small CNN both train."""
import numpy as np

import hl
from hl import layers as L


def digits(flat=True):
    """(x, y, x_test, y_test): float32 images, (n, 64) when flat, else (n, 1, 8, 8)."""
    (x, y), (xt, yt) = hl.data.digits()
    if flat:
        x, xt = x.reshape(len(x), -1), xt.reshape(len(xt), -1)
    return x.astype(np.float32), y, xt.astype(np.float32), yt


class SmallCNN(hl.Module):
    """Conv, batch norm, pooling, dense: a CNN training step's every kernel family."""

    def __init__(self):
        super().__init__()
        self.conv = L.Conv2d(8, 3, padding=1)
        self.bn = L.BatchNorm2d(8)
        self.pool = L.MaxPool2d(2, 2)
        self.flatten = L.Flatten()
        self.fc = L.Linear(10)

    def forward(self, x):
        return self.fc(self.flatten(self.pool(self.bn(self.conv(x)).relu())))
