"""Finds and loads hl's CUDA backend (libhlcuda, built from libcore/cuda/) at import time.

The real library is linked against ``libcudart.so.13`` and ``libcublas.so.13`` by soname and
carries no RUNPATH: as with PyTorch, the runtime comes from the ``nvidia-cuda-runtime`` and
``nvidia-cublas`` wheels (``pip install 'hl[cuda]'``), which put their libraries under
``site-packages/nvidia/cu13/lib``; they are loaded here first (``RTLD_GLOBAL``), so the
dynamic loader then satisfies libhlcuda's needs by soname. Without the wheels, a system CUDA
install on the loader's path serves instead.

``HL_CUDA_EMULATE=1`` loads ``libhlcuda_emu.so`` instead: the same kernels compiled for the
host (docs/cuda.md), serving ``cuda:0`` on a machine without a GPU.

``HL_CUDA=0`` loads nothing (as at build time, where it skips the real library): a machine
with a GPU then behaves as one without.

Nothing here raises: when the backend cannot be loaded, the reason goes to libcore, which puts
it in every DeviceError about a cuda device, and ``hl.cuda_available()`` is False.
"""
import ctypes
import os

_HERE = os.path.dirname(os.path.abspath(__file__))
_WHEEL_LIBS = ("libcudart.so.13", "libcublasLt.so.13", "libcublas.so.13")  # dependency order


def emulated():
    return os.environ.get("HL_CUDA_EMULATE") == "1"


def wheel_roots():
    """The roots of the installed nvidia-* wheels (site-packages/nvidia, once per path)."""
    try:
        import nvidia  # a namespace package: one entry per installed nvidia-* wheel's root
    except ImportError:
        return []
    return list(nvidia.__path__)


def _wheel_lib_dirs():
    return [os.path.join(p, "cu13", "lib") for p in wheel_roots()]


def _preload_runtime():
    """Loads the wheels' CUDA libraries; returns the names not found in any wheel."""
    missing = []
    dirs = _wheel_lib_dirs()
    for name in _WHEEL_LIBS:
        for d in dirs:
            path = os.path.join(d, name)
            if os.path.exists(path):
                ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
                break
        else:
            missing.append(name)
    return missing


def library_path():
    """The library to load: HL_CUDA_LIBRARY when set (a build of one's own, e.g.
    libcore/build/opt/libhlcuda_emu.so), else the one installed beside the extension."""
    return os.environ.get("HL_CUDA_LIBRARY") or os.path.join(
        _HERE, "libhlcuda_emu.so" if emulated() else "libhlcuda.so")


def load(backend_load, unavailable_reason, set_reason):
    """Loads the backend into libcore through the binding's calls (hl._core passes them, so
    only it touches cffi): backend_load(path) -> status, unavailable_reason() -> libcore's
    reason, set_reason(why). Returns None, or why not."""
    if os.environ.get("HL_CUDA") == "0" and not emulated():
        why = "HL_CUDA=0 switches the CUDA backend off"
        set_reason(why)
        return why
    path = library_path()
    if not os.path.exists(path):
        why = ("HL_CUDA_EMULATE=1, but the emulated CUDA backend libhlcuda_emu.so was not built "
               "(python src/hl/_build.py builds it)" if emulated() else
               "hl was built without its CUDA library libhlcuda.so (nvcc or cuBLAS was missing "
               "when hl was built, or HL_CUDA=0 skipped it; "
               "HL_CUDA=1 makes the build require it; HL_CUDA_EMULATE=1 runs the emulated "
               "backend on the CPU)")
        set_reason(why)
        return why
    missing = [] if emulated() else _preload_runtime()
    if backend_load(path) == 0:
        return None
    why = unavailable_reason()
    if missing:
        why += (f" (the CUDA runtime libraries {', '.join(missing)} are missing: "
                f"pip install 'hl[cuda]')")
        set_reason(why)
    return why
