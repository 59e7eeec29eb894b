"""Linear (Keras's Dense): y = activation(x @ W + b), over the last axis of x."""
from .. import errors
from ..autograd import functional as F
from . import _checks, activations
from .layer import Layer


class Linear(Layer):
    """A fully connected layer. ``Linear(out_features)`` learns its input size on the first
    call; ``Linear(in_features, out_features)`` (PyTorch's order) checks it. W has shape
    (in_features, out_features), as in Keras and SINGA; b has shape (out_features,).
    ``activation`` (a name such as "relu", or a callable; see hl.layers.activations) is applied
    to the result, as Keras's Dense does; ``use_bias`` is Keras's spelling of ``bias``."""

    def __init__(self, out_features, *args, bias=True, W_init="glorot_uniform",
                 b_init="zeros", activation=None, use_bias=None, name=None):
        super().__init__(name)
        kind = type(self).__name__
        if args:  # Linear(in, out)
            if len(args) != 1:
                raise errors.ValueError(f"{kind}(out_features) or {kind}(in_features, "
                                        f"out_features)")
            self.in_features = _checks.count(out_features, "in_features", kind)
            self.out_features = _checks.count(args[0], "out_features", kind)
        else:
            self.in_features = None
            self.out_features = _checks.count(out_features, "out_features", kind)
        self.bias = bool(bias if use_bias is None else use_bias)
        self.W_init, self.b_init = W_init, b_init
        self.activation = activations.checked(activation, kind)

    def initialize(self, x):
        if x.ndim < 1:
            raise errors.ShapeError(f"{self.describe()}: expected input (..., features), "
                                    f"received a 0-d tensor")
        n_in = x.shape[-1]
        if self.in_features is not None and n_in != self.in_features:
            raise errors.ShapeError(
                f"{self.describe()}: expected input with {self.in_features} features in the "
                f"last axis, received shape {tuple(x.shape)}")
        self.in_features = n_in
        self.add_param("W", (n_in, self.out_features), self.W_init, x.dtype, x.device)
        if self.bias:
            self.add_param("b", (self.out_features,), self.b_init, x.dtype, x.device)

    def forward(self, x):
        if x.shape[-1] != self.in_features:
            raise errors.ShapeError(
                f"{self.describe()}: expected input with {self.in_features} features in the "
                f"last axis, received shape {tuple(x.shape)}")
        b = self.b if self.bias else None
        if x.ndim == 2:
            y = F.gemm(x, self.W, b)
        else:
            y = F.matmul(x, self.W)
            y = y + b if b is not None else y
        return activations.apply(self.activation, y)

    def extra_repr(self):
        s = f"{self.in_features}, {self.out_features}, bias={self.bias}"
        if self.activation is not None:
            s += f", activation={activations.name_of(self.activation)!r}"
        return s


class Dense(Linear):
    """Keras's name for Linear: ``Dense(units, activation=None, use_bias=True)``."""
