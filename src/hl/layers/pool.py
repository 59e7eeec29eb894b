"""Pooling layers: MaxPool1d/2d, AvgPool1d/2d (as torch.nn's: stride defaults to the kernel
size), and GlobalAvgPool2d / GlobalMaxPool2d (one value per channel)."""
from .. import errors
from ..autograd import functional as F
from ..ops.conv import conv_pads
from . import _checks
from .layer import Layer


class _PoolNd(Layer):
    n = 2
    is_max = True

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 count_include_pad=True, name=None):
        super().__init__(name)
        kind = type(self).__name__
        n = self.n
        self.kernel_size = _checks.positive(_checks.ints(kernel_size, n, "kernel_size", kind),
                                            "kernel_size", kind)
        self.stride = self.kernel_size if stride is None else \
            _checks.positive(_checks.ints(stride, n, "stride", kind), "stride", kind)
        self.dilation = _checks.positive(_checks.ints(dilation, n, "dilation", kind),
                                         "dilation", kind)
        if isinstance(padding, str):
            raise errors.ValueError(f"{kind}: padding must be numbers, got {padding!r}")
        self._pads = _checks.positive(conv_pads(padding, n, op=kind), "padding", kind,
                                      allow_zero=True)
        self.padding = padding if isinstance(padding, int) else tuple(padding)
        for i in range(n):  # PyTorch's rule: padding at most half the (dilated) window
            span = self.dilation[i] * (self.kernel_size[i] - 1) + 1
            if max(self._pads[i], self._pads[n + i]) > span // 2:
                raise errors.ValueError(f"{kind}: padding {self.padding} must be at most half "
                                        f"the kernel size {self.kernel_size}")
        self.ceil_mode = bool(ceil_mode)
        self.count_include_pad = bool(count_include_pad)

    def forward(self, x):
        _checks.spatial_rank(self, x, self.n)
        _checks.window_fits(self, x, self.n, self.kernel_size, self.stride, self.dilation,
                            self._pads)
        return self._op(x)

    def extra_repr(self):
        s = f"kernel_size={self.kernel_size}, stride={self.stride}, padding={self.padding}"
        if self.is_max and any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.ceil_mode:
            s += ", ceil_mode=True"
        if not self.is_max and not self.count_include_pad:
            s += ", count_include_pad=False"
        return s


class MaxPool1d(_PoolNd):
    """Max pooling over (N, C, L)."""
    n = 1

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 name=None):
        super().__init__(kernel_size, stride, padding, dilation, ceil_mode, name=name)

    def _op(self, x):
        return F.max_pool1d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)


class MaxPool2d(_PoolNd):
    """Max pooling over (N, C, H, W), as torch.nn.MaxPool2d (padding never wins a max)."""
    n = 2

    def __init__(self, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
                 name=None):
        super().__init__(kernel_size, stride, padding, dilation, ceil_mode, name=name)

    def _op(self, x):
        return F.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation,
                            self.ceil_mode)


class AvgPool1d(_PoolNd):
    """Average pooling over (N, C, L)."""
    n = 1
    is_max = False

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, name=None):
        super().__init__(kernel_size, stride, padding, 1, ceil_mode, count_include_pad, name)

    def _op(self, x):
        return F.avg_pool1d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class AvgPool2d(_PoolNd):
    """Average pooling over (N, C, H, W), as torch.nn.AvgPool2d: with count_include_pad
    the zero padding counts in each window's divisor."""
    n = 2
    is_max = False

    def __init__(self, kernel_size, stride=None, padding=0, ceil_mode=False,
                 count_include_pad=True, name=None):
        super().__init__(kernel_size, stride, padding, 1, ceil_mode, count_include_pad, name)

    def _op(self, x):
        return F.avg_pool2d(x, self.kernel_size, self.stride, self.padding, self.ceil_mode,
                            self.count_include_pad)


class _GlobalPool2d(Layer):
    def __init__(self, keepdims=True, name=None):
        super().__init__(name)
        self.keepdims = bool(keepdims)

    def forward(self, x):
        _checks.spatial_rank(self, x, 2)
        if x.shape[2] == 0 or x.shape[3] == 0:
            raise errors.ShapeError(f"{self.describe()}: the input {tuple(x.shape)} has an "
                                    f"empty spatial plane")
        y = self._op(x)
        return y if self.keepdims else F.reshape(y, x.shape[0], x.shape[1])

    def extra_repr(self):
        return "" if self.keepdims else "keepdims=False"


class GlobalAvgPool2d(_GlobalPool2d):
    """The mean of each channel's (H, W) plane: (N, C, 1, 1) as ONNX GlobalAveragePool and
    SINGA, or (N, C) with keepdims=False (Keras's GlobalAveragePooling2D)."""

    def _op(self, x):
        return F.mean(x, axis=(2, 3), keepdims=True)


class GlobalMaxPool2d(_GlobalPool2d):
    """The maximum of each channel's (H, W) plane: (N, C, 1, 1), or (N, C) with
    keepdims=False."""

    def _op(self, x):
        return F.max_pool2d(x, tuple(x.shape[2:]))


__all__ = ["MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "GlobalAvgPool2d",
           "GlobalMaxPool2d"]
