"""check_infer: an op's shape inference against what the op really returns.

``check_infer(f, inputs)`` runs ``f`` once on real tensors and once with hl.Placeholders in
place of the float inputs (or of the inputs listed in ``placeholders``), and asserts that
every output comes back as a Placeholder with the real output's shape and dtype.
"""
import numpy as np

import hl


def _outs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def check_infer(f, inputs, placeholders=None):
    arrays = [np.asarray(a) for a in inputs]
    arrays = [a.astype(np.float32) if a.dtype.kind == "f" else a for a in arrays]
    if placeholders is None:
        placeholders = [i for i, a in enumerate(arrays) if a.dtype.kind == "f"]
    real = _outs(f(*[hl.tensor(a) for a in arrays]))
    fake = _outs(f(*[hl.Placeholder(a.shape, hl.tensor(a).dtype) if i in placeholders
                     else hl.tensor(a) for i, a in enumerate(arrays)]))
    assert len(fake) == len(real)
    for i, (p, t) in enumerate(zip(fake, real)):
        assert isinstance(p, hl.Placeholder), f"output {i} is {type(p).__name__}, not inferred"
        assert p.shape == t.shape, f"output {i}: inferred {p.shape}, real {t.shape}"
        assert p.dtype is t.dtype, f"output {i}: inferred {p.dtype}, real {t.dtype}"
