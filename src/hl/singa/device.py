"""SINGA's device module over hl's devices.

``create_cpu_device()`` / ``get_default_device()`` give the host; ``create_cuda_gpu()`` and
``create_cuda_gpu_on(id)`` give hl's CUDA device when that backend is there and a GPU answers,
and otherwise raise hl.errors.DeviceError saying so. A SINGA device is an hl.Device with
SINGA's methods (``id()``, ``SetRandSeed``, ``Sync``, ``EnableGraph`` ...).

Graph mode does not exist in hl yet: ``EnableGraph(True)`` / ``RunGraph`` / ``ResetGraph`` are
accepted and ops keep running eagerly (see docs/singa.md), and ``PrintTimeProfiling`` says that
there is no per-op time table to print.
"""
import sys
import warnings

from .. import _core, devices, errors
from ..ops import random as _random


class Device(devices.Device):
    """An hl.Device with SINGA's C++ Device methods."""
    __slots__ = ()

    def __call__(self):
        """The device itself: SINGA's raw tensors spell ``t.device()``."""
        return self

    def id(self):
        """SINGA numbers the host -1 and GPUs from 0."""
        return -1 if self.kind == "cpu" else self.index

    def lang(self):
        return 0 if self.kind == "cpu" else 1   # SINGA's kCpp / kCuda

    def SetRandSeed(self, seed):  # noqa: N802 - SINGA's C++ names
        """Seeds hl's generator, which every device draws from (counter-based: the same
        numbers whatever the device or thread count)."""
        _random.manual_seed(int(seed))

    def SetVerbosity(self, verbosity):  # noqa: N802
        _state["verbosity"] = int(verbosity)

    def verbosity(self):
        return _state["verbosity"]

    def SetSkipIteration(self, n):  # noqa: N802
        _state["skip"] = int(n)

    def Sync(self):  # noqa: N802
        """Waits for the device's queued work: hl's ops return when done (the CPU backend
        is synchronous and there is no CUDA backend yet), so there is none to wait for."""

    def EnableGraph(self, enable):  # noqa: N802
        if enable:
            graph_mode_note()
        _state["graph"] = bool(enable)

    def graph_enabled(self):
        return _state["graph"]

    def RunGraph(self, serial=False):  # noqa: N802
        """Nothing to replay: the ops already ran eagerly when they were called."""

    def ResetGraph(self):  # noqa: N802
        _state["graph"] = False

    def PrintTimeProfiling(self):  # noqa: N802
        print("hl.singa: no per-op time profile: hl runs SINGA programs eagerly (graph mode "
              "is not built yet), and the time table comes with graph mode",
              file=sys.stdout)


_state = {"verbosity": 0, "skip": 5, "graph": False, "warned": False}
_DEVICES = {}


def graph_mode_note():
    """Warns once that SINGA's graph mode runs eagerly here (compile(use_graph=True),
    model.graph(True), dev.EnableGraph(True))."""
    if not _state["warned"]:
        _state["warned"] = True
        warnings.warn("hl.singa: graph mode (use_graph=True) is not built in hl yet; the "
                      "model runs eagerly, with the same results", stacklevel=3)


def _door_device(d):
    """The SINGA Device for an hl device (one object per device, like SINGA's)."""
    key = (d.kind, d.index)
    dev = _DEVICES.get(key)
    if dev is None:
        dev = _DEVICES[key] = Device(d.kind, d.index)
    return dev


def create_cpu_device():
    return _door_device(devices.cpu())


def get_default_device():
    return _door_device(devices.get_default_device())


def _gpu(device_id):
    if not _core.device_available(1, int(device_id)):
        from ..devices import cuda
        why = cuda.unavailable_reason() or f"there are {cuda.device_count()} cuda devices"
        raise errors.DeviceError(
            f"create_cuda_gpu_on({device_id}): hl has no CUDA device {device_id} here ({why}); "
            f"use device.create_cpu_device() or device.get_default_device()")
    return _door_device(devices.cuda(int(device_id)))


def create_cuda_gpu():
    return _gpu(0)


def create_cuda_gpu_on(device_id):
    return _gpu(device_id)


def create_cuda_gpus(num):
    return [_gpu(i) for i in range(int(num))]


def create_cuda_gpus_on(device_ids):
    return [_gpu(i) for i in device_ids]


def get_num_gpus():
    n = 0
    while _core.device_available(1, n):
        n += 1
    return n


def get_gpu_ids():
    return list(range(get_num_gpus()))


def create_opencl_device():
    raise errors.DeviceError("create_opencl_device: hl has no OpenCL backend")


def enable_lazy_alloc(enable):
    """hl allocates when a tensor is made; nothing to switch."""


__all__ = ["Device", "create_cpu_device", "create_cuda_gpu", "create_cuda_gpu_on",
           "create_cuda_gpus", "create_cuda_gpus_on", "create_opencl_device",
           "enable_lazy_alloc", "get_default_device", "get_gpu_ids", "get_num_gpus"]
