"""SINGA's utils: the padding arithmetic of ONNX's auto_pad, a progress bar, and helpers its
examples import."""
import collections
import sys

import numpy as np

OrderedDict = collections.OrderedDict


def update_progress(progress, info):
    """Prints a 20-character progress bar at `progress` (0..1) followed by `info`."""
    status = ""
    if isinstance(progress, int):
        progress = float(progress)
    if not isinstance(progress, float):
        progress, status = 0.0, "error: progress var must be float. "
    if progress < 0:
        progress, status = 0.0, "Halt. "
    if progress >= 1:
        progress, status = 1.0, "Done. "
    status += info
    block = int(round(20 * progress))
    sys.stdout.write(f"[{'.' * block}{' ' * (20 - block)}] {progress * 100:3.1f}% {status}")
    sys.stdout.write("\b" * (29 + len(status)))
    sys.stdout.flush()


def get_output_shape(auto_pad, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """ONNX's output size for auto_pad SAME_UPPER / SAME_LOWER (ceil(in / stride)) or VALID
    (ceil((in - k + 1) / stride))."""
    out = []
    for n, k, s in zip(input_spatial_shape, kernel_spatial_shape, strides_spatial):
        if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            out.append(int(np.ceil(float(n) / float(s))))
        elif auto_pad == "VALID":
            out.append(int(np.ceil(float(n - (k - 1)) / float(s))))
        else:
            out.append(0)
    return out


def get_padding_shape(pad_mode, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """(pads, odd pads) as SINGA computes them: the even part of each axis's padding on both
    sides, [begin, end] per axis, and the odd one left over, at the end for SAME_UPPER and
    at the beginning for SAME_LOWER."""
    out = get_output_shape(pad_mode, input_spatial_shape, kernel_spatial_shape,
                           strides_spatial)
    n = len(input_spatial_shape)
    pads, odd = [0] * (2 * n), [0] * (2 * n)
    for i in range(n):
        whole = max((out[i] - 1) * strides_spatial[i] + kernel_spatial_shape[i] -
                    input_spatial_shape[i], 0)
        pads[2 * i] = pads[2 * i + 1] = whole // 2
        if whole % 2:
            odd[2 * i + (1 if pad_mode == "SAME_UPPER" else 0)] += 1
    return pads, odd


def onnx_same_pads(pad_mode, input_spatial_shape, kernel_spatial_shape, strides_spatial):
    """get_padding_shape's result in ONNX's order: (begins..., ends...)."""
    pads, odd = get_padding_shape(pad_mode, input_spatial_shape, kernel_spatial_shape,
                                  strides_spatial)
    n = len(input_spatial_shape)
    return tuple([pads[2 * i] + odd[2 * i] for i in range(n)] +
                 [pads[2 * i + 1] + odd[2 * i + 1] for i in range(n)])


def force_unicode(s):
    try:
        return s.decode("utf-8")
    except AttributeError:
        return s


__all__ = ["OrderedDict", "update_progress", "get_output_shape", "get_padding_shape",
           "onnx_same_pads", "force_unicode"]
