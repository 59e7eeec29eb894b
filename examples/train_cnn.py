"""Train the MNIST CNN from SINGA's documentation on the digits shipped with hl.

    python examples/train_cnn.py

The same job as `python -m hl.demo`, written to be read top to bottom: a model class with
forward and train_one_batch, compile with a placeholder, a training loop, a test accuracy.
"""
import numpy as np
from tqdm import tqdm

import hl
from hl import layers as L

EPOCHS, BATCH, LR = 15, 64, 0.01
hl.manual_seed(0)

# 1797 handwritten digits (8x8, UCI), upsampled to 28x28 so the MNIST CNN fits them as is.
(x_train, y_train), (x_test, y_test) = hl.data.digits(size=28)
print(f"{len(x_train)} training and {len(x_test)} test images of shape {x_train.shape[1:]}")


class CNN(hl.Module):
    def __init__(self):
        super().__init__()
        # No input sizes anywhere: each layer learns them on its first call (or at compile).
        self.conv1 = L.Conv2d(20, 5)
        self.conv2 = L.Conv2d(50, 5)
        self.pool = L.MaxPool2d(2, 2)
        self.fc1 = L.Linear(500)
        self.fc2 = L.Linear(10)
        self.loss_fn = hl.losses.SoftmaxCrossEntropy()
        self.optim = hl.opt.SGD(lr=LR, momentum=0.9)

    def forward(self, x):
        x = self.pool(self.conv1(x).relu())
        x = self.pool(self.conv2(x).relu())
        x = x.flatten(1)
        return self.fc2(self.fc1(x).relu())

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.loss_fn(out, y)
        self.optim.backward_and_update(loss)   # backward and SGD update, parameter by parameter
        return out, loss


model = CNN()
# A placeholder carries only a shape: compile creates every parameter without computing.
model.compile([hl.Placeholder((BATCH, 1, 28, 28))], is_train=True)
for name, p in model.get_params().items():
    print(f"  {name:10} {p.shape}")

loader = hl.data.DataLoader(x_train, y_train, batch_size=BATCH, shuffle=True, seed=0)
for epoch in range(EPOCHS):
    with tqdm(loader, desc=f"epoch {epoch + 1}/{EPOCHS}") as bar:
        for xb, yb in bar:
            out, loss = model.train_one_batch(hl.tensor(xb), hl.tensor(yb))
            bar.set_postfix(loss=f"{loss.item():.3f}")

model.eval()
with hl.no_grad():
    predicted = model(hl.tensor(x_test)).numpy().argmax(axis=1)
print(f"test accuracy: {np.mean(predicted == y_test):.4f}")
