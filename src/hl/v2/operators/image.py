"""Operators on feature maps: img_conv, img_pool, batch_norm.

v2 kept a feature map flat, (N, C*H*W), with C, H and W beside it; here it is (N, C, H, W),
the same memory. A flat input (a data layer) is viewed as an image from the channels given
and the data layer's height and width (square when they are not given), as v2 did."""
import math

from ... import errors
from ...autograd import functional as F
from ...autograd import no_grad
from ..graph import Operator
from . import params
from .values import Seq


def input_image(x, num_channels, layer):
    """(C, H, W) of layer's input x."""
    if x.image is not None:
        c, h, w = x.image
        if num_channels is not None and num_channels != c:
            raise errors.ShapeError(f"layer {layer!r}: num_channels={num_channels}, but its "
                                    f"input {x.name!r} has {c} channels")
        return c, h, w
    c = num_channels or 1
    if x.size % c:
        raise errors.ShapeError(f"layer {layer!r}: input {x.name!r} has size {x.size}, not a "
                                f"multiple of num_channels={c}")
    h = getattr(x.op, "height", None)
    w = getattr(x.op, "width", None)
    if h and w:
        if c * h * w != x.size:
            raise errors.ShapeError(f"layer {layer!r}: input {x.name!r} has size {x.size}, "
                                    f"but {c} channels of {h}x{w} need {c * h * w}")
        return c, h, w
    side = int(round(math.sqrt(x.size // c)))
    if side * side * c != x.size:
        raise errors.ShapeError(f"layer {layer!r}: cannot view input {x.name!r} of size "
                                f"{x.size} as {c} square channels; give the data layer "
                                f"height and width")
    return c, side, side


def as_image(v, image, layer):
    if isinstance(v, Seq):
        raise errors.ShapeError(f"layer {layer!r} takes images, got a sequence")
    return v if v.ndim == 4 else F.reshape(v, v.shape[0], *image)


def out_size(size, filt, pad, stride, ceil, layer, dilation=1):
    span = dilation * (filt - 1) + 1
    room = size + 2 * pad - span
    if room < 0:
        raise errors.ShapeError(f"layer {layer!r}: a window of {span} does not fit an input "
                                f"of {size} with padding {pad}")
    return (-(-room // stride) if ceil else room // stride) + 1


def pair(a, b):
    return int(a), int(b if b is not None else a)


class Conv(Operator):
    kind = "exconv"

    def __init__(self, name, input, filter_size, num_filters, num_channels, act, groups,
                 stride, padding, dilation, bias_attr, param_attr, drop_rate):
        super().__init__(name, [input], act, drop_rate)
        c, h, w = self.in_image = input_image(input, num_channels, name)
        (fy, fx), (sy, sx), (py, px), (dy, dx) = filter_size, stride, padding, dilation
        if c % groups or num_filters % groups:
            raise errors.ShapeError(f"img_conv {name!r}: channels {c} and num_filters "
                                    f"{num_filters} must be multiples of groups={groups}")
        oh = out_size(h, fy, py, sy, False, name, dy)
        ow = out_size(w, fx, px, sx, False, name, dx)
        self.image = (num_filters, oh, ow)
        self.stride, self.padding, self.dilation, self.groups = (sy, sx), (py, px), (dy, dx), groups
        self.wshape = (num_filters, c // groups, fy, fx)
        # v2's starting std for a convolution: sqrt(2 / (filter_size**2 * channels)).
        std = math.sqrt(2.0 / (fx * fx * c))
        self.params.append(params.weight(name, 0, math.prod(self.wshape), (), param_attr, std))
        self.add_bias(params.bias(name, num_filters, (num_filters, 1), bias_attr))

    def compute(self, run, x):
        x = as_image(x, self.in_image, self.name)
        w = F.reshape(run.param(self.params[0].name), *self.wshape)
        b = F.reshape(run.param(self.bias), -1) if self.bias else None
        return F.conv2d(x, w, b, self.stride, self.padding, self.dilation, self.groups)


class Pool(Operator):
    kind = "pool"

    def __init__(self, name, input, pool_size, num_channels, pool_type, stride, padding,
                 ceil_mode, drop_rate):
        super().__init__(name, [input], None, drop_rate)
        c, h, w = self.in_image = input_image(input, num_channels, name)
        (ky, kx), (sy, sx), (py, px) = pool_size, stride, padding
        if pool_type.name not in ("max", "average"):
            raise errors.ValueError(f"img_pool {name!r}: pool_type must be paddle.pooling.Max() "
                                    f"or Avg(), got {pool_type!r}")
        self.type = pool_type.name
        oh = out_size(h, ky, py, sy, ceil_mode, name)
        ow = out_size(w, kx, px, sx, ceil_mode, name)
        self.image = (c, oh, ow)
        self.window, self.stride, self.padding, self.ceil = (ky, kx), (sy, sx), (py, px), ceil_mode

    def compute(self, run, x):
        x = as_image(x, self.in_image, self.name)
        if self.type == "max":
            y = F.max_pool2d(x, self.window, self.stride, self.padding, ceil_mode=self.ceil)
        else:  # v2 averages over the part of the window inside the image
            y = F.avg_pool2d(x, self.window, self.stride, self.padding, ceil_mode=self.ceil,
                             count_include_pad=False)
        if tuple(y.shape[1:]) != self.image:
            raise errors.ShapeError(f"img_pool {self.name!r}: computed output {tuple(y.shape)}, "
                                    f"expected (N, {self.image})")
        return y


class BatchNorm(Operator):
    """Normalises each channel (each feature of a vector input). Parameters as v2: w0 the
    scale, wbias the shift, w1 / w2 the moving mean and variance (static)."""
    kind = "batch_norm"

    def __init__(self, name, input, act, num_channels, bias_attr, param_attr, epsilon,
                 moving_average_fraction, use_global_stats, drop_rate):
        super().__init__(name, [input], act, drop_rate)
        if input.image is not None or num_channels:
            c, h, w = self.in_image = input_image(input, num_channels, name)
            self.image = (c, h, w)
        else:
            c, self.in_image, self.image = input.size, None, None
        if not 0.0 <= moving_average_fraction <= 1.0:
            raise errors.ValueError(f"batch_norm {name!r}: moving_average_fraction must be in "
                                    f"[0, 1], got {moving_average_fraction}")
        self.channels, self.eps = c, float(epsilon)
        self.momentum = 1.0 - float(moving_average_fraction)
        self.use_global_stats = use_global_stats
        scale = params.weight(name, 0, c, (1, c), param_attr, 0.0)
        if scale.init == (0.0, 0.0):  # v2 starts the scale at 1
            scale = scale._replace(init=(1.0, 0.0))
        self.params.append(scale)
        self.add_bias(params.bias(name, c, (1, c), bias_attr))
        self.mean, self.var = f"_{name}.w1", f"_{name}.w2"
        self.params += [params.static(self.mean, c, (1, c), 0.0),
                        params.static(self.var, c, (1, c), 1.0)]

    def compute(self, run, x):
        if isinstance(x, Seq):
            raise errors.ShapeError(f"batch_norm {self.name!r}: takes images or vectors, not "
                                    f"sequences")
        x = as_image(x, self.in_image, self.name) if self.in_image else x
        c = self.channels
        mean, var = F.reshape(run.param(self.mean), c), F.reshape(run.param(self.var), c)
        scale = F.reshape(run.param(self.params[0].name), c)
        shift = F.reshape(run.param(self.bias), c) if self.bias else None
        # v2 trains on the batch's statistics whatever use_global_stats says; it decides the
        # test-time statistics (None or True: the moving ones)
        if not (run.training or self.use_global_stats is False):
            return F.batch_norm(x, mean, var, scale, shift, training=False, eps=self.eps)
        y, batch_mean, invstd = F.batch_norm(x, None, None, scale, shift, training=True,
                                             eps=self.eps, return_stats=True)
        if run.training:  # v2's moving averages, with the biased batch variance it normalised with
            with no_grad():
                keep = 1.0 - self.momentum
                batch_var = F.sub(F.reciprocal(F.mul(invstd, invstd)), self.eps)
                for moving, batch in ((mean, batch_mean), (var, batch_var)):
                    F.mul(moving, keep, out=moving)
                    F.add(moving, F.mul(batch, self.momentum), out=moving)
        return y
