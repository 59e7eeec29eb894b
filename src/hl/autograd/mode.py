"""When autograd records: grad mode (per thread) and SINGA's `training` alias.

Recording happens when grad mode is on and an input of an op requires a gradient. Layers'
train()/eval() choose their own behaviour (dropout, batch-norm statistics); the module-level
`hl.autograd.training` flag is only the default for layers never switched explicitly, kept so
SINGA scripts that set `autograd.training = True` keep working.
"""
import contextlib
import threading

from .._grad_state import state


class _TraceState(threading.local):
    # hl.onnx.to_onnx's tracer while it traces a forward: Function.__call__ hands every op
    # call to it (see hl/onnx/export/trace.py). None otherwise, which costs one attribute read.
    tracer = None


trace_state = _TraceState()


def is_grad_enabled():
    return state.enabled


def set_grad_enabled(mode):
    state.enabled = bool(mode)


class _GradModeContext(contextlib.ContextDecorator):
    _mode = None

    def __enter__(self):
        self._prev = state.enabled
        state.enabled = self._mode

    def __exit__(self, *exc):
        state.enabled = self._prev
        return False


class no_grad(_GradModeContext):  # noqa: N801 - named like torch.no_grad
    """Context (or decorator) in which no op records a graph: for inference and for
    optimisers writing into parameters."""
    _mode = False


class enable_grad(_GradModeContext):  # noqa: N801
    """Turns recording back on inside a no_grad block."""
    _mode = True
