"""Linear against torch.nn.Linear (hl's W is (in, out): torch's weight transposed)."""
import numpy as np
import pytest

import hl
from hl.layers import Linear

from .reference import build, compare

torch = pytest.importorskip("torch")

LIN = {"W": ("weight", lambda w: w.T), "b": "bias"}


@pytest.mark.parametrize("shape", [(4, 7), (2, 3, 7), (7,)])
@pytest.mark.parametrize("bias", [True, False])
def test_linear_matches_torch(shape, bias):
    torch.manual_seed(0)
    tmod = torch.nn.Linear(7, 5, bias=bias)
    layer = Linear(5, bias=bias)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    compare(layer, tmod, x, LIN if bias else {"W": LIN["W"]})
    assert layer.W.shape == (7, 5)


def test_linear_errors():
    layer = Linear(3, 5)  # PyTorch's order: in, out
    with pytest.raises(hl.errors.ShapeError, match=r"Linear: expected input with 3 features "
                                                   r"in the last axis, received shape \(2, 4\)"):
        build(layer, np.zeros((2, 4), np.float32))
    assert Linear(5)(hl.Placeholder((2, 9))).shape == (2, 5)
