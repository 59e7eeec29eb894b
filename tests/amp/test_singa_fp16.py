"""SINGA's float16 path (train_cnn.py -p float16: float16 input tensors, opt.SGD(dtype=
float16)) on hl: the model trains under autocast on cuda with float32 parameters and reaches
the float32 run's test accuracy within 1%, as the script's loop drives it (compile, m(tx, ty),
m.eval(), m(tx)); graph mode on and off. On the CPU a float16 input is refused clearly."""
import numpy as np
import pytest

import hl
from hl.singa import device, layer, model, opt, tensor

@pytest.fixture(autouse=True)
def _singa_training_flag():
    """SINGA's m.eval() sets hl.autograd.training (a process-wide default) to False: put it
    back, so the layers of later tests that never chose a mode still train."""
    saved = hl.autograd.training
    yield
    hl.autograd.training = saved


np_dtype = {"float16": np.float16, "float32": np.float32}
singa_dtype = {"float16": tensor.float16, "float32": tensor.float32}


class CNN(model.Model):
    """SINGA's examples/cnn/model/cnn.py, scaled to 8x8 digits."""

    def __init__(self):
        super().__init__()
        self.conv1 = layer.Conv2d(1, 8, 3, padding=1, activation="RELU")
        self.pool1 = layer.MaxPool2d(2, 2)
        self.flatten = layer.Flatten()
        self.linear1 = layer.Linear(64)
        self.relu = layer.ReLU()
        self.linear2 = layer.Linear(10)
        self.softmax_cross_entropy = layer.SoftMaxCrossEntropy()

    def forward(self, x):
        y = self.flatten(self.pool1(self.conv1(x)))
        return self.linear2(self.relu(self.linear1(y)))

    def train_one_batch(self, x, y):
        out = self.forward(x)
        loss = self.softmax_cross_entropy(out, y)
        self.optimizer(loss)
        return out, loss

    def set_optimizer(self, optimizer):
        self.optimizer = optimizer


def _run(precision, graph, dev, epochs=3, batch=32):
    (x, y), (xt, yt) = hl.data.digits()
    x, xt = np.asarray(x), np.asarray(xt)
    y, yt = np.asarray(y).astype(np.int32), np.asarray(yt).astype(np.int32)
    hl.manual_seed(0)
    m = CNN()
    sgd = opt.SGD(lr=0.05, momentum=0.9, weight_decay=1e-5, dtype=singa_dtype[precision])
    tx = tensor.Tensor((batch, 1, 8, 8), dev, singa_dtype[precision])
    ty = tensor.Tensor((batch,), dev, tensor.int32)
    m.set_optimizer(sgd)
    m.compile([tx], is_train=True, use_graph=graph, sequential=False)
    for _ in range(epochs):
        m.train()
        for b in range(len(x) // batch):
            tx.copy_from_numpy(x[b * batch:(b + 1) * batch].astype(np_dtype[precision]))
            ty.copy_from_numpy(y[b * batch:(b + 1) * batch])
            out, loss = m(tx, ty)
    m.eval()
    correct = 0
    for b in range(len(xt) // batch):
        tx.copy_from_numpy(xt[b * batch:(b + 1) * batch].astype(np_dtype[precision]))
        out = tensor.to_numpy(m(tx))
        correct += int((out.argmax(1) == yt[b * batch:(b + 1) * batch]).sum())
    return correct / (len(xt) // batch * batch), m, out


@pytest.mark.gpu
@pytest.mark.parametrize("graph", [False, True])
def test_singa_float16_trains_like_float32_on_cuda(graph):
    dev = device.create_cuda_gpu()
    acc32, _, _ = _run("float32", graph, dev)
    acc16, m, out = _run("float16", graph, dev)
    assert acc32 > 0.85 and acc16 >= acc32 - 0.01, (acc16, acc32)
    # float32 master weights; the last matmul ran in float16
    assert all(p.dtype is hl.float32 for p in m.get_params().values())
    assert out.dtype == np.float16


def test_singa_float16_on_the_cpu_is_refused():
    dev = device.create_cpu_device()
    with pytest.raises(hl.errors.UnsupportedError, match="needs a cuda device"):
        _run("float16", False, dev, epochs=1)
