"""Signal processing: window functions (Hann, Hamming, Blackman), DFT and STFT.
"""

import numpy as np

from ... import errors
from ..registry import onnx_op
from ._util import axis_of, check_shape, const, F, np_dtype_of_onnx, via_float32


# ---- signal processing: window functions, DFT, STFT -----------------------------------------

def _window(n, size, formula):
    """A window of ``size`` (a scalar input) values, formula(k, N) for k = 0..size-1, where
    N is size (periodic, the default) or size - 1 (symmetric)."""
    length = n.scalar(size)
    if not isinstance(length, (int, np.integer)) or length < 0:
        raise n.error(f"size must be a non-negative integer, got {length!r}",
                      errors.ValueError)
    check_shape(n, [length])
    k = np.arange(length, dtype=np.float64)
    denom = length if n.attr("periodic", 1) else length - 1
    dtype = np_dtype_of_onnx(n, n.attr("output_datatype", 1))
    with np.errstate(divide="ignore", invalid="ignore"):
        w = formula(k, denom) if denom else np.ones(length)
    return F.cast(const(w, like=size), dtype)


@onnx_op("HannWindow")
def hann_window(n, size):
    return _window(n, size, lambda k, N: np.sin(np.pi * k / N) ** 2)


@onnx_op("HammingWindow")
def hamming_window(n, size):
    alpha = 25.0 / 46.0
    return _window(n, size, lambda k, N: alpha - (1 - alpha) * np.cos(2 * np.pi * k / N))


@onnx_op("BlackmanWindow")
def blackman_window(n, size):
    return _window(n, size, lambda k, N: 0.42 - 0.5 * np.cos(2 * np.pi * k / N)
                   + 0.08 * np.cos(4 * np.pi * k / N))


def _dft_last(re, im, length, inverse, onesided):
    """The DFT of re + i*im along their last axis as (re, im), by matmul with cos/sin
    matrices built on the host (O(n^2), fine for the lengths ONNX models use; the
    gradient flows like any matmul). ``length`` pads with zeros or truncates first.
    inverse: the normalized inverse; with onesided, the real inverse of a one-sided
    spectrum (numpy's irfft: re only, im None)."""
    def fit(t, size):
        if t is None:
            return None
        have = t.shape[-1]
        if have > size:
            return t[..., :size]
        if have < size:
            return F.pad(t, [(0, 0)] * (t.ndim - 1) + [(0, size - have)])
        return t
    like = re
    if inverse and onesided:
        bins = length // 2 + 1
        re, im = fit(re, bins), fit(im, bins)
        k = np.arange(bins)[:, None]
        t = np.arange(length)[None, :]
        # Hermitian symmetry: each bin but 0 (and length/2 when even) stands for two.
        weight = np.where((k == 0) | (2 * k == length), 1.0, 2.0) / length
        c = const((np.cos(2 * np.pi * k * t / length) * weight).astype(like.dtype.np), like=like)
        s = const((np.sin(2 * np.pi * k * t / length) * weight).astype(like.dtype.np), like=like)
        out = F.matmul(re, c)
        return (out - F.matmul(im, s) if im is not None else out), None
    re, im = fit(re, length), fit(im, length)
    bins = length // 2 + 1 if onesided else length
    t = np.arange(length)[:, None]
    k = np.arange(bins)[None, :]
    scale = 1.0 / length if inverse else 1.0
    c = const((np.cos(2 * np.pi * t * k / length) * scale).astype(like.dtype.np), like=like)
    s = const((np.sin(2 * np.pi * t * k / length) * scale).astype(like.dtype.np), like=like)
    sign = 1.0 if inverse else -1.0  # e^{-i..} forward, e^{+i..} inverse
    out_re = F.matmul(re, c)
    out_im = F.matmul(re, s) * sign
    if im is not None:
        out_re = out_re - F.matmul(im, s) * sign
        out_im = out_im + F.matmul(im, c)
    return out_re, out_im


def _dft(n, x, length, axis):
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise n.error(f"the signal must end in a dimension of 1 (real) or 2 (complex), got "
                      f"shape {x.shape}", errors.ShapeError)
    if not x.dtype.is_floating:
        raise n.error(f"the signal must be float, got {x.dtype.name}", errors.DTypeError)
    axis = axis_of(n, axis, x.ndim)
    if axis == x.ndim - 1:
        raise n.error("axis cannot be the last (real/imaginary) dimension",
                      errors.IndexError)
    inverse, onesided = bool(n.attr("inverse", 0)), bool(n.attr("onesided", 0))
    if length is None:
        length = 2 * (x.shape[axis] - 1) if inverse and onesided else x.shape[axis]
    if length < 1:
        raise n.error(f"dft_length must be positive, got {length}", errors.ValueError)
    # Move the transformed axis last, then back.
    perm = [d for d in range(x.ndim - 1) if d != axis] + [axis]
    back = list(np.argsort(perm))
    re = F.permute(x[..., 0], *perm)
    im = F.permute(x[..., 1], *perm) if x.shape[-1] == 2 else None
    re, im = _dft_last(re, im, length, inverse, onesided)
    parts = [re] if im is None else [re, im]
    return F.stack([F.permute(p, *back) for p in parts], -1)


@onnx_op("DFT", since=20)
@via_float32
def dft(n, x, dft_length=None, axis=None):
    length = n.scalar(dft_length)
    return _dft(n, x, None if length is None else int(length), int(n.scalar(axis, -2)))


@onnx_op("DFT", since=17)
@via_float32
def dft17(n, x, dft_length=None):
    length = n.scalar(dft_length)
    return _dft(n, x, None if length is None else int(length), n.attr("axis", 1))


@onnx_op("STFT", since=17)
@via_float32
def stft(n, x, frame_step, window=None, frame_length=None):
    """Frames of the signal [batch, length, 1 or 2], each weighted by the window, through
    the DFT: [batch, frames, bins, 2]."""
    if x.ndim != 3 or x.shape[-1] not in (1, 2):
        raise n.error(f"the signal must be [batch, length, 1 or 2], got shape {x.shape}",
                      errors.ShapeError)
    step = int(n.scalar(frame_step))
    length = n.scalar(frame_length)
    if length is None:
        length = window.shape[0] if window is not None else x.shape[1]
    length = int(length)
    if window is not None and tuple(window.shape) != (length,):
        raise n.error(f"window of shape {window.shape} must have frame_length {length} "
                      f"values", errors.ShapeError)
    if step < 1 or not 0 < length <= x.shape[1]:
        raise n.error(f"frame_step {step} must be positive and frame_length {length} in "
                      f"[1, {x.shape[1]}]", errors.ValueError)
    frames = 1 + (x.shape[1] - length) // step
    idx = np.arange(frames)[:, None] * step + np.arange(length)[None, :]
    framed = F.gather(x, const(idx.astype(np.int64), like=x), 1)
    if window is not None:  # [batch, frames, length, 1 or 2] times [length, 1]
        framed = framed * F.reshape(F.cast(window, x.dtype.name), length, 1)
    re = framed[..., 0]
    im = framed[..., 1] if x.shape[-1] == 2 else None
    re, im = _dft_last(re, im, length, False, bool(n.attr("onesided", 1)))
    return F.stack([re, im], -1)
