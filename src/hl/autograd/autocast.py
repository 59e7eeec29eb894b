"""Autocast: inside an ``autocast`` region each op chooses the dtype it computes in.

PyTorch's rule (torch.amp, "Autocast Op Reference"), which hl keeps: a Function class says
what it wants in its ``autocast`` attribute, and ``Function.__call__`` casts its floating
inputs before forward runs, through recorded ``Cast`` ops, so gradients flow back to the
float32 tensors (parameters stay float32; their gradients arrive in float32):

    "half"     matmul, gemm, linear, conv, conv-transpose: float32 (and the other half type)
               inputs become the region's dtype (float16 or bfloat16); float64 is left alone
    "float32"  softmax, log-softmax, the losses, batch/layer/group norm, the reductions that
               can overflow or lose precision (sum, mean, prod, norms, logsumexp, var, cumsum),
               pow, exp, log and the other unary ops of PyTorch's float32 list:
               float16/bfloat16 inputs become float32
    None       everything else runs in whatever dtype its inputs have (element-wise ops,
               pooling, dropout; mixed inputs promote, as without autocast)

Within one region (outermost ``__enter__`` to its ``__exit__``) the half copy of a leaf
tensor that requires a gradient (a parameter) is made once and reused by every op that
reads it (PyTorch's cast cache); leaving the region drops the cache.

The state is per thread (threading.local, like PyTorch's): a region on one thread changes
nothing on another. Regions nest; ``enabled=False`` switches autocast off inside one.

**On the CPU** the kernels have no float16 or bfloat16 arithmetic (they store and cast
them only). hl therefore refuses ``autocast("cpu", dtype=float16)`` (UnsupportedError), and
runs ``autocast("cpu", dtype=bfloat16)`` honestly as what it is: the "half" ops compute in
float32 on operands rounded to bfloat16, and their result is rounded to bfloat16 too (kept in
float32 storage). The numbers are those of a bfloat16 GEMM with float32 accumulation; there
is no speed-up.
"""
import contextlib
import functools
import threading

from .. import dtypes as _dt
from .. import errors

DEVICE_TYPES = ("cuda", "cpu")
_HALVES = (_dt.float16, _dt.bfloat16)


class _State(threading.local):
    active = False     # any device type autocasting on this thread (the one read per op)
    cuda = None        # the dtype cuda ops autocast to, or None
    cpu = None         # the same for the CPU (bfloat16 only: emulated, see above)
    depth = 0          # nesting of enabled regions (the cast cache lives for the outermost)
    cache = None       # {id(leaf): (leaf, dtype, cast)} of the current outermost region
    paused = False     # set while an emulated op runs its float32 body


state = _State()

# hl.autograd.binary.cast (a recorded Cast), handed over by binary.py when it loads (it sits
# above function.py, which reads this module, so it cannot be imported from here)
cast = None


def is_autocast_enabled(device_type="cuda"):
    return getattr(state, _device_type(device_type)) is not None


def get_autocast_dtype(device_type="cuda"):
    """The dtype ops of ``device_type`` compute their "half" ops in, or None outside a region."""
    return getattr(state, _device_type(device_type))


def _device_type(device_type):
    kind = str(device_type).split(":")[0]
    if kind not in DEVICE_TYPES:
        raise errors.ValueError(f"autocast: device_type must be 'cuda' or 'cpu', got "
                                f"{device_type!r}")
    return kind


