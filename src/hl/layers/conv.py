"""Convolution layers: Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d.

Layouts are PyTorch's and ONNX's (channels first): x is (N, C, L) or (N, C, H, W). A
convolution's weight W is (out_channels, in_channels / groups, *kernel); a transposed
convolution's is (in_channels, out_channels / groups, *kernel), as in PyTorch, so weights
copy across unchanged. The bias b is (out_channels,).

in_channels is learnt from the input on the first call; pass it (``Conv2d(3, 16, 3)``, PyTorch's
order, or ``in_channels=3``) to have it checked.
"""
from .. import errors
from ..autograd import functional as F
from ..ops.conv import conv_pads
from . import _checks, activations
from .layer import Layer


class _ConvNd(Layer):
    n = 2            # spatial axes
    transposed = False

    def __init__(self, out_channels, kernel_size, *args, stride=1, padding=0, dilation=1,
                 groups=1, bias=True, in_channels=None, output_padding=0,
                 W_init="glorot_uniform", b_init="zeros", group=None, activation=None,
                 name=None):
        super().__init__(name)
        kind = type(self).__name__
        if args:  # PyTorch's order: (in_channels, out_channels, kernel_size)
            if len(args) != 1 or in_channels is not None:
                raise errors.ValueError(f"{kind}(out_channels, kernel_size, ...) or {kind}("
                                        f"in_channels, out_channels, kernel_size, ...)")
            in_channels, out_channels, kernel_size = out_channels, kernel_size, args[0]
        if group is not None:  # SINGA's spelling
            groups = group
        n = self.n
        self.in_channels = _checks.count(in_channels, "in_channels", kind, optional=True)
        self.out_channels = _checks.count(out_channels, "out_channels", kind)
        self.kernel_size = _checks.positive(_checks.ints(kernel_size, n, "kernel_size", kind),
                                            "kernel_size", kind)
        self.stride = _checks.positive(_checks.ints(stride, n, "stride", kind), "stride", kind)
        self.dilation = _checks.positive(_checks.ints(dilation, n, "dilation", kind),
                                         "dilation", kind)
        self.groups = _checks.count(groups, "groups", kind)
        if isinstance(padding, str):
            mode = padding.lower()
            if mode not in ("same", "valid") or self.transposed:
                allowed = "numbers" if self.transposed else "an int, a tuple, 'same' or 'valid'"
                raise errors.ValueError(f"{kind}: padding must be {allowed}, got {padding!r}")
            self.padding = mode
        else:
            self.padding = _pads_arg(padding, n, kind)
        self.output_padding = _checks.ints(output_padding, n, "output_padding", kind)
        self.bias = bool(bias)
        self.W_init, self.b_init = W_init, b_init
        self.activation = activations.checked(activation, kind)
        if self.out_channels % self.groups:
            raise errors.ValueError(f"{kind}: out_channels ({self.out_channels}) must be "
                                    f"divisible by groups ({self.groups})")
        if self.in_channels is not None and self.in_channels % self.groups:
            raise errors.ValueError(f"{kind}: in_channels ({self.in_channels}) must be "
                                    f"divisible by groups ({self.groups})")
        if any(p >= max(s, d) for p, s, d in zip(self.output_padding, self.stride,
                                                 self.dilation)):
            raise errors.ValueError(f"{kind}: output_padding {self.output_padding} must be "
                                    f"smaller than the stride {self.stride} or the dilation "
                                    f"{self.dilation}")

    def _weight_shape(self, c_in):
        if self.transposed:
            return (c_in, self.out_channels // self.groups) + self.kernel_size
        return (self.out_channels, c_in // self.groups) + self.kernel_size

    def initialize(self, x):
        _checks.spatial_rank(self, x, self.n)
        c_in = x.shape[1]
        if self.in_channels is not None:
            _checks.channels(self, x, self.in_channels, self.n)
        elif c_in % self.groups:
            raise errors.ShapeError(
                f"{self.describe()}: the input has {c_in} channels (shape {tuple(x.shape)}), "
                f"not divisible by groups={self.groups}")
        self.in_channels = c_in
        self.add_param("W", self._weight_shape(c_in), self.W_init, x.dtype, x.device)
        if self.bias:
            self.add_param("b", (self.out_channels,), self.b_init, x.dtype, x.device)

    def _check(self, x):
        _checks.spatial_rank(self, x, self.n)
        _checks.channels(self, x, self.in_channels, self.n)
        if not self.transposed:
            pads = conv_pads(self.padding, self.n, list(x.shape[2:]), self.kernel_size,
                             self.stride, self.dilation, type(self).__name__)
            _checks.window_fits(self, x, self.n, self.kernel_size, self.stride,
                                self.dilation, pads)

    def forward(self, x):
        self._check(x)
        b = self.b if self.bias else None
        return activations.apply(self.activation, self._op(x, self.W, b))

    def extra_repr(self):
        s = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
             f"stride={self.stride}, padding={self.padding!r}")
        if any(d != 1 for d in self.dilation):
            s += f", dilation={self.dilation}"
        if self.groups != 1:
            s += f", groups={self.groups}"
        if self.transposed and any(self.output_padding):
            s += f", output_padding={self.output_padding}"
        s += f", bias={self.bias}"
        if self.activation is not None:
            s += f", activation={activations.name_of(self.activation)!r}"
        return s


def _pads_arg(padding, n, kind):
    """Numeric padding checked: an int, n ints (per axis) or 2 * n ints (ONNX order)."""
    pads = conv_pads(padding, n, op=kind)
    _checks.positive(pads, "padding", kind, allow_zero=True)
    return padding if isinstance(padding, int) else tuple(int(p) for p in padding)


class Conv1d(_ConvNd):
    """1-D convolution over (N, C, L): ``Conv1d(out_channels, kernel_size, stride=1,
    padding=0, dilation=1, groups=1, bias=True)``. padding: an int, (begin, end), 'same' or
    'valid'."""
    n = 1

    def _op(self, x, W, b):
        return F.conv1d(x, W, b, self.stride, self.padding, self.dilation, self.groups)


class Conv2d(_ConvNd):
    """2-D convolution over (N, C, H, W): ``Conv2d(out_channels, kernel_size, stride=1,
    padding=0, dilation=1, groups=1, bias=True)``. padding: an int, (ph, pw), (top, left,
    bottom, right), 'same' (output size ceil(input / stride); an odd total pad puts the extra
    row/column at the end) or 'valid' (none)."""
    n = 2

    def _op(self, x, W, b):
        return F.conv2d(x, W, b, self.stride, self.padding, self.dilation, self.groups)


class ConvTranspose1d(_ConvNd):
    """Transposed 1-D convolution (the gradient of Conv1d with respect to its input):
    W is (in_channels, out_channels / groups, k)."""
    n = 1
    transposed = True

    def _op(self, x, W, b):
        return F.conv_transpose1d(x, W, b, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


class ConvTranspose2d(_ConvNd):
    """Transposed 2-D convolution, as torch.nn.ConvTranspose2d: W is (in_channels,
    out_channels / groups, kh, kw); the output is (H - 1) * stride - 2 * padding +
    dilation * (k - 1) + output_padding + 1 along each axis."""
    n = 2
    transposed = True

    def _op(self, x, W, b):
        return F.conv_transpose2d(x, W, b, self.stride, self.padding, self.output_padding,
                                  self.groups, self.dilation)


__all__ = ["Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d"]
