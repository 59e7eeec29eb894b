"""The convolution kernels: conv1d/conv2d forward (stride, padding incl. 'same'/'valid' and
asymmetric pads, dilation, groups, bias), their transposes, and the two backward kernels
(gradient with respect to the input and to the weight). The ops users call (hl.conv2d...)
are defined once, with their gradients, in hl.autograd.conv.

Layouts are PyTorch's and ONNX's: x is (N, C_in, L) or (N, C_in, H, W); a conv weight is
(C_out, C_in / groups, k...); a transposed-conv weight is (C_in, C_out / groups, k...).
"""
import numbers
import operator

from .. import _core, errors
from ._util import Tensor, _wrap, as_tensor, into

__all__ = ["conv1d_forward", "conv2d_forward", "conv_fused_forward", "conv_pack",
           "conv_transpose1d_forward",
           "conv_transpose2d_forward", "conv1d_grad_input",
           "conv1d_grad_weight", "conv2d_grad_input", "conv2d_grad_weight", "CONV_ACTIVATIONS",
           "CONV_PACK_LAYOUTS"]

# The activations conv_fused_forward applies after its residual add (HL_CONV_ACT_* in
# hl_core.h), with what alpha and beta mean for each.
CONV_ACTIVATIONS = {"none": 0, "relu": 1, "clip": 2, "leaky_relu": 3, "hard_sigmoid": 4}


_LIMIT = 1 << 62  # beyond int64 in C; the core refuses anything above 2**31 anyway


def _in_range(vals, what, op):
    for v in vals:
        if not -_LIMIT < v < _LIMIT:
            raise errors.ValueError(f"{op}: {what} value {v} is out of range")
    return vals


def _ints(value, n, what, op):
    """value (an int or a sequence of n ints) as a list of n Python ints."""
    if isinstance(value, numbers.Integral):
        return _in_range([int(value)] * n, what, op)
    try:
        vals = [operator.index(v) for v in value]
    except TypeError:
        raise errors.ValueError(f"{op}: {what} must be an int or {n} ints, got {value!r}") from None
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise errors.ValueError(f"{op}: {what} must be an int or {n} ints, got {value!r}")
    return _in_range(vals, what, op)


