"""Small models and data shared by the training tests."""
import numpy as np

import hl
from hl import layers as L


def mlp(hidden=16, classes=3, seed=0, in_shape=(5,), **compile_kw):
    """A two-layer MLP compiled both ways: built from a placeholder right away (so the seed
    alone fixes its weights) and Keras-style (SGD 0.1, cross-entropy, accuracy)."""
    hl.manual_seed(seed)
    m = hl.Sequential(L.Flatten(), L.Linear(hidden), L.ReLU(), L.Linear(classes))
    kw = dict(optimizer=hl.opt.SGD(lr=0.1), loss="cross_entropy", metrics=["accuracy"])
    kw.update(compile_kw)
    m.compile([hl.Placeholder((1,) + tuple(in_shape))], **kw)
    for _, layer in m.named_layers():  # compile's is_train set training mode: undo it
        layer.__dict__["_training"] = None
    return m


def blobs(n=120, features=5, classes=3, seed=0):
    """Three separable Gaussian clusters: float32 x (n, features), int64 labels (n,)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((classes, features)) * 3
    y = rng.integers(0, classes, n)
    x = centres[y] + rng.standard_normal((n, features))
    return x.astype(np.float32), y.astype(np.int64)


def states(model):
    """A numpy copy of every state, to compare weights before and after."""
    return {k: t.numpy().copy() for k, t in model.get_states().items()}


def same_states(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