class autocast(contextlib.ContextDecorator):  # noqa: N801 - named like torch.autocast
    """``with hl.amp.autocast("cuda", dtype=hl.float16):`` (or as a decorator): matmul and
    convolution compute in half, reductions, softmax, losses and norms in float32 (the module
    docstring has the lists). ``enabled=False`` turns autocast off for the region."""

    def __init__(self, device_type="cuda", dtype=None, enabled=True, cache_enabled=True):
        self.device_type = _device_type(device_type)
        if dtype is None:
            dtype = _dt.float16 if self.device_type == "cuda" else _dt.bfloat16
        self.dtype = _dt.dtype(dtype)
        if self.dtype not in _HALVES:
            raise errors.DTypeError(f"autocast: dtype must be float16 or bfloat16, got "
                                    f"{self.dtype.name}")
        if enabled and self.device_type == "cpu" and self.dtype is _dt.float16:
            raise errors.UnsupportedError(
                "autocast('cpu', dtype=float16): hl's CPU kernels have no float16 arithmetic; "
                "use dtype=bfloat16 (computed in float32 on bfloat16-rounded operands) or "
                "autocast on 'cuda'")
        self.enabled = bool(enabled)
        self.cache_enabled = bool(cache_enabled)
        self._local = threading.local()  # one object may be entered on several threads

    @property
    def _saved(self):
        stack = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def __enter__(self):
        s = state
        self._saved.append((s.cuda, s.cpu, s.active, s.depth, s.cache))
        setattr(s, self.device_type, self.dtype if self.enabled else None)
        s.active = s.cuda is not None or s.cpu is not None
        if self.enabled:
            if s.depth == 0 or s.cache is None:
                s.cache = {} if self.cache_enabled else None
            s.depth += 1
        return self

    def __exit__(self, *exc):
        s = state
        s.cuda, s.cpu, s.active, s.depth, s.cache = self._saved.pop()
        return False

    def __call__(self, fn):
        # a fresh context per call, so a decorated function may recurse or run on threads
        @functools.wraps(fn)
        def wrapped(*args, **kwargs):
            with autocast(self.device_type, self.dtype, self.enabled, self.cache_enabled):
                return fn(*args, **kwargs)
        return wrapped


def _kind_of(xs):
    for x in xs:
        if x is not None and hasattr(x, "_h"):
            target = getattr(x, "_target", None)  # a placeholder stands for its target device
            return (target if target is not None else x.device).kind
    return None


def _cast(x, dtype):
    """x in dtype through a recorded cast; a parameter's cast made once per region."""
    cache = state.cache
    if cache is None or not (x.requires_grad and x.creator is None):
        return cast(x, dtype)
    hit = cache.get(id(x))
    # reuse only while the cast's graph is alive (a backward inside the region frees it)
    if hit is not None and hit[0] is x and hit[1] is dtype and (
            not hit[2].requires_grad or getattr(hit[2].creator, "src", None) is not None):
        return hit[2]
    y = cast(x, dtype)
    cache[id(x)] = (x, dtype, y)
    return y


def cast_inputs(fn, xs):
    """(inputs for fn under the current region, emulated): the inputs cast as fn's
    ``autocast`` asks; emulated is True when the CPU emulates bfloat16 for a "half" op (the
    caller runs the op in float32 and rounds its outputs with round_outputs)."""
    kind = _kind_of(xs)
    if kind is None or state.paused:
        return xs, False
    dtype = getattr(state, kind, None) if kind in DEVICE_TYPES else None
    if dtype is None:
        return xs, False
    want = fn.autocast
    out = []
    if want == "float32":
        for x in xs:
            out.append(_cast(x, _dt.float32)
                       if x is not None and hasattr(x, "_h") and x.dtype in _HALVES else x)
        return tuple(out), False
    emulate = kind == "cpu"  # no bfloat16 arithmetic: round operands, compute in float32
    for x in xs:
        if x is not None and hasattr(x, "_h") and x.dtype is not dtype and (
                x.dtype is _dt.float32 or x.dtype in _HALVES):
            h = _cast(x, dtype)
            x = cast(h, _dt.float32) if emulate else h
        out.append(x)
    return tuple(out), emulate


def round_outputs(ys, dtype):
    """The emulated op's float32 result rounded to dtype's precision, kept in float32."""
    if type(ys) is tuple:
        return tuple(round_outputs(y, dtype) for y in ys)
    if ys is None or not hasattr(ys, "_h") or ys.dtype is not _dt.float32:
        return ys
    return cast(cast(ys, dtype), _dt.float32)


def run_emulated(fn, xs):
    """fn on xs with autocast paused (its inputs are already cast), outputs rounded."""
    state.paused = True
    try:
        ys = fn(*xs)
    finally:
        state.paused = False
    return round_outputs(ys, state.cpu)
