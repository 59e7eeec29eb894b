"""Linear: y = x @ W + b, over the last axis of x."""
from .. import errors
from ..autograd import functional as F
from .layer import Layer


class Linear(Layer):
    """A fully connected layer. ``Linear(out_features)`` learns its input size on the first
    call; ``Linear(in_features, out_features)`` (PyTorch's order) checks it. W has shape
    (in_features, out_features), as in Keras and SINGA; b has shape (out_features,)."""

    def __init__(self, out_features, *args, bias=True, W_init="glorot_uniform",
                 b_init="zeros", name=None):
        super().__init__(name)
        if args:  # Linear(in, out)
            if len(args) != 1:
                raise errors.ValueError("Linear(out_features) or Linear(in_features, "
                                        "out_features)")
            self.in_features, self.out_features = int(out_features), int(args[0])
        else:
            self.in_features, self.out_features = None, int(out_features)
        self.bias = bias
        self.W_init, self.b_init = W_init, b_init

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
            return F.gemm(x, self.W, b)
        y = F.matmul(x, self.W)
        return y + b if b is not None else y

    def extra_repr(self):
        return f"{self.in_features}, {self.out_features}, bias={self.bias}"
