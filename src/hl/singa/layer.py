"""SINGA's layer module over hl.layers.

Each SINGA layer is the hl layer of the same job with SINGA's signature: channels-in optional
first (``Conv2d(1, 20, 5)`` or ``Conv2d(20, 5)``), ``activation="RELU"``,
``pad_mode="SAME_UPPER"``, SINGA's ``momentum`` convention for BatchNorm2d, padding as SINGA
writes it (an int, (h, w) or (top, bottom, left, right)), the loss layers, and RNN/LSTM over
lists of time steps. Parameters keep SINGA's names (``W``, ``b``, ``scale``, ``bias``,
``running_mean``, ``running_var``), so checkpoints move between the two. Outputs are
hl.singa Tensors (``y.creator.backward(dy.data)`` works as in SINGA).
"""
import math

from .. import errors
from .. import layers as _L
from ..layers import initializers as _init
from ..autograd import functional as F
from . import autograd
from .._tensor import Tensor as _HLTensor
from .tensor import _py
from .utils import onnx_same_pads

# SINGA's activation strings, translated here with hl's functions (so they work whatever
# hl's own layers accept)
_ACTIVATIONS = {"NOTSET": None, "NONE": None, "RELU": F.relu, "SIGMOID": F.sigmoid,
                "TANH": F.tanh, "SOFTMAX": lambda y: F.softmax(y, 1)}


def _activation_fn(name, layer):
    key = "NOTSET" if name is None else str(name).upper()
    if key not in _ACTIVATIONS:
        raise errors.ValueError(f"{layer}: activation must be one of {sorted(_ACTIVATIONS)}, "
                                f"got {name!r}")
    return _ACTIVATIONS[key]


def _pair(v):
    return (int(v), int(v)) if isinstance(v, int) else tuple(int(a) for a in v)


def _onnx_pads(padding, layer):
    """SINGA's padding (int, (h, w) or (top, bottom, left, right)) as hl's ONNX-order
    (top, left, bottom, right)."""
    if padding is None:
        return (0, 0, 0, 0)
    if isinstance(padding, int):
        return (padding,) * 4
    p = [int(a) for a in padding]
    if len(p) == 2:
        return (p[0], p[1], p[0], p[1])
    if len(p) == 4:
        return (p[0], p[2], p[1], p[3])
    raise errors.ValueError(f"{layer}: padding must be an int, (h, w) or (top, bottom, left, "
                            f"right), got {padding!r}")


class Layer(_L.Layer):
    """SINGA's Layer: subclass it, build sub-layers in __init__, create parameters in
    ``initialize(x)`` (run on the first call) and compute in ``forward``. Outputs come back
    as hl.singa Tensors."""

    def __call__(self, *xs, **kwargs):
        return _py(super().__call__(*xs, **kwargs))

    def __setattr__(self, name, value):
        # SINGA lets a subclass keep plain values before calling Layer.__init__
        # (ResNet sets self.inplanes first); layers and tensors still need it
        if "_built" not in self.__dict__ and not isinstance(value, (_L.Layer, _HLTensor)):
            self.__dict__[name] = value
            return
        super().__setattr__(name, value)

    def get_params(self):
        return _py_dict(super().get_params())

    def get_states(self):
        return _py_dict(super().get_states())

    def set_params(self, parameters):
        """Copies the given values (Tensors or arrays, by hierarchical name) into those
        parameters; names not given keep their values (SINGA's set_params)."""
        self._set(self.get_params(), parameters, "set_params")

    def set_states(self, states):
        """set_params over the states (parameters and buffers)."""
        self._set(self.get_states(), states, "set_states")

    def _set(self, targets, values, op):
        unknown = sorted(set(values) - set(targets))
        if unknown:
            raise errors.ValueError(f"{op} on {self.describe()}: unknown names {unknown}; it "
                                    f"has {sorted(targets)}")
        for k, v in values.items():
            _L.layer._load(self, {k: targets[k]}, {k: v}, True, op)

    def register_layers(self, *args):
        """SINGA's way to keep layers held in lists or closures: each becomes a sub-layer named
        ``ClassName_index`` (or by its key, for an OrderedDict)."""
        if len(args) == 1 and isinstance(args[0], dict):
            items = list(args[0].items())
        else:
            if len(args) == 1 and isinstance(args[0], (list, tuple)):
                args = args[0]
            items = [(f"{type(v).__name__}_{i}", v) for i, v in enumerate(args)]
        for name, lyr in items:
            setattr(self, name, lyr)

    def dtype_check(self, *inputs):
        """Casts the inputs to the first one's dtype, in place (as SINGA's)."""
        for t in inputs[1:]:
            if t.dtype is not inputs[0].dtype and hasattr(t, "to_type"):
                t.to_type(inputs[0].dtype)

    def device_check(self, *inputs):
        """Moves the inputs to the first one's device, in place (as SINGA's)."""
        for t in inputs[1:]:
            if t.device != inputs[0].device and hasattr(t, "to_device"):
                t.to_device(inputs[0].device)


