"""Neural-network operators: convolutions, pooling, normalization, Gemm/MatMul, Softmax,
Dropout."""
from ... import errors
from . import onnx_op
from ._util import F


def _conv_padding(n, x_spatial, kernel, strides, dilations):
    """ONNX's pads ([begin..., end...]) or auto_pad, as (begin, end) per spatial axis."""
    k = len(kernel)
    auto = n.attr("auto_pad", "NOTSET")
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = []
        for size, kern, s, d in zip(x_spatial, kernel, strides, dilations):
            out = -(-size // s)
            total = max((out - 1) * s + (kern - 1) * d + 1 - size, 0)
            small, big = total // 2, total - total // 2
            pads.append((small, big) if auto == "SAME_UPPER" else (big, small))
        return pads
    if auto == "VALID":
        return [(0, 0)] * k
    p = n.attr("pads", [0] * (2 * k))
    return list(zip(p[:k], p[k:]))


@onnx_op("Conv")
def conv(n, x, w, b=None):
    if x.ndim != 4:
        raise n.error(f"only 2-D convolutions are handled here; input shape {x.shape}",
                      errors.UnsupportedError)
    kernel = n.attr("kernel_shape", list(w.shape[2:]))
    strides = n.attr("strides", [1, 1])
    dil = n.attr("dilations", [1, 1])
    pads = _conv_padding(n, x.shape[2:], kernel, strides, dil)
    if any(a != b for a, b in pads):
        x = F.pad(x, [(0, 0), (0, 0)] + [tuple(ab) for ab in pads])
        pads = [(0, 0)] * len(pads)
    return F.conv2d(x, w, b, stride=tuple(strides), padding=tuple(p[0] for p in pads),
                    dilation=tuple(dil), groups=n.attr("group", 1))


@onnx_op("Gemm")
def gemm(n, a, b, c=None):
    return F.gemm(a, b, c, trans_a=bool(n.attr("transA", 0)), trans_b=bool(n.attr("transB", 0)),
                  alpha=n.attr("alpha", 1.0), beta=n.attr("beta", 1.0))


@onnx_op("BatchNormalization")
def batch_norm(n, x, scale, bias, mean, var):
    # ONNX's momentum weighs the old running value (PyTorch's weighs the new batch).
    momentum = 1.0 - n.attr("momentum", 0.9)
    training = n.training or bool(n.attr("training_mode", 0))
    y = F.batch_norm(x, mean, var, scale, bias, training=training, momentum=momentum,
                     eps=n.attr("epsilon", 1e-5))
    return y


@onnx_op("MaxPool")
def max_pool(n, x):
    kernel = n.attr("kernel_shape")
    strides = n.attr("strides", [1] * len(kernel))
    dil = n.attr("dilations", [1] * len(kernel))
    pads = _conv_padding(n, x.shape[2:], kernel, strides, dil)
    if any(a != b for a, b in pads):
        x = F.pad(x, [(0, 0), (0, 0)] + [tuple(ab) for ab in pads], value=float("-inf"))
        pads = [(0, 0)] * len(pads)
    return F.max_pool2d(x, tuple(kernel), tuple(strides), tuple(p[0] for p in pads),
                        tuple(dil), ceil_mode=bool(n.attr("ceil_mode", 0)))


@onnx_op("GlobalAveragePool")
def global_average_pool(n, x):
    return F.global_avg_pool2d(x)
