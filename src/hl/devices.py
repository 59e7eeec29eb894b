"""Devices: where a tensor's memory lives and its kernels run.

``hl.cpu()`` is always there. ``hl.cuda(i)`` names a GPU, served by the CUDA backend
(docs/cuda.md) when hl was built with it and a GPU answers, or by its host emulation under
HL_CUDA_EMULATE=1; otherwise using one raises a DeviceError that says why. ``hl.meta()``
holds tensors that have a shape and a dtype but no memory: every op checks its arguments and computes its
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


class _Cuda:
    """``hl.cuda(i)`` names GPU i (a Device; usable when ``hl.cuda.is_available()``), and
    ``hl.cuda.<name>`` holds what PyTorch keeps in ``torch.cuda``: synchronize, device_count,
    memory statistics, and why there is no GPU (docs/cuda.md)."""

    def __call__(self, index=0):
        return Device("cuda", index)

    def is_available(self):
        return _core.device_available(_KINDS["cuda"], 0)

    def device_count(self):
        return _core.device_count(_KINDS["cuda"])

    def unavailable_reason(self):
        """Why no cuda device can be used (None when one can): no driver, no device, a
        missing runtime library, a too-old driver, or hl built without its CUDA library."""
        return None if self.is_available() else (_core.cuda_unavailable_reason() or
                                                 "no CUDA device answers")

    def is_emulated(self):
        """True when cuda:N is the host emulation of the CUDA backend (HL_CUDA_EMULATE=1)."""
        from . import _cuda_libs
        return self.is_available() and _cuda_libs.emulated()

    def _device(self, device):
        d = _coerce("cuda" if device is None else
                    (f"cuda:{device}" if isinstance(device, int) else device))
        if d.kind != "cuda":
            raise errors.DeviceError(f"expected a cuda device, got {d}")
        return d

    def synchronize(self, device=None):
        """Waits until the device has finished everything queued on it; raises the
        DeviceError of a kernel that failed since."""
        d = self._device(device)
        _core.device_synchronize(d.code, d.index)

    def memory_stats(self, device=None):
        """Bytes handed to tensors, held in the caching allocator, and the peak in use."""
        d = self._device(device)
        return _core.memory_stats(d.code, d.index)

    def memory_allocated(self, device=None):
        return self.memory_stats(device)["in_use"]

    def max_memory_allocated(self, device=None):
        return self.memory_stats(device)["peak"]

    def memory_reserved(self, device=None):
        s = self.memory_stats(device)
        return s["in_use"] + s["cached"]

    def empty_cache(self, device=None):
        """Returns the allocator's cached blocks to the driver."""
        d = self._device(device)
        _core.empty_cache(d.code, d.index)

    def __repr__(self):
        return "hl.cuda"


cuda = _Cuda()


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
    """True when the CUDA backend is loaded and a GPU answers (or HL_CUDA_EMULATE=1 runs its
    host emulation); hl.cuda.unavailable_reason() says why not."""
    return cuda.is_available()


def memory_stats(device=None):
    """Bytes in use by tensors (graph-mode plans' arenas included), held in the allocator's
    cache, and the peak in use since start or reset_peak_memory_stats()."""
    d = _coerce(device)
    return _core.memory_stats(d.code, d.index)


def reset_peak_memory_stats(device=None):
    """Restarts memory_stats()['peak'] from the bytes in use now (PyTorch's name), so that
    the peak of what follows (a few training steps after warm-up) can be read alone."""
    d = _coerce(device)
    _core.reset_peak_memory_stats(d.code, d.index)


def empty_cache(device=None):
    """Returns the allocator's cached blocks to the system (or the GPU driver)."""
    d = _coerce(device)
    _core.empty_cache(d.code, d.index)