def conv_pads(padding, n, in_sizes=None, kernel=None, stride=None, dilation=None, op="conv"):
    """Pads in ONNX order (all begins, then all ends) for n spatial axes.

    padding: an int, n ints (symmetric per axis, as in PyTorch), 2 * n ints (ONNX order),
    'valid' (none) or 'same' (the output keeps ceil(in / stride) positions; an odd total goes
    at the end, like ONNX SAME_UPPER and PyTorch)."""
    if isinstance(padding, str):
        mode = padding.lower()
        if mode == "valid":
            return [0] * (2 * n)
        if mode != "same":
            raise errors.ValueError(f"{op}: padding must be an int, a tuple, 'same' or 'valid', "
                                    f"got {padding!r}")
        if any(v < 1 for v in list(stride) + list(dilation)):
            raise errors.ValueError(f"{op}: stride {tuple(stride)} and dilation "
                                    f"{tuple(dilation)} must be positive")
        begins, ends = [], []
        for i, k, s, d in zip(in_sizes, kernel, stride, dilation):
            out = -(-i // s)
            total = max((out - 1) * s + d * (k - 1) + 1 - i, 0)
            begins.append(total // 2)
            ends.append(total - total // 2)
        return begins + ends
    if isinstance(padding, numbers.Integral):
        return _in_range([int(padding)] * (2 * n), "padding", op)
    try:
        vals = [operator.index(p) for p in padding]
    except TypeError:
        vals = None
    if vals is not None and len(vals) == n:
        return _in_range(vals + vals, "padding", op)
    if vals is not None and len(vals) == 2 * n:
        return _in_range(vals, "padding", op)
    raise errors.ValueError(f"{op}: padding must be an int, {n} ints (per axis) or {2 * n} ints "
                            f"(all begins, then all ends), got {padding!r}")


def _tensor(x, op, what):
    if isinstance(x, Tensor):
        return x
    if x is None:
        raise errors.ValueError(f"{op}: {what} is None")
    return as_tensor(x)


def _check_rank(x, n, op, what="input"):
    if x.ndim != n + 2:
        layout = "(N, C, L)" if n == 1 else "(N, C, H, W)"
        raise errors.ShapeError(f"{op}: expected a {n + 2}-D {what} {layout}, got shape "
                                f"{tuple(x.shape)}")


def _conv(n, x, w, b, stride, padding, dilation, groups, op):
    x, w = _tensor(x, op, "input"), _tensor(w, op, "weight")
    _check_rank(x, n, op)
    stride = _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    kernel = list(w.shape[2:]) if w.ndim == n + 2 else [1] * n
    pads = conv_pads(padding, n, list(x.shape[2:]), kernel, stride, dilation, op)
    bh = None if b is None else _tensor(b, op, "bias")._h
    return _wrap(_core.call("conv", x._h, w._h, bh, stride, pads, dilation, int(groups),
                            _core.OUT), x._dtype)


def conv1d_forward(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (cross-correlation) of x (N, C_in, L) with w (C_out, C_in / groups, k),
    plus b (C_out) when given. padding: int, 2 ints (begin, end), 'same' or 'valid'."""
    return _conv(1, x, w, b, stride, padding, dilation, groups, "conv1d")


def conv2d_forward(x, w, b=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation) of x (N, C_in, H, W) with w (C_out, C_in / groups,
    kh, kw), plus b (C_out) when given, as torch.nn.functional.conv2d.

    padding: an int, (ph, pw) symmetric, (top, left, bottom, right) in ONNX order, 'valid', or
    'same' (asymmetric when needed, the extra row/column at the end)."""
    return _conv(2, x, w, b, stride, padding, dilation, groups, "conv2d")


def conv_fused_forward(x, w, b=None, residual=None, stride=1, padding=0, dilation=1,
                       groups=1, act="none", alpha=0.0, beta=0.0, packed=None):
    """act(conv(x, w, b) + residual) in one pass over the output, for inference (no
    gradient): what an ONNX Conv followed by Add and Relu/Clip/LeakyRelu/HardSigmoid computes,
    with each output finished while it is in cache. x is 3-D or 4-D as in conv1d/conv2d;
    residual (optional) has the output's shape exactly; act is a key of CONV_ACTIVATIONS:
    'clip' bounds to [alpha, beta], 'leaky_relu' has slope alpha, 'hard_sigmoid' is
    max(0, min(1, alpha * x + beta)). The answer is bit for bit conv, add, then the
    activation's own op (NaN included).

    packed (float32 only): conv_pack(w, groups, layout), made once for a constant weight; the
    CPU then takes it where that is its fastest way ('panels': the products of every
    convolution but depthwise ones and those Winograd runs; 'winograd': 3x3 stride-1 ones
    with enough positions), without re-packing or transforming the weights per call. The answer then differs from the
    unpacked one by float rounding only (the sums run in another order). The caller keeps
    packed equal to w's packing: a stale one is not detected."""
    op = "conv_fused"
    x, w = _tensor(x, op, "input"), _tensor(w, op, "weight")
    if x.ndim not in (3, 4):
        raise errors.ShapeError(f"{op}: expected a 3-D (N, C, L) or 4-D (N, C, H, W) input, "
                                f"got shape {tuple(x.shape)}")
    code = CONV_ACTIVATIONS.get(act)
    if code is None:
        raise errors.ValueError(f"{op}: act must be one of {sorted(CONV_ACTIVATIONS)}, got "
                                f"{act!r}")
    n = x.ndim - 2
    stride = _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    kernel = list(w.shape[2:]) if w.ndim == n + 2 else [1] * n
    pads = conv_pads(padding, n, list(x.shape[2:]), kernel, stride, dilation, op)
    bh = None if b is None else _tensor(b, op, "bias")._h
    rh = None if residual is None else _tensor(residual, op, "residual")._h
    ph = None if packed is None else _tensor(packed, op, "packed")._h
    return _wrap(_core.call("conv_fused", x._h, w._h, bh, rh, ph, stride, pads, dilation,
                            int(groups), code, float(alpha), float(beta), _core.OUT), x._dtype)


# conv_pack's layouts (HL_CONV_PACK_* in hl_core.h).
CONV_PACK_LAYOUTS = {"panels": 0, "winograd": 1, "winograd43": 2}


def conv_pack(w, groups=1, layout="panels"):
    """A float32 convolution weight w (C_out, C_in / groups, k...) copied, once, into a layout
    the CPU's convolution kernels read (conv_fused_forward's packed): 'panels', for its
    products, is (groups * panels, C_in / groups * k..., PACK_ROWS), each panel PACK_ROWS
    output channels of one group, the last one padded with zeros; 'winograd' (a 3x3 kernel,
    one group) is (4, 4, C_out, C_in), the kernels transformed for Winograd's F(2x2, 3x3),
    which 3x3 stride-1 convolutions with enough positions take; 'winograd43' is (6, 6, C_out,
    C_in), transformed for F(4x4, 3x3) (fewer products per output, more rounding), which
    such a convolution takes wherever Winograd fits: the caller picks it by tile count.
    Weights Winograd's precision guard refuses are packed as NaN (those calls then take the
    unpacked paths). hl.onnx packs each constant
    weight at prepare()."""
    op = "conv_pack"
    w = _tensor(w, op, "weight")
    code = CONV_PACK_LAYOUTS.get(layout)
    if code is None:
        raise errors.ValueError(f"{op}: layout must be one of {sorted(CONV_PACK_LAYOUTS)}, got "
                                f"{layout!r}")
    return _wrap(_core.call("conv_pack", w._h, _ints(groups, 1, "groups", op)[0], code,
                            _core.OUT), w._dtype)


def _conv_transpose(n, x, w, b, stride, padding, output_padding, groups, dilation, op):
    x, w = _tensor(x, op, "input"), _tensor(w, op, "weight")
    _check_rank(x, n, op)
    stride = _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    output_padding = _ints(output_padding, n, "output_padding", op)
    if isinstance(padding, str):
        raise errors.ValueError(f"{op}: padding must be numbers, got {padding!r}")
    pads = conv_pads(padding, n, op=op)
    bh = None if b is None else _tensor(b, op, "bias")._h
    return _wrap(_core.call("conv_transpose", x._h, w._h, bh, stride, pads, dilation,
                            output_padding, int(groups), _core.OUT), x._dtype)


def conv_transpose1d_forward(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 1-D convolution of x (N, C_in, L) with w (C_in, C_out / groups, k), as
    torch.nn.functional.conv_transpose1d (the gradient of conv1d with respect to its input)."""
    return _conv_transpose(1, x, w, b, stride, padding, output_padding, groups, dilation,
                           "conv_transpose1d")


def conv_transpose2d_forward(x, w, b=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    """Transposed 2-D convolution of x (N, C_in, H, W) with w (C_in, C_out / groups, kh, kw),
    as torch.nn.functional.conv_transpose2d. padding may also be 4 ints in ONNX order."""
    return _conv_transpose(2, x, w, b, stride, padding, output_padding, groups, dilation,
                           "conv_transpose2d")


def _shape(shape, n, what, op):
    shape = _in_range([operator.index(s) for s in shape], what, op)
    if len(shape) != n + 2:
        raise errors.ShapeError(f"{op}: {what} must have {n + 2} entries, got {tuple(shape)}")
    return shape


def _grad_input(n, dy, w, x_shape, stride, padding, dilation, groups, op):
    dy, w = _tensor(dy, op, "gradient"), _tensor(w, op, "weight")
    _check_rank(dy, n, op, "gradient")
    x_shape = _shape(x_shape, n, "x_shape", op)
    stride = _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    kernel = list(w.shape[2:]) if w.ndim == n + 2 else [1] * n
    pads = conv_pads(padding, n, x_shape[2:], kernel, stride, dilation, op)
    return _wrap(_core.call("conv_grad_input", dy._h, w._h, x_shape, stride, pads, dilation,
                            int(groups), _core.OUT), dy._dtype)


def _grad_weight(n, dy, x, w_shape, stride, padding, dilation, groups, op, out=None):
    dy, x = _tensor(dy, op, "gradient"), _tensor(x, op, "input")
    _check_rank(dy, n, op, "gradient")
    w_shape = _shape(w_shape, n, "w_shape", op)
    stride = _ints(stride, n, "stride", op)
    dilation = _ints(dilation, n, "dilation", op)
    pads = conv_pads(padding, n, list(x.shape[2:]), w_shape[2:], stride, dilation, op)
    return _wrap(_core.call("conv_grad_weight", dy._h, x._h, w_shape, stride, pads, dilation,
                            int(groups), _core.out(into(out))), dy._dtype)


def conv1d_grad_input(dy, w, x_shape, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv1d with respect to its input (of shape x_shape), given dy."""
    return _grad_input(1, dy, w, x_shape, stride, padding, dilation, groups, "conv1d_grad_input")


def conv2d_grad_input(dy, w, x_shape, stride=1, padding=0, dilation=1, groups=1):
    """Gradient of conv2d with respect to its input (of shape x_shape), given dy; the
    arguments mean what they mean in conv2d (torch.nn.grad.conv2d_input)."""
    return _grad_input(2, dy, w, x_shape, stride, padding, dilation, groups, "conv2d_grad_input")


def conv1d_grad_weight(dy, x, w_shape, stride=1, padding=0, dilation=1, groups=1, out=None):
    """Gradient of conv1d with respect to its weight (of shape w_shape), given dy and x."""
    return _grad_weight(1, dy, x, w_shape, stride, padding, dilation, groups,
                        "conv1d_grad_weight", out)


def conv2d_grad_weight(dy, x, w_shape, stride=1, padding=0, dilation=1, groups=1, out=None):
    """Gradient of conv2d with respect to its weight (of shape w_shape), given dy and x
    (torch.nn.grad.conv2d_weight). The bias gradient is dy summed over (N, H, W)."""
    return _grad_weight(2, dy, x, w_shape, stride, padding, dilation, groups,
                        "conv2d_grad_weight", out)
