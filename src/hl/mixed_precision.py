"""Keras's mixed-precision front door: dtype policies.

    hl.mixed_precision.set_global_policy("mixed_float16")   # or "mixed_bfloat16", "float32"
    model = ...                                              # layers take the global policy
    model.compile(optimizer="adam", loss="cross_entropy")
    model.fit(x, y)                                          # forward under autocast, the loss
                                                             # scaled (float16) as Keras's
                                                             # LossScaleOptimizer does

A Policy has Keras's ``name``, ``compute_dtype`` and ``variable_dtype``: variables (hl's
parameters) stay float32 and a mixed policy computes under hl.amp.autocast in its half type
on the layer's device, so matmul and convolution run in half and reductions, softmax, losses
and norms in float32 (docs/amp.md). A layer takes the global policy current when it is
constructed (``layer.dtype_policy``; assignable); calling a layer whose policy is mixed opens
an autocast region for its forward unless one is open already. Losses read half predictions
as float32 (Keras's losses cast y_pred to their float32 dtype).

On the CPU "mixed_bfloat16" is hl's emulated bfloat16 (float32 compute on bfloat16-rounded
matmul/conv operands), and "mixed_float16" is refused when the forward runs (the CPU has no
float16 arithmetic).
"""
import threading

from . import dtypes as _dt
from . import errors
from .autograd.autocast import autocast
from .autograd.autocast import state as _autocast_state

_NAMES = {"float32": None, "mixed_float16": _dt.float16, "mixed_bfloat16": _dt.bfloat16}
POLICY_NAMES = frozenset(_NAMES)
# Keras's LossScaleOptimizer defaults: fit uses them for "mixed_float16"
LOSS_SCALE_INITIAL = 2.0 ** 15
LOSS_SCALE_GROWTH_STEPS = 2000


class Policy:
    __slots__ = ("name", "_half")

    def __init__(self, name):
        if isinstance(name, Policy):
            name = name.name
        if name not in _NAMES:
            raise errors.ValueError(f"mixed_precision.Policy: unknown policy {name!r}; expected "
                                    f"one of {sorted(_NAMES)}")
        self.name = name
        self._half = _NAMES[name]

    @property
    def compute_dtype(self):
        return (self._half or _dt.float32).name

    @property
    def variable_dtype(self):
        return "float32"

    @property
    def mixed(self):
        return self._half is not None

    @property
    def needs_loss_scaling(self):
        """float16's range needs it (bfloat16 has float32's exponent)."""
        return self._half is _dt.float16

    def autocast(self, device_kind):
        """The autocast region this policy computes a forward on device_kind in."""
        return autocast(device_kind, dtype=self._half, enabled=self._half is not None)

    def __eq__(self, other):
        return isinstance(other, Policy) and other.name == self.name

    def __hash__(self):
        return hash(self.name)

    def __reduce__(self):
        return (Policy, (self.name,))

    def __repr__(self):
        return f'<DTypePolicy "{self.name}">'


FLOAT32 = Policy("float32")
_global = threading.local()  # per thread, as hl's autocast state; the default is float32


def set_global_policy(policy):
    """Keras's set_global_policy: "float32", "mixed_float16", "mixed_bfloat16" or a Policy;
    layers constructed afterwards take it."""
    _global.policy = FLOAT32 if policy is None else Policy(policy)


def global_policy():
    return getattr(_global, "policy", FLOAT32)


def autocast_needed(policy):
    """True when a forward under policy should open an autocast region: the policy is mixed
    and no region is open on this thread."""
    return policy is not None and policy._half is not None and not _autocast_state.active


def device_kind_of(xs):
    for x in xs:
        if hasattr(x, "_h"):
            target = getattr(x, "_target", None)
            return (target if target is not None else x.device).kind
    return None


def variable_inputs(xs):
    """What a layer's initialize() sees inside an autocast region: half inputs as float32, so
    the parameters it makes from their dtype are float32 (Keras's variable dtype)."""
    if not _autocast_state.active:
        return xs
    return tuple(x.astype(_dt.float32) if getattr(x, "dtype", None) in _HALVES else x
                 for x in xs)


_HALVES = (_dt.float16, _dt.bfloat16)
