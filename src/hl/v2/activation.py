"""paddle.activation: what a layer applies to its output, by v2's names and formulas."""

from ..autograd import functional as F


class BaseActivation:
    name = ""

    def __call__(self, x):
        return x

    def __repr__(self):
        return f"paddle.activation.{type(self).__name__}()"


class Linear(BaseActivation):
    name = "linear"


Identity = Linear


class Relu(BaseActivation):
    name = "relu"

    def __call__(self, x):
        return F.relu(x)


class BRelu(BaseActivation):
    """Bounded relu: min(max(x, 0), 24)."""
    name = "brelu"

    def __call__(self, x):
        return F.clamp(x, 0.0, 24.0)


class Sigmoid(BaseActivation):
    """1 / (1 + exp(-x)), x clipped to [-40, 13] first as v2 did (also in LSTM/GRU gates)."""
    name = "sigmoid"

    def __call__(self, x):
        return F.sigmoid(F.clamp(x, -40.0, 13.0))


class Tanh(BaseActivation):
    name = "tanh"

    def __call__(self, x):
        return F.tanh(x)


class STanh(BaseActivation):
    """Scaled tanh, 1.7159 * tanh(2/3 x) (LeCun's), v2's defaults."""
    name = "stanh"

    def __init__(self, scale_a=2.0 / 3.0, scale_b=1.7159):
        self.a, self.b = scale_a, scale_b

    def __call__(self, x):
        return F.tanh(x * self.a) * self.b


class Softmax(BaseActivation):
    name = "softmax"

    def __call__(self, x):
        return F.softmax(x, axis=-1)


class SoftRelu(BaseActivation):
    """log(1 + exp(x)), x clipped to [-40, 40] first as v2 did."""
    name = "softrelu"

    def __call__(self, x):
        return F.softplus(F.clamp(x, -40.0, 40.0))


class Abs(BaseActivation):
    name = "abs"

    def __call__(self, x):
        return F.abs(x)


class Square(BaseActivation):
    name = "square"

    def __call__(self, x):
        return F.square(x)


class Exp(BaseActivation):
    name = "exponential"

    def __call__(self, x):
        return F.exp(x)


class Log(BaseActivation):
    name = "log"

    def __call__(self, x):
        return F.log(x)


# v1's long names, which old scripts import through paddle.activation too
LinearActivation = IdentityActivation = Linear
ReluActivation, BReluActivation, SigmoidActivation = Relu, BRelu, Sigmoid
TanhActivation, STanhActivation, SoftmaxActivation = Tanh, STanh, Softmax
SoftReluActivation, AbsActivation, SquareActivation = SoftRelu, Abs, Square
ExpActivation, LogActivation = Exp, Log

__all__ = ["BaseActivation", "Linear", "Identity", "Relu", "BRelu", "Sigmoid", "Tanh", "STanh",
           "Softmax", "SoftRelu", "Abs", "Square", "Exp", "Log"]
