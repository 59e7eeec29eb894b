"""A script written for Apache SINGA's Model API runs with `hl` in place of `singa`: the
layer, optimiser and loss names, compile with SINGA's argument spellings, the global
`autograd.training` flag and train_one_batch returning (out, loss)."""
import numpy as np

import hl
from hl import autograd, layer, opt  # noqa: F401 - SINGA's module names


class CNN(hl.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(8, 3, padding=1)
        self.relu = layer.ReLU()
        self.pool = layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.drop = layer.Dropout(0.5)
        self.fc = layer.Linear(10)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        return self.fc(self.drop(self.flatten(self.pool(self.relu(self.conv1(x))))))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def test_singa_style_script_trains_and_evaluates():
    hl.manual_seed(0)
    (x, y), (xt, yt) = hl.data.digits()
    model = CNN()
    model.set_optimizer(opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5))
    tx = hl.Tensor(x[:64])
    model.compile([tx], is_train=True, use_graph=False, sequential=False)
    assert sorted(model.get_params()) == ["conv1.W", "conv1.b", "fc.W", "fc.b"]
    losses = []
    for epoch in range(8):
        for i in range(0, len(x) - 63, 64):
            out, loss = model.train_one_batch(hl.Tensor(x[i:i + 64]), hl.Tensor(y[i:i + 64]))
            losses.append(loss.item())
    assert np.mean(losses[-10:]) < 0.5 * np.mean(losses[:10])
    model.eval()
    with hl.no_grad():
        acc = hl.metrics.accuracy(model(hl.Tensor(xt)), yt)
    assert acc > 0.85


def test_global_training_flag_is_the_default_mode_of_layers():
    drop = layer.Dropout(0.5)
    x = hl.ones(1000)
    try:
        autograd.training = False            # a SINGA script switching to evaluation
        assert np.array_equal(drop(x).numpy(), x.numpy())
        autograd.training = True
        assert (drop(x).numpy() == 0).any()
        drop.eval()                          # the layer's own switch wins over the flag
        assert np.array_equal(drop(x).numpy(), x.numpy())
    finally:
        autograd.training = True


def test_autograd_functions_by_singa_names():
    x = hl.tensor(np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32))
    w = hl.Tensor(np.ones((3, 2), np.float32), requires_grad=True, stores_grad=True)
    y = autograd.relu(autograd.matmul(x, w))
    loss = autograd.softmax_cross_entropy(y, hl.tensor(np.array([0, 1, 0, 1])))
    loss = loss + autograd.mse_loss(y, hl.zeros(4, 2))
    pairs = list(autograd.backward(loss))
    assert len(pairs) == 1 and pairs[0][0] is w and pairs[0][1].shape == (3, 2)
