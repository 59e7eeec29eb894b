"""Function: the base of every differentiable op.

An op is a class (Chainer's design): non-tensor arguments go to ``__init__``, tensors to the
call. A subclass implements

    forward(self, *xs)   -> Tensor or tuple of Tensors, computed with hl.ops (it runs with
                            grad mode off, so nothing inside records); it keeps on ``self``
                            what backward will need
    backward(self, *dys) -> one gradient per input (a tuple, or a single Tensor for one
                            input); None where ``self.needs[i]`` is False or no gradient exists

There is no separate shape inference: when an input is a placeholder (compile), forward runs
on meta tensors, where every core entry point checks its arguments and computes its output's
shape and dtype without memory, and the outputs come back as placeholders.

Calling the op runs forward. When grad mode is on and an input requires a gradient, the
outputs remember the op (``y.creator``) and the op remembers where its inputs came from, so
``hl.autograd.backward`` can walk back. Without that, the op object is dropped at once with
whatever it saved.
"""
import weakref

from .. import _core
from .._tensor import Tensor
from . import autocast as _amp
from .mode import state as _grad
from .mode import trace_state as _trace
from .placeholder import Placeholder, adopt, as_meta


def tracing(*xs):
    """True while hl.onnx.to_onnx traces a forward and one of ``xs`` is a traced tensor. Ops
    without a gradient (comparisons, argmax, topk's positions) normally run plain; then they
    take their Function path, so that the hook in Function.__call__ hands them to the tracer."""
    if _trace.tracer is None:
        return False
    return any(isinstance(x, Tensor) and x.requires_grad for x in xs)


class Function:
    differentiable = True  # False: shape inference only (comparisons, argmax, ...)
    needs = None   # per input: does it need a gradient (set when recording)
    src = None     # per input: (creator, output index), (None, leaf tensor) or None
    outs = None    # weak references to the outputs, for intermediate tensors that store grads
    out_specs = None  # (shape, dtype, device) of each output of an op with several
    autocast = None   # inside hl.amp.autocast: "half" or "float32" (see autograd/autocast.py)
    grad_into = None  # set by the engine for one backward: per input, where its gradient goes

    def into(self, i, like):
        """Where backward may write the gradient of input i: the destination the engine
        offers for it (a data-parallel gradient bucket, see engine.backward) when it has
        ``like``'s dtype and device kind, else None (the op makes its own tensor, which the
        engine then copies in). An op writes a destination only as the final result of
        that one input."""
        offers = self.grad_into
        if offers is None:
            return None
        d = offers[i]
        if d is None or d.dtype is not like.dtype or not _same_device(d, like):
            return None
        return d

    def forward(self, *xs):
        raise NotImplementedError

    def backward(self, *dys):
        raise NotImplementedError(f"{type(self).__name__} has no gradient")

    @property
    def name(self):
        return type(self).__name__

    def __call__(self, *xs):
        if _trace.tracer is not None:  # hl.onnx.to_onnx is tracing a forward: it sees each op
            return _trace.tracer(self, xs)
        if self.autocast is not None and _amp.state.active:
            xs, emulated = _amp.cast_inputs(self, xs)
            if emulated:  # CPU bfloat16: float32 compute on rounded operands, result rounded
                return _amp.run_emulated(self, xs)
        recording = False
        for x in xs:
            if x is None:
                continue
            if x.__class__ is Placeholder:
                return self._on_meta(xs)
            if x.requires_grad:
                recording = _grad.enabled and self.differentiable
        if not recording:
            return self.forward(*xs)
        self.needs = tuple(x is not None and x.requires_grad for x in xs)
        # SINGA's export form, hl.onnx.to_onnx([x], [y]), rebuilds the graph from these
        # records, and an input that needs no gradient gets no edge below: where there is one
        # (a constant, a frozen weight, an input batch), the op keeps its inputs for it until
        # release(). (The whole tuple: sorting out the constants costs more than it saves.)
        self.const_inputs = xs if False in self.needs else None
        _grad.enabled = False  # operators inside forward must not record themselves
        try:
            ys = self.forward(*xs)
        finally:
            _grad.enabled = True
        self.src = tuple(_edge(x) for x in xs)
        if type(ys) is tuple:
            ys = tuple(self._link(y, i, xs) for i, y in enumerate(ys))
            self.outs = tuple(weakref.ref(y) for y in ys)
            # kept for the zeros the engine hands backward for an output that got no
            # gradient: by then that output may be gone (`split(x)[0]`, `topk(x, k)[0]`)
            self.out_specs = tuple((y.shape, y.dtype, y.device) for y in ys)
        else:
            ys = self._link(ys, 0, xs)
            self.outs = (weakref.ref(ys),)
        return ys

    def _link(self, y, index, xs):
        for x in xs:
            if y is x:  # an op that hands back its input unchanged gets a fresh handle
                y = y.detach()
                break
        y.requires_grad = True
        y.creator = self
        y.out_index = index
        return y

    def _on_meta(self, xs, target=None):
        """forward on meta tensors: the placeholders' own, and real inputs (a layer's weights)
        as meta tensors of their shape; the outputs stand for tensors on the placeholders'
        device (`target` when no input is a placeholder)."""
        target = next((x._target for x in xs if x.__class__ is Placeholder), target)
        # tensors the op was given as arguments (batch norm's running statistics) take part
        # as meta tensors too; the op object is this call's alone, so nothing else sees them
        for k, v in vars(self).items():
            if isinstance(v, Tensor):
                setattr(self, k, as_meta(v))
        ys = self.forward(*[as_meta(x) for x in xs])
        if type(ys) is tuple:
            return tuple(adopt(y, target) for y in ys)
        return adopt(ys, target)

    def release(self):
        """Drops what forward saved (called once backward has passed this op)."""
        self.__dict__.clear()


def _edge(x):
    if x is None or not x.requires_grad:
        return None
    if x.creator is not None:
        return (x.creator, x.out_index)
    return (None, x)


def _same_device(a, b):
    return _core.device_of(a._h) == _core.device_of(b._h)


def sum_to(dy, shape, out=None):
    """dy summed over the axes that broadcasting added or stretched, so it has `shape`: the
    gradient of a broadcast input (written into ``out``, of that shape, when given and a sum
    is needed)."""
    if dy.shape == tuple(shape):
        return dy
    from .. import ops
    lead = dy.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(
        lead + i for i, d in enumerate(shape) if d == 1 and dy.shape[lead + i] != 1)
    if out is not None and axes:
        kept = tuple(1 if i in axes else d for i, d in enumerate(dy.shape))
        ops.reduction("sum", dy, axes, True, out=ops.reshape_forward(out, *kept))
        return out
    s = ops.reduction("sum", dy, axes, True) if axes else dy
    return ops.reshape_forward(s, *shape) if s.shape != tuple(shape) else s


__all__ = ["Function", "Tensor", "sum_to"]
