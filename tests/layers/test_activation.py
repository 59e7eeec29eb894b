"""Activation layers against torch.nn: forward and gradient."""
import numpy as np
import pytest

import hl
from hl import layers as L

from .reference import compare

torch = pytest.importorskip("torch")
nn = torch.nn

CASES = [(L.ReLU(), nn.ReLU()), (L.LeakyReLU(), nn.LeakyReLU()),
         (L.LeakyReLU(0.2), nn.LeakyReLU(0.2)), (L.ELU(), nn.ELU()),
         (L.ELU(0.5), nn.ELU(0.5)), (L.SELU(), nn.SELU()), (L.GELU(), nn.GELU()),
         (L.GELU("tanh"), nn.GELU("tanh")), (L.Sigmoid(), nn.Sigmoid()), (L.Tanh(), nn.Tanh()),
         (L.Softplus(), nn.Softplus()), (L.SiLU(), nn.SiLU()), (L.Swish(), nn.SiLU()),
         (L.Mish(), nn.Mish()), (L.HardSigmoid(), nn.Hardsigmoid()),
         (L.HardSwish(), nn.Hardswish()), (L.Softmax(), nn.Softmax(-1)),
         (L.Softmax(1), nn.Softmax(1)), (L.LogSoftmax(), nn.LogSoftmax(-1)),
         (L.LogSoftmax(0), nn.LogSoftmax(0))]


@pytest.mark.parametrize("layer,tmod", CASES, ids=[f"{type(c[0]).__name__}-{i}"
                                                   for i, c in enumerate(CASES)])
def test_activation_matches_torch(layer, tmod):
    # values away from the kinks at 0 and +-3, where one-sided derivatives differ
    x = np.random.default_rng(0).uniform(-4, 4, (3, 4, 5)).astype(np.float32)
    x[np.abs(x) < 0.05] = 0.5
    x[np.abs(np.abs(x) - 3) < 0.05] = 1.5
    compare(layer, tmod, x, {})


def test_placeholders_and_repr():
    assert L.Softmax(1)(hl.Placeholder((2, 3))).shape == (2, 3)
    assert L.GELU()(hl.Placeholder((2, 3))).shape == (2, 3)
    assert repr(L.LeakyReLU(0.2)) == "LeakyReLU(negative_slope=0.2)"
    assert repr(L.ReLU()) == "ReLU()"


def test_errors():
    with pytest.raises(hl.errors.IndexError, match=r"Softmax: axis 2 is out of range for an "
                                                   r"input of shape \(2, 3\)"):
        L.Softmax(2)(hl.zeros(2, 3))
    with pytest.raises(hl.errors.ValueError, match="approximate must be"):
        L.GELU("fast")
