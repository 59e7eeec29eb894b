"""Devices: where a tensor's memory lives and its kernels run.

``hl.cpu()`` is always there. ``hl.cuda(i)`` names a GPU; until the CUDA backend is built
(see cuda/README.md) using one raises a DeviceError that says so. ``hl.meta()`` holds tensors
that have a shape and a dtype but no memory: every op checks its arguments and computes its
output's shape on them, and nothing runs (``hl.zeros((1 << 40,), device="meta")`` is free).
``hl.set_default_device`` chooses where new tensors go when no device is given.
"""
from . import _core, errors

_KINDS = {"cpu": 0, "cuda": 1, "meta": 2}  # libcore's HL_DEVICE_* codes
KIND_NAMES = {code: kind for kind, code in _KINDS.items()}


class Device:
    __slots__ = ("kind", "index")

    def __init__(self, kind="cpu", index=0):
        if kind not in _KINDS:
            raise errors.DeviceError(f"unknown device kind {kind!r}; expected 'cpu', 'cuda' or "
                                     f"'meta'")
        if index < 0:
            raise errors.DeviceError(f"device index must be >= 0, got {index}")
        self.kind, self.index = kind, index

    @property
    def code(self):
        return _KINDS[self.kind]

    def __eq__(self, other):
        other = _coerce(other) if isinstance(other, (str, Device)) else other
        return isinstance(other, Device) and (self.kind, self.index) == (other.kind, other.index)

    def __hash__(self):
        return hash((self.kind, self.index))

    def __repr__(self):
        return f"cuda:{self.index}" if self.kind == "cuda" else self.kind

    def __reduce__(self):
        return (Device, (self.kind, self.index))


def cpu():
    return Device("cpu", 0)


def cuda(index=0):
    """A CUDA device. It can be named now; tensors can be put on it once the CUDA backend
    exists and a GPU is present (``hl.cuda_available()``)."""
    return Device("cuda", index)


def meta():
    """The meta device: shapes and dtypes without memory (PyTorch's device='meta')."""
    return Device("meta", 0)


def _coerce(d):
    if d is None:
        return _default
    if isinstance(d, Device):
        return d
    if isinstance(d, str):
        kind, _, idx = d.partition(":")
        return Device(kind, int(idx) if idx else 0)
    raise errors.DeviceError(f"expected a device ('cpu', 'cuda:0', 'meta' or hl.Device), got "
                             f"{d!r}")


def device(d=None):
    """The Device for d: a Device, 'cpu', 'cuda', 'cuda:1', or None for the default."""
    return _coerce(d)


_default = cpu()


def set_default_device(d):
    global _default
    _default = _coerce(d)


def get_default_device():
    return _default


def cuda_available():
    """True when the CUDA backend is built and a GPU answers."""
    return _core.device_available(_KINDS["cuda"], 0)


def memory_stats(device=None):
    """Bytes in use by tensors, held in the allocator's cache, and the peak in use."""
    d = _coerce(device)
    return _core.memory_stats(d.code, d.index)


def empty_cache(device=None):
    """Returns the allocator's cached blocks to the system (or the GPU driver)."""
    d = _coerce(device)
    _core.empty_cache(d.code, d.index)
