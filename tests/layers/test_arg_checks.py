"""Constructor arguments are checked when a layer or an optimiser is made, with a message
naming the class and the argument (not later, inside the core, at the first call)."""
import pytest

import hl
from hl import layers as L

CASES = [
    (lambda: L.Linear(-3), r"Linear: out_features must be an int >= 1, got -3"),
    (lambda: L.Linear(2.5), r"Linear: out_features must be an int >= 1, got 2\.5 \(float\)"),
    (lambda: L.Dense(True), r"Dense: out_features must be an int >= 1, got True \(bool\)"),
    (lambda: L.Linear(0, 3), r"Linear: in_features must be an int >= 1, got 0"),
    (lambda: L.Conv2d(8, 0), r"Conv2d: kernel_size must be positive, got \(0, 0\)"),
    (lambda: L.Conv2d(0, 3), r"Conv2d: out_channels must be an int >= 1, got 0"),
    (lambda: L.Conv1d(4, 3, groups=0), r"Conv1d: groups must be an int >= 1, got 0"),
    (lambda: L.Conv2d(4, True), r"Conv2d: kernel_size must be an int or 2 ints, got True"),
    (lambda: L.LSTM(0), r"LSTM: hidden_size must be an int >= 1, got 0"),
    (lambda: L.GRU(4, num_layers=1.5), r"GRU: num_layers must be an int >= 1, got 1\.5"),
    (lambda: L.RNN(4, dropout=1.0), r"RNN: dropout must be a number in \[0, 1\), got 1\.0"),
    (lambda: L.Embedding(10, -1), r"Embedding: embedding_dim must be an int >= 1, got -1"),
    (lambda: L.BatchNorm2d(momentum=2), r"BatchNorm2d: momentum must be a number in \[0, 1\]"),
    (lambda: L.BatchNorm1d(eps=-1e-5), r"BatchNorm1d: eps must be a number >= 0"),
    (lambda: L.LayerNorm(0), r"LayerNorm: normalized_shape must be an int >= 1, got 0"),
    (lambda: L.Dropout("0.5"), r"Dropout: p \(a probability\) must be a number in \[0, 1\]"),
    (lambda: L.MultiHeadAttention(8, 0), r"MultiHeadAttention: num_heads must be an int >= 1"),
    (lambda: L.Reshape(2, -2), r"Reshape: each size must be an int >= -1, got -2"),
    (lambda: L.MaxPool2d(0), r"MaxPool2d: kernel_size must be positive"),
    (lambda: hl.opt.SGD(lr=-1), r"SGD: lr must be a finite number >= 0, got -1"),
    (lambda: hl.opt.Adam(lr=float("nan")), r"Adam: lr must be a finite number >= 0, got nan"),
    (lambda: hl.opt.SGD(lr=True), r"SGD: lr must be a finite number >= 0, got True"),
    (lambda: hl.opt.SGD(momentum=-0.5), r"SGD: momentum must be a finite number >= 0"),
    (lambda: hl.opt.Adam(beta_1=1.0), r"Adam: beta_1 must be in \[0, 1\), got 1\.0"),
    (lambda: hl.opt.RMSprop(eps=0), r"RMSProp: eps must be a finite number > 0, got 0"),
    (lambda: hl.opt.AdaGrad(lr_decay=-1), r"AdaGrad: lr_decay must be a finite number >= 0"),
]


@pytest.mark.parametrize("make, message", CASES, ids=[m.split(":")[0].replace("\\", "") + str(i)
                                                      for i, (_, m) in enumerate(CASES)])
def test_bad_arguments_fail_at_construction(make, message):
    with pytest.raises(hl.errors.ValueError, match=message):
        make()


def test_good_arguments_still_pass():
    import numpy as np
    assert L.Linear(np.int64(3)).out_features == 3  # numpy integers are sizes too
    assert L.Conv2d(4, (3, 3), in_channels=2).in_channels == 2
    assert L.Dropout(0).p == 0.0 and hl.opt.SGD(lr=0).lr == 0.0
