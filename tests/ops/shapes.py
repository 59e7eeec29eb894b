"""Random shapes for op tests: plain shapes with size-0 and size-1 axes and 0-d, and pairs or
triples of shapes that broadcast together (numpy rules)."""
import numpy as np

SIZES = (0, 1, 1, 2, 3, 5)


def random_shape(rng, max_ndim=4, sizes=SIZES, allow_empty=True):
    """A shape of 0..max_ndim axes drawn from sizes (0 only when allow_empty)."""
    nd = int(rng.integers(0, max_ndim + 1))
    pool = [s for s in sizes if allow_empty or s]
    return tuple(int(rng.choice(pool)) for _ in range(nd))


def broadcast_shapes(rng, n=2, max_ndim=4, sizes=SIZES, allow_empty=True):
    """n shapes that broadcast together: each drops some leading axes of a common shape and
    turns some of the rest into 1."""
    full = random_shape(rng, max_ndim, sizes, allow_empty)
    out = []
    for _ in range(n):
        drop = int(rng.integers(0, len(full) + 1))
        s = [1 if rng.random() < 0.3 else d for d in full[drop:]]
        out.append(tuple(s))
    assert np.broadcast_shapes(*out) is not None
    return out


def fixed_cases():
    """Hand-picked broadcasting pairs that cover the edge cases every time."""
    return [((), ()), ((), (3,)), ((2, 3), ()), ((0,), (1,)), ((0, 3), (3,)), ((2, 1), (1, 3)),
            ((1,), (0,)), ((4, 1, 3), (5, 1)), ((1, 1, 1), (2, 3)), ((2, 0, 3), (2, 1, 3)),
            ((3, 4), (3, 4)), ((1, 2, 1, 2, 1, 2, 1, 2), (2, 1, 2, 1, 2, 1, 2, 1))]
