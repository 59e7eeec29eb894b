"""The optimiser update kernel: one step of one parameter's update rule in one pass
(libcore's hl_optim_update; hl/opt/rules.py says which rule each optimiser runs and keeps the
element-wise sequence every rule equals, bit for bit)."""
import contextlib
import threading

from .. import _core
from .._tensor import Tensor

__all__ = ["optim_update", "optim_update_available", "skipped", "skipping_when"]

# The rules and flags of hl_optim_update (libcore/include/hl_core.h).
RULES = {"sgd": 0, "adam": 1, "rmsprop": 2, "adagrad": 3, "v2_momentum": 4, "v2_adam": 5}
FLAGS = {"nesterov": 1, "init": 2, "decoupled": 4, "centered": 8, "momentum": 16}

_OP = _core.op_code("optim_update")
_tls = threading.local()  # .skip: (flag tensor, set of ids of the params it skipped) or None


@contextlib.contextmanager
def skipping_when(flag):
    """Within the block, every optim_update call reads the 0-d bool tensor `flag` (on the
    parameter's device) when it runs and writes nothing when it is true (hl.amp's skipped
    steps). Yields the set of ids of the parameters so updated (the others, updated by a
    rule's element-wise sequence, need the caller's own guard)."""
    done = set()
    saved = getattr(_tls, "skip", None)
    _tls.skip = (flag, done)
    try:
        yield done
    finally:
        _tls.skip = saved


def skipped():
    """Whether this thread is inside a skipping_when block whose flag is set (reads the flag
    to the host: for eager steps only)."""
    skip = getattr(_tls, "skip", None)
    return skip is not None and bool(skip[0].item())


def _skip_flag(param):
    """The skip flag's handle for this update (the kernel reads it, on any device), or None."""
    skip = getattr(_tls, "skip", None)
    if skip is None:
        return None
    skip[1].add(id(param))
    return skip[0]._h


def optim_update_available(param, grad=None):
    """Whether param's device has the kernel for param's dtype and param can be updated in
    place by it (contiguous, and not sharing memory with grad: ``opt.update(p, p)``);
    elsewhere the rule runs as its element-wise sequence."""
    return _core.computes(param._h, _OP) and param.is_contiguous() and (
        grad is None or not _core.shares_storage(param._h, grad._h))


def optim_update(rule, param, grad, states, step_values, hyper, flags=()):
    """Updates param and the state tensors in place. ``step_values``: the per-step values,
    all Python floats (an eager step) or all 0-d tensors of param's dtype (read when a
    recorded plan replays); ``hyper``: the rule's constants (floats); ``flags``: names from
    FLAGS."""
    bits = 0
    for f in flags:
        bits |= FLAGS[f]
    tensors = isinstance(step_values[0], Tensor) if step_values else False
    _core.optim_update(RULES[rule], bits, param._h, grad._h, [s._h for s in states],
                       [v._h for v in step_values] if tensors else None,
                       None if tensors else [float(v) for v in step_values],
                       [float(h) for h in hyper], _skip_flag(param))
