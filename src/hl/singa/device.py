"""SINGA's device module over hl's devices.

``create_cpu_device()`` / ``get_default_device()`` give the host; ``create_cuda_gpu()`` and
``create_cuda_gpu_on(id)`` give hl's CUDA device when that backend is there and a GPU answers,
and otherwise raise hl.errors.DeviceError saying so. A SINGA device is an hl.Device with
SINGA's methods (``id()``, ``SetRandSeed``, ``Sync``, ``EnableGraph`` ...).

``EnableGraph(True)`` buffers the ops that follow into an hl plan instead of running them,
``EnableGraph(False)`` stops buffering, ``RunGraph`` runs what was buffered and ``ResetGraph``
forgets it; ``SetVerbosity(1 or 2)`` times the plans' ops and ``PrintTimeProfiling`` prints
SINGA's report (_graph.py; docs/singa.md).
"""
import sys

from .. import _core, devices, errors
from ..ops import random as _random
from ._graph import DeviceGraph, Profiler


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
        """Above 0, the ops of every plan run from now on are timed (after each plan's
        first SetSkipIteration runs) for PrintTimeProfiling; 0 stops timing."""
        _state["verbosity"] = int(verbosity)
        _profiler.verbosity(_state["verbosity"], _state["skip"])

    def verbosity(self):
        return _state["verbosity"]

    def SetSkipIteration(self, n):  # noqa: N802
        _state["skip"] = int(n)
        _profiler.skip(n)

    def skip_iteration(self):
        return _state["skip"]

    def Sync(self):  # noqa: N802
        """Waits for the device's queued work (raises the DeviceError of a kernel that failed)."""
        _core.device_synchronize(self.code, self.index)

    def EnableGraph(self, enable):  # noqa: N802
        """True: the ops called next are buffered (recorded into an hl plan, not run) until
        EnableGraph(False); RunGraph runs them."""
        _graph_of(self).enable(bool(enable))

    def graph_enabled(self):
        return _graph_of(self).enabled

    def RunGraph(self, serial=False):  # noqa: N802
        """Runs the buffered ops: in buffering order (serial=True) or by dependencies."""
        _graph_of(self).run(bool(serial))

    def ResetGraph(self):  # noqa: N802
        """Forgets the buffered ops."""
        _graph_of(self).reset()

    def PrintTimeProfiling(self):  # noqa: N802
        """SINGA's report of the timed plans: nothing at verbosity 0; the forward and backward
        time per iteration at 1; each op's time per iteration at 2; distributed ops' at 3."""
        print(_profiler.report(_state["verbosity"]), end="", file=sys.stdout)


_state = {"verbosity": 0, "skip": 5}
_DEVICES = {}
_GRAPHS = {}
_profiler = Profiler()


def _device_key(d):
    return (d.kind, d.index)


def _graph_of(dev):
    """The device's graph (one per device, as SINGA's)."""
    key = _device_key(dev)
    g = _GRAPHS.get(key)
    if g is None:
        g = _GRAPHS[key] = DeviceGraph(str(dev))
    return g


def _door_device(d):
    """The SINGA Device for an hl device (one object per device, like SINGA's)."""
    key = _device_key(d)
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
