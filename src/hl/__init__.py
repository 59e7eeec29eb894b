"""hl: a Keras-style deep-learning library over a C core reached through cffi.

    import hl
    x = hl.randn(3, 4)
    y = (x @ x.T).relu().sum()

See README.md for the tour and docs/ for the design.
"""
from . import errors
from ._core import version as _version
from .devices import (Device, cpu, cuda, cuda_available, device, empty_cache,
                      get_default_device, memory_stats, reset_peak_memory_stats,
                      set_default_device)
from .dtypes import (DType, bfloat16, bool_, dtype, float16, float32, float64, int32, int64,
                     uint8)
from ._tensor import Tensor, as_tensor, from_numpy, tensor
from . import ops  # the kernels' plain calls (backward kernels included), one module per family
from .ops import random
from . import autograd
from .autograd.functional import *  # noqa: F401,F403 - every op users call, recording gradients
from .autograd import Placeholder, enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from . import losses, metrics
from . import layers
from .model import Input, Model, Module, Sequential
from .layers import activations
from . import callbacks

layer = layers  # SINGA's module name: `from singa import layer` -> `from hl import layer`

__version__ = _version()
bool = bool_  # noqa: A001 - hl.bool like torch.bool; Python's bool stays builtins.bool


def set_num_threads(n):
    """Threads for libcore's loops and OpenBLAS together (they never run at once, so the two
    never oversubscribe the cores)."""
    from . import _core
    _core.set_num_threads(n)


def get_num_threads():
    from . import _core
    return _core.get_num_threads()


from . import opt  # noqa: E402
optim = opt  # PyTorch's name for the same package
from . import data  # noqa: E402
from . import distributed, distribution  # noqa: E402 - MPI itself loads only under mpiexec

# SINGA's spellings of two things that live a layer above the package SINGA names:
# hl.opt.DistOpt (it needs the MPI group) and hl.autograd.mse_loss (a loss), and PyTorch's
# place for SyncBatchNorm (torch.nn, here hl.layers; it needs the MPI group too). The
# namespace that imports both sides joins them, so hl.opt, hl.autograd and hl.layers never
# import upward.
opt.DistOpt = distributed.DistOpt
layers.SyncBatchNorm = distributed.SyncBatchNorm
layers.__all__.append("SyncBatchNorm")
autograd.mse_loss = losses.mse


def save(obj, path, overwrite=True):
    """Saves a whole model (or any object holding tensors: a dict, an optimiser) to one file:
    its pickled object graph plus an HDF5 archive of its tensors, written atomically."""
    from .checkpoint import pickling
    pickling.save(obj, path, overwrite)


def load(path, device=None, allowed=(), trusted=False):
    """Loads what hl.save wrote, tensors on `device` (None: where they were saved).
    Unpickling goes through an allow-list (hl's classes, builtin containers, numpy, user
    subclasses of hl.Layer/hl.Module from imported modules, and the classes in `allowed`);
    any other global raises hl.errors.UnsafeCheckpointError unless trusted=True."""
    from .checkpoint import pickling
    return pickling.load(path, device, allowed, trusted)


def __getattr__(name):
    # hl.onnx and hl.sonnx import the onnx package, so they load on first use, not with hl.
    if name in ("onnx", "sonnx"):
        import importlib
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'hl' has no attribute {name!r}")
