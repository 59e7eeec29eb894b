"""PyTorch's habits in hl: a module written as a torch.nn.Module would be, trained with the
loop PyTorch users type without thinking (forward, loss.backward(), opt.step(),
opt.zero_grad()), evaluated under no_grad, and saved and restored through state_dict.

    python examples/pytorch_style.py
"""
import numpy as np

import hl
from hl import layers as nn   # the layers read as torch.nn's


class MLP(hl.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.1),
                                  nn.Linear(64, 10))

    def forward(self, x):
        return self.body(x)


def batches(x, y, size, rng):
    order = rng.permutation(len(x))
    for i in range(0, len(x), size):
        idx = order[i:i + size]
        yield hl.tensor(x[idx]), hl.tensor(y[idx])


def main(epochs=10):
    (x_train, y_train), (x_test, y_test) = hl.data.digits(flat=True)   # (N, 64) in [0, 1]
    hl.manual_seed(0)
    model = MLP()
    model(hl.zeros(1, 64))                  # hl's layers create their weights on first call
    opt = hl.optim.Adam(lr=1e-3, params=model.parameters())
    rng = np.random.default_rng(0)
    for epoch in range(epochs):
        model.train()
        total = 0.0
        for xb, yb in batches(x_train, y_train, 32, rng):
            loss = hl.losses.softmax_cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
            total += float(loss.item()) * len(xb)
        print(f"epoch {epoch + 1}: loss {total / len(x_train):.4f}")

    model.eval()
    with hl.no_grad():
        acc = float((model(hl.tensor(x_test)).numpy().argmax(1) == y_test).mean())
    print(f"test accuracy {acc:.3f}")

    snapshot = {k: v.numpy().copy() for k, v in model.state_dict().items()}
    restored = MLP()
    restored(hl.zeros(1, 64))
    report = restored.load_state_dict(snapshot)      # strict: every key must match
    assert report.missing_keys == [] and report.unexpected_keys == []
    with hl.no_grad():
        same = np.array_equal(restored.eval()(hl.tensor(x_test)).numpy(),
                              model(hl.tensor(x_test)).numpy())
    print(f"state_dict keys {list(snapshot)}; restored copy agrees: {same}")
    return acc


if __name__ == "__main__":
    main()
