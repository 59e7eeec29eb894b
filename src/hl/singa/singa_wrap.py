"""What SINGA's Python layer and tests use of its C++ wrapper (``singa_wrap``), over hl.

SINGA's ``singa_wrap.Tensor`` (the "CTensor") is the raw tensor behind a Python Tensor's
``.data``, and what an Operator's ``backward`` takes and returns. Here it is an hl.Tensor
whose ``shape`` is also callable (``t.shape()``, SINGA's C++ spelling) so the same object
serves hl's engine and SINGA's code. The free functions are the handful scripts and tests
call (``Gaussian``, ``Uniform``, ``Bernoulli``, ``SetFloatValue`` ...), each one hl op.
"""
import numpy as np

from .. import _core
from .. import dtypes as _dt
from .. import errors
from .._tensor import Tensor as _HLTensor, _wrap
from ..ops import random as _random


def _cuda():
    return bool(_core.device_available(1, 0))


USE_CUDA = _cuda()
USE_DIST = False        # hl.singa.opt.DistOpt comes from hl's distributed package (see opt.py)
USE_DNNL = False
USE_OPENCL = False
USE_PYTHON3 = True
SINGA_VERSION = _core.version()

# SINGA's core.proto DataType codes, which its Python layer passes around as ints
kFloat32, kFloat16, kInt, kChar, kDouble, kUChar = 0, 1, 2, 3, 4, 5
_BY_SINGA_CODE = {0: _dt.float32, 1: _dt.float16, 2: _dt.int32, 3: _dt.int64, 4: _dt.float64,
                  5: _dt.uint8}


def dtype_of(code):
    """hl's dtype for SINGA's dtype spelling: an hl dtype, a numpy dtype or a core.proto int."""
    if isinstance(code, bool):
        raise errors.DTypeError(f"expected a dtype, got {code!r}")
    if isinstance(code, (int, np.integer)):
        try:
            return _BY_SINGA_CODE[int(code)]
        except KeyError:
            raise errors.DTypeError(f"unknown SINGA DataType code {code}; expected one of "
                                    f"{sorted(_BY_SINGA_CODE)}") from None
    return _dt.dtype(code)


class _Shape(tuple):
    """A shape that is also SINGA's ``CTensor.shape()`` method."""
    __slots__ = ()

    def __call__(self):
        return tuple(self)


class Tensor(_HLTensor):
    """SINGA's CTensor: ``Tensor(shape_list, device=None, dtype=kFloat32)`` (zeros), an hl
    tensor underneath, with the C++ method spellings SINGA's Python code calls."""
    __slots__ = ()

    def __init__(self, shape=(), device=None, dtype=kFloat32):
        from ..ops import zeros
        dev = None if device is None else _hl_device(device)
        t = zeros(*[int(s) for s in shape], dtype=dtype_of(dtype), device=dev)
        self._h, self._dtype, self._shape = t._h, t._dtype, t._shape
        self.requires_grad = self.stores_grad = False
        self.grad = self.creator = self.name = None

    @property
    def shape(self):
        return _Shape(_HLTensor.shape.__get__(self))

    def data_type(self):
        return self._dtype

    @property
    def device(self):
        """SINGA's ``t.device()``; the Device is also callable, returning itself, so the same
        attribute serves hl's code, which reads ``t.device``."""
        from .device import _door_device
        return _door_device(_HLTensor.device.__get__(self))

    def nDim(self):  # noqa: N802 - SINGA's C++ name
        return len(self.shape)

    def Size(self):  # noqa: N802
        return _HLTensor.size.__get__(self)

    def MemSize(self):  # noqa: N802
        return self.Size() * self._dtype.itemsize

    def L1(self):  # noqa: N802 - the mean absolute value, as SINGA's Tensor::l1
        return float(np.abs(np.asarray(self.cpu(), np.float64)).mean())

    def L2(self):  # noqa: N802 - the Euclidean norm over the size, as SINGA's Tensor::l2
        a = np.asarray(self.cpu(), np.float64)
        return float(np.sqrt(np.square(a).sum()) / max(a.size, 1))

    def SetFloatValue(self, v):  # noqa: N802
        self.fill_(float(v))

    def CopyData(self, other):  # noqa: N802
        self.copy_(other)

    def Clone(self):  # noqa: N802
        return raw(self.clone())

    def GetFloatValue(self, n=None):  # noqa: N802
        return np.asarray(self.cpu(), np.float32).reshape(-1)[:n]

    def ToHost(self):  # noqa: N802
        return raw(self.cpu())


def raw(t):
    """A CTensor view of an hl tensor (the same memory, no copy); None stays None."""
    if t is None or t.__class__ is Tensor:
        return t
    v = _wrap(t._h, t._dtype)
    v.__class__ = Tensor
    return v


def _hl_device(d):
    from .. import devices
    return devices.device(d)


# ---- free functions of the wrapper that Python code calls -----------------------------------

def Gaussian(mean, std, t):  # noqa: N802
    _random._fill("normal", t, mean, std, None)


def Uniform(low, high, t):  # noqa: N802
    _random._fill("uniform", t, low, high, None)


def Bernoulli(p, t):  # noqa: N802
    _random._fill("bernoulli", t, p, None, None)


class BatchNormHandle:
    """What autograd.batchnorm_2d reads of SINGA's handle: the running-average factor (the
    weight of the running statistics)."""

    def __init__(self, factor, x=None):
        self.factor = float(factor)


CudnnBatchNormHandle = BatchNormHandle


class PoolingHandle:
    """What autograd.pooling_2d reads of SINGA's handle."""

    def __init__(self, x, kernel, stride, padding, is_max=True):
        self.kernel, self.stride, self.padding = tuple(kernel), tuple(stride), tuple(padding)
        self.is_max_pooling = bool(is_max)


class ConvHandle:
    """What autograd.conv2d reads of SINGA's handle."""

    def __init__(self, x, kernel, stride, padding, in_channels, out_channels, bias, group=1):
        self.kernel, self.stride, self.padding = tuple(kernel), tuple(stride), tuple(padding)
        self.group = int(group)
