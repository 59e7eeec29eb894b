"""check_infer: an op run on hl.Placeholders infers the shape and dtype that running it on real
tensors gives (what Module.compile relies on)."""
import numpy as np

import hl


def _outputs(y):
    return list(y) if isinstance(y, (tuple, list)) else [y]


def check_infer(f, inputs, dtype=np.float32, placeholders=None):
    """f on placeholders standing for the arrays in inputs (floats as `dtype`) against f on
    the real tensors: same number of outputs, shapes and dtypes; placeholders come back.
    `placeholders` lists the inputs to replace (all by default); the others stay tensors."""
    inputs = [np.asarray(a) for a in inputs]
    inputs = [a.astype(dtype) if a.dtype.kind == "f" else a for a in inputs]
    if placeholders is None:
        placeholders = range(len(inputs))
    real = _outputs(f(*[hl.tensor(a) for a in inputs]))
    fake = _outputs(f(*[hl.Placeholder(a.shape, hl.tensor(a).dtype) if i in placeholders
                        else hl.tensor(a) for i, a in enumerate(inputs)]))
    assert len(real) == len(fake)
    for r, p in zip(real, fake):
        assert isinstance(p, hl.Placeholder), f"got {type(p).__name__}, not a Placeholder"
        assert p.shape == r.shape, f"inferred {p.shape}, real {r.shape}"
        assert p.dtype is r.dtype, f"inferred {p.dtype}, real {r.dtype}"
