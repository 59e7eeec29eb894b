"""The tracer: what a Module's forward does, op by op, while to_onnx traces it.

It is installed as hl.autograd.mode.trace_state.tracer for the trace's duration (per thread).
Function.__call__ hands it every op call (Function-level hook, hl/autograd/function.py), ops
without a gradient included: comparisons, argmax and topk's positions take their Function
path while a trace runs (``hl.autograd.function.tracing``). Layer.__call__ and the runner of
imported graphs push a name scope (``Tracer.scope``), so each op is recorded with the
innermost layer (or imported node) that ran it. Nothing is patched and no stack frame is read.
"""
import contextlib
import threading

from ..._tensor import Tensor
from ...autograd import enable_grad
from ...autograd.mode import trace_state

# One trace at a time per process: a trace switches the model's layers to eval() mode.
_TRACE_LOCK = threading.RLock()


class Record:
    """One op call: the Function, its arguments as they were before forward, its inputs and
    outputs (tensors or placeholders; None for an omitted input), and the layer that ran it."""
    __slots__ = ("fn", "cfg", "xs", "ys", "layer")

    def __init__(self, fn, cfg, xs, ys, layer):
        self.fn, self.cfg, self.xs, self.ys, self.layer = fn, cfg, tuple(xs), ys, layer


class Tracer:
    """Runs each op it is handed (with itself switched off, so the ops an op runs inside are
    not seen) and records it under the innermost scope. The outputs of an op that read a
    traced value are marked requires_grad, so the ops after it record too (a comparison's
    mask, argmax's indices)."""

    def __init__(self, layer_paths):
        self.records = []
        self.paths = layer_paths  # id(layer) -> its path in the traced model ("conv1")
        self.scopes = []          # the names of the layers / imported nodes running, innermost last
        self.handles = {}         # id of a made tensor's core handle -> the tensor (see alias())

    def __call__(self, fn, xs):
        cfg = fn.__dict__.copy()
        trace_state.tracer = None
        try:
            ys = fn(*xs)
        finally:
            trace_state.tracer = self
        self.note(fn, cfg, xs, ys)
        return ys

    def note(self, fn, cfg, xs, ys):
        ys_t = ys if isinstance(ys, tuple) else (ys,)
        traced = any(isinstance(x, Tensor) and x.requires_grad for x in xs)
        for y in ys_t:
            if isinstance(y, Tensor):
                if traced:
                    y.requires_grad = True
                self.handles[id(y._h)] = y
        self.records.append(Record(fn, cfg, xs, ys_t, self.scopes[-1] if self.scopes else None))

    @contextlib.contextmanager
    def scope(self, owner):
        """Ops run inside are recorded under ``owner``: a layer of the traced model (named by
        its path; the root model and layers outside it push nothing) or a name (an imported
        graph's node)."""
        name = owner if isinstance(owner, str) else self.paths.get(id(owner))
        if not name:
            yield
            return
        self.scopes.append(name)
        try:
            yield
        finally:
            self.scopes.pop()

    def alias(self, t):
        """The traced tensor that ``t`` is a detached handle of, or None."""
        y = self.handles.get(id(t._h))
        return y if y is not None and y is not t else None

    def run(self, call):
        with _TRACE_LOCK:
            trace_state.tracer = self
            try:
                with enable_grad():  # every op on a traced input records (and reaches us)
                    return call()
            finally:
                trace_state.tracer = None
