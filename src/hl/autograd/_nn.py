"""Helpers shared by the neural-network op families (conv, pool, normalisation, softmax)."""
from .. import errors
from .._tensor import Tensor
from ..ops._util import as_tensor
from .placeholder import Placeholder


def as_input(x, op, what="input", like=None):
    """x as a Tensor (or the Placeholder it is); None stays None. Numbers and arrays become
    tensors on like's device, in like's dtype when they are floats."""
    if x is None or isinstance(x, (Tensor, Placeholder)):
        return x
    if like is not None and like.__class__ is Tensor:
        t = as_tensor(x, device=like.device)
        return t.astype(like.dtype) if t.dtype.is_floating and t.dtype is not like.dtype else t
    return as_tensor(x)


def layout(n):
    return "(N, C, L)" if n == 1 else "(N, C, H, W)"


def check_rank(x, n, op, what="input"):
    if x.ndim != n + 2:
        raise errors.ShapeError(f"{op}: expected a {n + 2}-D {what} {layout(n)}, got shape "
                                f"{tuple(x.shape)}")


def window_out(op, in_sizes, kernel, stride, pads, dilation, ceil_mode=False):
    """Output sizes of a convolution or pooling window sliding over in_sizes; pads in ONNX
    order (all begins, then all ends). ceil_mode follows PyTorch: the last window must start
    inside the input or its leading padding."""
    n = len(in_sizes)
    out = []
    for d in range(n):
        if stride[d] < 1 or dilation[d] < 1 or kernel[d] < 1:
            raise errors.ValueError(f"{op}: kernel {tuple(kernel)}, stride {tuple(stride)} and "
                                    f"dilation {tuple(dilation)} must be positive")
        ext = dilation[d] * (kernel[d] - 1) + 1
        padded = in_sizes[d] + pads[d] + pads[n + d]
        if padded < ext:
            raise errors.ShapeError(f"{op}: along spatial axis {d} the window spans {ext} "
                                    f"(kernel {kernel[d]}, dilation {dilation[d]}) but the "
                                    f"padded input is only {padded} (size {in_sizes[d]} + pads "
                                    f"{pads[d]} + {pads[n + d]}): no output")
        span, s = padded - ext, stride[d]
        o = span // s + (1 if ceil_mode and span % s else 0) + 1
        if ceil_mode and (o - 1) * s >= in_sizes[d] + pads[d]:
            o -= 1
        out.append(o)
    return out