def _py_dict(d):
    return {k: _py(v) for k, v in d.items()}


class Linear(Layer, _L.Linear):
    """``Linear(out_features)`` or ``Linear(in_features, out_features)``; y = x W + b."""

    def __init__(self, out_features, *args, bias=True, **kwargs):
        # SINGA draws W from N(0, 2 / (in + out)): hl's glorot_normal
        _L.Linear.__init__(self, out_features, *args, bias=bias, W_init="glorot_normal")


class Gemm(Layer):
    """ONNX Gemm as a layer: y = alpha * A' W' + beta * b (A' and W' maybe transposed)."""

    def __init__(self, nb_kernels, alpha=1.0, beta=1.0, transA=False, transB=True,  # noqa: N803
                 bias=True, bias_shape=None):
        super().__init__()
        self.nb_kernels, self.alpha, self.beta = int(nb_kernels), float(alpha), float(beta)
        self.transA, self.transB, self.bias = int(transA), int(transB), bool(bias)
        self.bias_shape = bias_shape

    def initialize(self, x):
        n_in = x.shape[0] if self.transA else x.shape[1]
        w = (self.nb_kernels, n_in) if self.transB else (n_in, self.nb_kernels)
        self.add_param("W", w, "glorot_normal", x.dtype, x.device)
        if self.bias:
            self.add_param("b", self.bias_shape or (1, self.nb_kernels), "zeros", x.dtype,
                           x.device)

    def forward(self, x):
        return autograd.gemm(x, self.W, self.b if self.bias else None, self.alpha, self.beta,
                             self.transA, self.transB)


class Embedding(Layer, _L.Embedding):
    def __init__(self, input_dim, output_dim, initializer="gaussian"):
        # SINGA draws W from N(0, 1), or U(-1, 1) with initializer="uniform"
        init = {"gaussian": _init.Normal(0.0, 1.0), "uniform": _init.Uniform(-1.0, 1.0)}
        _L.Embedding.__init__(self, input_dim, output_dim,
                              W_init=init.get(initializer, initializer))

    def forward(self, x):
        """Ids may come as floats, as SINGA's Embedding reads them."""
        if x.dtype.is_floating:
            x = x.detach().astype("int64")
        return _L.Embedding.forward(self, x)

    def from_pretrained(self, W, freeze=True):  # noqa: N803
        self.set_param("W", W, trainable=not freeze)


