"""Random generators: RandomNormal, RandomUniform, their -Like forms, Bernoulli, Multinomial.
"""

import weakref

import numpy as np

from ... import errors
from ..registry import onnx_op
from ._util import check_shape, device_of, F, np_dtype_of_onnx


# ---- random generators -----------------------------------------------------------------------
# Without a seed attribute they draw from hl's default generator (hl.random.manual_seed sets
# it); a node with a seed owns a generator of its own, seeded once, so a run of the model
# repeats the draws of the run before it only if the model is prepared anew.

_GENERATORS = weakref.WeakKeyDictionary()  # node -> its seeded generator


def _generator(n):
    if not n.has("seed"):
        return None
    if n not in _GENERATORS:
        from ...ops.random import Generator
        # The float seed's bits, so that seeds 1.0 and 1.5 differ.
        _GENERATORS[n] = Generator(int(np.float64(n.attr("seed")).view(np.int64)))
    return _GENERATORS[n]


def _float_dtype(n, elem_type, default):
    """The output dtype: the dtype attribute's float type, or ``default``."""
    name = default if elem_type is None else np_dtype_of_onnx(n, elem_type)
    if name not in ("float32", "float64", "float16", "bfloat16"):
        raise n.error(f"draws floats; dtype {name} is not a float type", errors.DTypeError)
    return name


def _draw(n, kind, shape, dtype, device, a, b):
    """``shape`` values from normal(mean=a, std=b) or uniform[a, b), in ``dtype``; hl's
    generators draw float32 and float64, so half types are drawn in float32 and cast."""
    shape = check_shape(n, shape)
    wide = dtype if dtype in ("float32", "float64") else "float32"
    if kind == "normal":
        if b < 0:
            raise n.error(f"scale must be >= 0, got {b}", errors.ValueError)
        t = F.normal(*shape, mean=a, std=b, dtype=wide, device=device,
                     generator=_generator(n))
    else:
        if not a <= b:
            raise n.error(f"low {a} must not exceed high {b}", errors.ValueError)
        t = F.uniform(*shape, low=a, high=b, dtype=wide, device=device,
                      generator=_generator(n))
    return t if wide == dtype else F.cast(t, dtype)


@onnx_op("RandomNormal")
def random_normal(n):
    return _draw(n, "normal", n.attr("shape", []), _float_dtype(n, n.attr("dtype"), "float32"),
                 device_of(n), float(n.attr("mean", 0.0)), float(n.attr("scale", 1.0)))


@onnx_op("RandomUniform")
def random_uniform(n):
    return _draw(n, "uniform", n.attr("shape", []),
                 _float_dtype(n, n.attr("dtype"), "float32"), device_of(n),
                 float(n.attr("low", 0.0)), float(n.attr("high", 1.0)))


@onnx_op("RandomNormalLike")
def random_normal_like(n, x):
    dtype = _float_dtype(n, n.attr("dtype"), x.dtype.name)
    return _draw(n, "normal", x.shape, dtype, x.device, float(n.attr("mean", 0.0)),
                 float(n.attr("scale", 1.0)))


@onnx_op("RandomUniformLike")
def random_uniform_like(n, x):
    dtype = _float_dtype(n, n.attr("dtype"), x.dtype.name)
    return _draw(n, "uniform", x.shape, dtype, x.device, float(n.attr("low", 0.0)),
                 float(n.attr("high", 1.0)))


@onnx_op("Bernoulli")
def bernoulli(n, p):
    """1 where a uniform draw falls below the element's probability, else 0."""
    if not p.dtype.is_floating:
        raise n.error(f"takes float probabilities, got {p.dtype.name}", errors.DTypeError)
    dtype = p.dtype.name if n.attr("dtype") is None else np_dtype_of_onnx(n, n.attr("dtype"))
    u = _draw(n, "uniform", p.shape, "float32", p.device, 0.0, 1.0)
    hit = F.lt(u, F.cast(p, "float32") if p.dtype.name != "float32" else p)
    return F.cast(hit, dtype)


@onnx_op("Multinomial")
def multinomial(n, logits):
    """sample_size class indices per row of unnormalized log-probabilities, [batch,
    classes], by inverse transform sampling: the index is the count of cumulative
    probabilities at or below a uniform draw."""
    if logits.ndim != 2 or not logits.dtype.is_floating:
        raise n.error(f"takes float log-probabilities [batch, classes], got "
                      f"{logits.dtype.name} {logits.shape}", errors.ShapeError)
    dtype = np_dtype_of_onnx(n, n.attr("dtype", 6))
    if dtype not in ("int32", "int64"):
        raise n.error(f"dtype must be int32 or int64, got {dtype}", errors.DTypeError)
    batch, classes = logits.shape
    samples = int(n.attr("sample_size", 1))
    x = F.cast(logits, "float64") if logits.dtype.name != "float64" else logits
    cdf = F.cumsum(F.softmax(x, -1), axis=-1)                       # [batch, classes]
    u = _draw(n, "uniform", (batch, samples, 1), "float64", logits.device, 0.0, 1.0)
    below = F.le(F.unsqueeze(cdf, 1), u)                            # [batch, samples, classes]
    idx = F.sum(F.cast(below, "int64"), axis=-1)
    return F.cast(F.minimum(idx, classes - 1), dtype)  # rounding can leave cdf[-1] < u
