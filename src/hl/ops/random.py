"""Random numbers from the core's counter-based generator (Philox 4x32-10).

The generator is a seed and an offset (a Philox counter). Each counter gives four 32-bit
words; a draw of n elements uses the counters offset .. offset + c - 1, with
c = ceil(n / 4) for float32 uniform and normal and for bernoulli (one word per element), and
c = ceil(n / 2) for float64 uniform and normal (two words per element), and then moves the
offset on by c (the core documents the same layout in libcore/src/api/random.c). So the numbers
depend on the seed and the order of draws, never on the thread count, and successive draws
never share a counter. ``manual_seed`` (or ``hl.random.seed``) restarts the sequence.
"""
import os
import threading

from .. import _core, errors
from .. import dtypes as _dt
from .creation import _shape_arg, accepts_requires_grad, empty


class Generator:
    """A seed and a counter offset; draws advance the offset by what they consume."""

    def __init__(self, seed=None):
        self._lock = threading.Lock()
        self.manual_seed(seed if seed is not None else int.from_bytes(os.urandom(8), "little"))

    def manual_seed(self, seed):
        with self._lock:
            self.seed = int(seed) & 0xFFFFFFFFFFFFFFFF
            self.offset = 0
        return self

    def _take(self, counters):
        """Reserves `counters` Philox counters; returns the first."""
        with self._lock:
            off = self.offset
            self.offset = (off + counters) & 0xFFFFFFFFFFFFFFFF
        return off

    def get_state(self):
        return {"seed": self.seed, "offset": self.offset}

    def __getstate__(self):  # the lock is not pickled; a fresh one comes back
        return self.get_state()

    def __setstate__(self, state):
        self._lock = threading.Lock()
        self.set_state(state)
    __setstate__.checks_its_state = True  # hl.load's unpickler admits it (set_state checks)

    def set_state(self, state):
        if not isinstance(state, dict) or \
                any(type(state.get(k)) is not int or not 0 <= state[k] < 2 ** 64
                    for k in ("seed", "offset")):
            raise errors.ValueError(f"Generator.set_state: expected {{'seed': int, 'offset': "
                                    f"int}} with values in [0, 2**64), got {state!r:.200}")
        with self._lock:
            self.seed, self.offset = state["seed"], state["offset"]


default_generator = Generator(0)


def manual_seed(seed):
    """Seeds hl's default generator."""
    return default_generator.manual_seed(seed)


seed = manual_seed


def counters_for(kind, dtype, n):
    """Philox counters a draw of n elements of dtype consumes (see the module docstring)."""
    per = 2 if kind != "bernoulli" and dtype is _dt.float64 else 4
    return -(-int(n) // per)


def _fill(kind, t, a, b, generator):
    g = generator or default_generator
    if not t.dtype.is_floating and kind != "bernoulli":
        raise errors.DTypeError(f"random {kind}: needs a float dtype, got {t.dtype.name}")
    _core.call("random_" + kind, t._h, g.seed, g._take(counters_for(kind, t.dtype, t.size)),
               float(a), *([float(b)] if b is not None else []))
    return t


def uniform(*shape, low=0.0, high=1.0, dtype=None, device=None, generator=None):
    """Uniform on [low, high)."""
    return _fill("uniform", empty(*_shape_arg(shape), dtype=dtype or _dt.float32, device=device),
                 low, high, generator)


def rand(*shape, dtype=None, device=None, generator=None):
    return uniform(*shape, dtype=dtype, device=device, generator=generator)


def normal(*shape, mean=0.0, std=1.0, dtype=None, device=None, generator=None):
    if std < 0:
        raise errors.ValueError(f"normal: std must be >= 0, got {std}")
    return _fill("normal", empty(*_shape_arg(shape), dtype=dtype or _dt.float32, device=device),
                 mean, std, generator)


def randn(*shape, dtype=None, device=None, generator=None):
    return normal(*shape, dtype=dtype, device=device, generator=generator)


def bernoulli(*shape, p=0.5, dtype=None, device=None, generator=None):
    """1 with probability p, else 0."""
    if not 0.0 <= p <= 1.0:
        raise errors.ValueError(f"bernoulli: p must be in [0, 1], got {p}")
    return _fill("bernoulli", empty(*_shape_arg(shape), dtype=dtype or _dt.float32,
                                    device=device), p, None, generator)


for _name in ("uniform", "rand", "normal", "randn", "bernoulli"):
    globals()[_name] = accepts_requires_grad(globals()[_name])

__all__ = ["Generator", "default_generator", "manual_seed", "uniform", "rand", "normal",
           "randn", "bernoulli"]
