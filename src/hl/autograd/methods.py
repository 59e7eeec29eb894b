"""Tensor's methods and operators that run ops: one explicit table, installed on hl.Tensor
when hl.autograd is imported.

hl/_tensor.py defines what a tensor is (metadata, numpy interop, copies); everything that
computes goes through autograd's functional namespace, so ``x.relu()``, ``hl.relu(x)`` and a
ReLU layer record alike. Each name below is one line: ``x.name(*args)`` is
``functional.name(x, *args)``. To give a new op a method, add its name to METHODS.
"""
from .. import _core
from .._grad_state import state as _grad
from .._tensor import Tensor, _check_in_place, _wrap, as_tensor
from . import functional as F
from .engine import fill_grads

# x.name(*args, **kwargs) == functional.name(x, *args, **kwargs)
METHODS = (
    # element-wise
    "abs", "acos", "acosh", "asin", "asinh", "atan", "atanh", "ceil", "celu", "clamp", "clip",
    "cos", "cosh", "elu", "erf", "exp", "expm1", "floor", "gelu", "gelu_tanh", "hard_sigmoid",
    "hard_swish", "isfinite", "isinf", "isnan", "leaky_relu", "log", "log1p", "logical_not",
    "mish", "neg", "negative", "reciprocal", "relu", "round", "rsqrt", "selu", "sigmoid",
    "sign", "sin", "sinh", "softplus", "softsign", "sqrt", "square", "tan", "tanh", "trunc",
    "where",
    # binary arithmetic, comparisons and logic
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide",
    "floor_divide", "mod", "remainder", "fmod", "pow", "power", "maximum", "minimum", "eq",
    "equal", "ne", "not_equal", "lt", "less", "le", "less_equal", "gt", "greater", "ge",
    "greater_equal", "logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or",
    "bitwise_xor", "invert",
    # reductions
    "sum", "mean", "prod", "max", "min", "amax", "amin", "argmax", "argmin", "any", "all",
    "count_nonzero", "std", "var", "norm", "vector_norm", "logsumexp", "cumsum",
    # shapes and indexing
    "reshape", "view", "flatten", "permute", "transpose", "squeeze", "unsqueeze",
    "expand", "expand_dims", "flip", "split", "chunk", "tile", "pad", "tril", "triu",
    "gather", "gather_elements", "index_select", "take", "scatter_elements", "topk",
    "nonzero", "one_hot",
    # products and the softmax family
    "matmul", "dot", "inner", "outer", "gemm", "linear", "softmax", "log_softmax",
    # neural-network ops (functional forms; layers are in hl.layers)
    "conv1d", "conv2d", "conv_transpose1d", "conv_transpose2d", "max_pool1d", "max_pool2d",
    "avg_pool1d", "avg_pool2d", "global_avg_pool2d", "global_max_pool2d", "batch_norm",
    "layer_norm", "group_norm", "instance_norm", "dropout", "resize", "interpolate",
    "softmax_cross_entropy", "nll_loss",
    # casts, copies and tensors like this one
    "cast", "stack", "cat", "concat", "concatenate", "empty_like", "zeros_like", "ones_like",
    "full_like",
)


def _method(name):
    f = getattr(F, name)

    def method(self, *args, **kwargs):
        return f(self, *args, **kwargs)
    method.__name__ = method.__qualname__ = name
    method.__doc__ = f.__doc__
    return method


def _backward(self, dy=None, retain_graph=False):
    """Accumulates the gradient of this tensor into ``.grad`` of every leaf tensor that
    requires one (PyTorch style). For a tensor of more than one value pass ``dy``, its
    gradient. ``hl.autograd.backward`` is the SINGA-style generator."""
    fill_grads(self, dy, retain_graph)


def _astype(self, dtype):
    """A copy converted to dtype (see Tensor.astype), recorded when a gradient flows so that
    it flows back through the cast."""
    if self.requires_grad and _grad.enabled:
        return F.cast(self, dtype)
    return _plain_astype(self, dtype)


def _broadcast_to(self, shape):
    return F.expand(self, *shape)


def _iter(self):
    if not self.shape:
        raise TypeError("iteration over a 0-d tensor")
    for i in range(self.shape[0]):
        yield self[i]


def _setitem(self, key, value):
    _check_in_place(self, "setitem")
    F.setitem(self, key, value)


def _operator(name, reflected=False, core_op=None):
    code = _core.OPS[core_op] if core_op else None
    binary = _core.binary
    f = getattr(F, name)

    def method(self, other):
        # fast path: two plain tensors of one dtype, nothing to record, straight to the core
        # (placeholders, a Tensor subclass, take the Function path onto meta)
        if code is not None and other.__class__ is Tensor and self.__class__ is Tensor \
                and other._dtype is self._dtype \
                and not ((self.requires_grad or other.requires_grad) and _grad.enabled):
            if reflected:
                return _wrap(binary(code, other._h, self._h))
            return _wrap(binary(code, self._h, other._h))
        return f(other, self) if reflected else f(self, other)
    method.__name__ = name
    return method


def _in_place(name):
    f = getattr(F, name)

    def method(self, other):
        _check_in_place(self, "i" + name)
        f(self, other, out=self)
        return self  # the same object, so its name, grad and flags stay with it
    return method


# operator -> (functional name, the core op of its fast path)
OPERATORS = {
    "add": ("add", "add"), "sub": ("sub", "sub"), "mul": ("mul", "mul"),
    "truediv": ("true_divide", None), "floordiv": ("floor_divide", None), "mod": ("mod", None),
    "pow": ("pow", None), "and": ("bitwise_and", None), "or": ("bitwise_or", None),
    "xor": ("bitwise_xor", None),
}
COMPARISONS = ("eq", "ne", "lt", "le", "gt", "ge")
IN_PLACE = {"iadd": "add", "isub": "sub", "imul": "mul", "itruediv": "true_divide"}

_plain_astype = Tensor.astype


def install():
    for name in METHODS:
        setattr(Tensor, name, _method(name))
    for op, (name, core_op) in OPERATORS.items():
        setattr(Tensor, f"__{op}__", _operator(name, core_op=core_op))
        setattr(Tensor, f"__r{op}__", _operator(name, True, core_op=core_op))
    for op in COMPARISONS:
        setattr(Tensor, f"__{op}__", _operator(op, core_op=op))
    for op, name in IN_PLACE.items():
        setattr(Tensor, f"__{op}__", _in_place(name))
    Tensor.__neg__ = _method("neg")
    Tensor.__abs__ = _method("abs")
    Tensor.__invert__ = _method("invert")
    Tensor.__pos__ = lambda self: self
    Tensor.__matmul__ = _method("matmul")
    Tensor.__rmatmul__ = lambda self, other: F.matmul(as_tensor(other, device=self.device), self)
    Tensor.__getitem__ = _method("getitem")
    Tensor.__setitem__ = _setitem
    Tensor.__iter__ = _iter
    Tensor.T = property(lambda self: F.permute(self, *reversed(range(self.ndim))))
    Tensor.broadcast_to = _broadcast_to
    Tensor.astype = _astype
    Tensor.backward = _backward


install()