class Conv2d(Layer, _L.Conv2d):
    """``Conv2d(nb_kernels, kernel_size, stride=1, padding=0, dilation=1, group=1, bias=True,
    pad_mode="NOTSET", activation="NOTSET")``, or with in_channels first."""

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 group=1, bias=True, pad_mode="NOTSET", activation="NOTSET", **kwargs):
        in_channels = None
        if args:
            in_channels, nb_kernels, kernel_size = nb_kernels, kernel_size, args[0]
            stride = args[1] if len(args) > 1 else stride
            padding = args[2] if len(args) > 2 else padding
        if pad_mode not in ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID"):
            raise errors.ValueError(f"Conv2d: pad_mode must be NOTSET, SAME_UPPER, SAME_LOWER "
                                    f"or VALID, got {pad_mode!r}")
        pads = (0, 0, 0, 0) if pad_mode != "NOTSET" else _onnx_pads(padding, "Conv2d")
        # SINGA's activation string becomes hl's activation= (a function, applied by hl's
        # Conv2d to its output)
        _L.Conv2d.__init__(self, nb_kernels, kernel_size, stride=stride, padding=pads,
                           dilation=dilation, groups=group, bias=bias, in_channels=in_channels,
                           activation=_activation_fn(activation, "Conv2d"))
        self.__dict__.update(pad_mode=pad_mode, nb_kernels=int(nb_kernels), group=int(group))

    def initialize(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            k = [d * (k - 1) + 1 for k, d in zip(self.kernel_size, self.dilation)]
            self.__dict__["padding"] = onnx_same_pads(self.pad_mode, x.shape[2:], k,
                                                      self.stride)
        # SINGA's W ~ N(0, 2 / (in_channels / group * kh * kw + nb_kernels)), b = 0
        fan_in = x.shape[1] // self.groups * self.kernel_size[0] * self.kernel_size[1]
        std = math.sqrt(2.0 / (fan_in + self.out_channels))
        self.__dict__["W_init"] = _init.Normal(0.0, std)
        _L.Conv2d.initialize(self, x)


class SeparableConv2d(Layer):
    """A depthwise convolution (one filter per channel) then a 1x1 convolution."""

    def __init__(self, nb_kernels, kernel_size, *args, stride=1, padding=0, bias=False):
        super().__init__()
        if args:
            nb_kernels, kernel_size = kernel_size, args[0]
            stride = args[1] if len(args) > 1 else stride
            padding = args[2] if len(args) > 2 else padding
        self.nb_kernels, self.kernel_size = nb_kernels, kernel_size
        self.stride, self.padding, self.bias = stride, padding, bias

    def initialize(self, x):
        c = x.shape[1]
        self.depthwise_conv = Conv2d(c, self.kernel_size, stride=self.stride,
                                     padding=self.padding, group=c, bias=self.bias)
        self.point_conv = Conv2d(self.nb_kernels, 1, bias=self.bias)

    def forward(self, x):
        return self.point_conv(self.depthwise_conv(x))


class BatchNorm2d(Layer, _L.BatchNorm2d):
    """``BatchNorm2d([num_features], momentum=0.9)``: SINGA's momentum is the weight of the
    running statistics (hl's, like PyTorch's, is the weight of the batch's: 1 - SINGA's)."""

    def __init__(self, *args, momentum=0.9):
        _L.BatchNorm2d.__init__(self, args[0] if args else None, momentum=1.0 - float(momentum))


class Pooling2d(Layer):
    """``Pooling2d(kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET")``:
    hl's max or average pooling (average counts the padding, as SINGA's)."""

    def __init__(self, kernel_size, stride=None, padding=0, is_max=True, pad_mode="NOTSET"):
        super().__init__()
        self.kernel_size = _pair(kernel_size)
        self.stride = self.kernel_size if stride is None else _pair(stride)
        self.padding = _onnx_pads(padding, type(self).__name__)
        self.is_max, self.pad_mode = bool(is_max), pad_mode

    def initialize(self, x):
        if self.pad_mode in ("SAME_UPPER", "SAME_LOWER"):
            self.padding = onnx_same_pads(self.pad_mode, x.shape[2:], self.kernel_size,
                                          self.stride)

    def forward(self, x):
        p = self.padding
        k = self.kernel_size
        if all(max(p[i], p[i + 2]) <= k[i] // 2 for i in range(2)):
            pad = p
        else:
            # hl's pools take padding up to half the window (PyTorch's rule); more is
            # padded outside, with what the pool would have seen there
            fill = float("-inf") if self.is_max else 0.0
            x = F.pad(x, [0, 0, p[0], p[1], 0, 0, p[2], p[3]], "constant", fill)
            pad = 0
        if self.is_max:
            return F.max_pool2d(x, k, self.stride, pad)
        return F.avg_pool2d(x, k, self.stride, pad)


class MaxPool2d(Pooling2d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, True, pad_mode)


class AvgPool2d(Pooling2d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(kernel_size, stride, padding, False, pad_mode)


def _one_d(v):
    return (1, v) if isinstance(v, int) else tuple(v)


class MaxPool1d(Pooling2d):
    """SINGA's 1-D pooling: a (1, k) window over (N, C, 1, L) input."""

    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(_one_d(kernel_size), None if stride is None else _one_d(stride),
                         (0, padding) if isinstance(padding, int) else padding, True, pad_mode)


class AvgPool1d(Pooling2d):
    def __init__(self, kernel_size, stride=None, padding=0, pad_mode="NOTSET"):
        super().__init__(_one_d(kernel_size), None if stride is None else _one_d(stride),
                         (0, padding) if isinstance(padding, int) else padding, False, pad_mode)


# ---- recurrent: SINGA's interface of a list of time steps over hl's RNN / LSTM --------------

def _stack(xs):
    return F.stack(list(xs), 0)


def _steps(y):
    return [_py(F.reshape(s, *s.shape[1:])) for s in F.split(y, y.shape[0], 0)]


class RNN(Layer):
    """``RNN(input_size, hidden_size, nonlinearity="tanh")``; ``rnn(xs, h0)`` with xs a list of
    (N, input_size) steps returns (list of (N, hidden) outputs, last h), on hl's RNN."""

    def __init__(self, input_size, hidden_size, num_layers=1, nonlinearity="tanh", bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.rnn = _L.RNN(input_size, hidden_size, num_layers=num_layers,
                          nonlinearity=nonlinearity, bias=bias, bidirectional=bidirectional)

    def forward(self, xs, h0):
        y, h = self.rnn(_stack(xs), F.unsqueeze(h0, 0))
        return _steps(y), _py(F.reshape(h, *h.shape[1:]))


class LSTM(Layer):
    """``LSTM(input_size, hidden_size)``; ``lstm(xs, (h0, c0))`` returns (outputs, h, c)."""

    def __init__(self, input_size, hidden_size, nonlinearity="tanh", num_layers=1, bias=True,
                 batch_first=False, dropout=0, bidirectional=False):
        super().__init__()
        self.input_size, self.hidden_size = int(input_size), int(hidden_size)
        self.lstm = _L.LSTM(input_size, hidden_size, num_layers=num_layers, bias=bias,
                            bidirectional=bidirectional)

    def forward(self, xs, h0_c0):
        h0, c0 = h0_c0
        n = xs[0].shape[0]
        h0 = F.expand(h0, n, self.hidden_size) if h0.shape[0] != n else h0
        c0 = F.expand(c0, n, self.hidden_size) if tuple(c0.shape) != (n, self.hidden_size) \
            else c0
        y, (h, c) = self.lstm(_stack(xs), (F.unsqueeze(h0, 0), F.unsqueeze(c0, 0)))
        return _steps(y), _py(F.reshape(h, *h.shape[1:])), _py(F.reshape(c, *c.shape[1:]))


class CudnnRNN(Layer):
    """SINGA's cuDNN-only RNN: hl has no CUDA backend yet."""

    def __init__(self, *args, **kwargs):
        raise errors.DeviceError("layer.CudnnRNN needs SINGA's cuDNN backend; use layer.RNN "
                                 "or layer.LSTM (hl has no CUDA backend yet)")


# ---- activations, shapes and losses as layers --------------------------------------------------

def _simple(name, fn, doc):
    def forward(self, *xs):
        return fn(*xs)
    return type(name, (Layer,), {"forward": forward, "__doc__": doc, "__module__": __name__})


ReLU = _simple("ReLU", autograd.relu, "max(x, 0)")
Sigmoid = _simple("Sigmoid", autograd.sigmoid, "1 / (1 + exp(-x))")
Add = _simple("Add", autograd.add, "a + b")
SoftMax = _simple("SoftMax", autograd.softmax, "softmax over axis 1")
SoftMaxCrossEntropy = _simple("SoftMaxCrossEntropy", autograd.softmax_cross_entropy,
                              "mean over the batch of cross entropy(softmax(x), t)")
MeanSquareError = _simple("MeanSquareError", autograd.mse_loss, "mean((x - t) ** 2)")
CrossEntropy = _simple("CrossEntropy", autograd.cross_entropy, "-sum(t log x) / batch")
BinaryCrossEntropy = _simple("BinaryCrossEntropy", autograd.binary_cross_entropy,
                             "binary cross entropy of probabilities, over the batch")


class Flatten(Layer):
    def __init__(self, axis=1):
        super().__init__()
        self.axis = axis

    def forward(self, x):
        return autograd.flatten(x, self.axis)


class Dropout(Layer, _L.Dropout):
    """``Dropout(ratio=0.5)``: inverted dropout while training."""

    def __init__(self, ratio=0.5):
        _L.Dropout.__init__(self, ratio)
        self.__dict__["ratio"] = ratio


class Cat(Layer):
    def __init__(self, axis=0):
        super().__init__()
        self.axis = axis

    def forward(self, xs):
        return autograd.cat(xs, self.axis)


class Reshape(Layer):
    def forward(self, x, shape):
        return autograd.reshape(x, shape)


__all__ = ["Layer", "Linear", "Gemm", "Embedding", "Conv2d", "SeparableConv2d", "BatchNorm2d",
           "Pooling2d", "MaxPool2d", "AvgPool2d", "MaxPool1d", "AvgPool1d", "RNN", "LSTM",
           "CudnnRNN", "ReLU", "Sigmoid", "Add", "Flatten", "SoftMaxCrossEntropy", "SoftMax",
           "MeanSquareError", "CrossEntropy", "BinaryCrossEntropy", "Dropout", "Cat",
           "Reshape"]
