"""The NCCL glue of hl's CUDA library (libcore/cuda/nccl.cu), reached through ctypes.

libhlcuda (or, under HL_CUDA_EMULATE=1, libhlcuda_emu with its emulated NCCL) exports a few
``hl_nccl_*`` functions; they take hl tensor handles (libcore's pointers) and run NCCL's
collectives on the tensor's device's compute stream. NCCL itself is loaded on first use
from the ``nvidia-nccl-cu13`` wheel (``site-packages/nvidia/nccl/lib/libnccl.so.2``), not
at ``import hl``: only data-parallel training on cuda needs it. ctypes releases the GIL
inside each call, so a collective that waits (the emulation's, or ncclCommInitRank) does
not stop the other threads (the fault watchdog among them).

Every call returns NCCL's result code; ``Error`` carries it with NCCL's sentence.
"""
import ctypes
import os
import threading

from . import _core, _cuda_libs

SUCCESS, IN_PROGRESS = 0, 7
ID_BYTES = 128
_WHEEL_LIB = os.path.join("nccl", "lib", "libnccl.so.2")

_lock = threading.Lock()
_lib = None
_why_not = None


class Error(Exception):
    """A failed NCCL call: ``code`` (ncclResult_t) and NCCL's description."""

    def __init__(self, code, text):
        super().__init__(text)
        self.code = code


def library_path():
    """libnccl.so.2 of the nvidia-nccl-cu13 wheel, or None when it is not installed."""
    for d in _cuda_libs.wheel_roots():
        path = os.path.join(d, _WHEEL_LIB)
        if os.path.exists(path):
            return path
    return None


def load():
    """The glue with NCCL loaded, or raises RuntimeError saying why it cannot be."""
    global _lib, _why_not
    with _lock:
        if _lib is not None:
            return _lib
        if _why_not is None:
            _why_not = _open()
        if _why_not:
            raise RuntimeError(_why_not)
        return _lib


def available():
    """None when NCCL can be used, else why not (a sentence)."""
    try:
        load()
    except RuntimeError as e:
        return str(e)
    return None


def _open():
    global _lib
    if _core.cuda_unavailable_reason() is not None:
        return f"the CUDA backend is not loaded ({_core.cuda_unavailable_reason()})"
    lib = ctypes.CDLL(_cuda_libs.library_path())  # the library libcore loaded: one copy
    if not hasattr(lib, "hl_nccl_open"):
        return "hl's CUDA library was built without NCCL support (rebuild hl)"
    _declare(lib)
    if _cuda_libs.emulated():
        path = b""  # the emulated library serves NCCL itself
    else:
        path = library_path()
        if path is None:
            return ("NCCL is not installed: pip install 'hl[cuda]' (the nvidia-nccl-cu13 "
                    "wheel)")
        path = path.encode()
    why = ctypes.create_string_buffer(512)
    if lib.hl_nccl_open(path, why, len(why)) != 0:
        return f"NCCL could not be loaded: {why.value.decode(errors='replace')}"
    _lib = lib
    return ""


def _declare(lib):
    p, i = ctypes.c_void_p, ctypes.c_int
    for name, res, args in (
            ("hl_nccl_open", i, [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]),
            ("hl_nccl_version", i, []),
            ("hl_nccl_unique_id", i, [ctypes.c_char_p]),
            ("hl_nccl_init", i, [ctypes.POINTER(p), i, ctypes.c_char_p, i, i]),
            ("hl_nccl_all_reduce", i, [p, p]),
            ("hl_nccl_broadcast", i, [p, p, i]),
            ("hl_nccl_mark", i, [p]),
            ("hl_nccl_query", i, [p]),
            ("hl_nccl_abort", i, [p]),
            ("hl_nccl_destroy", i, [p]),
            ("hl_nccl_describe", ctypes.c_char_p, [p, i])):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args


def _check(code, comm=None):
    if code != SUCCESS:
        raise Error(code, describe(comm, code))
    return code


def describe(comm, code):
    return _lib.hl_nccl_describe(comm, code).decode(errors="replace")


def version():
    """NCCL's version as (major, minor, patch)."""
    v = load().hl_nccl_version()
    return (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else (v // 1000, v // 100 % 10,
                                                                      v % 100)


def unique_id():
    """A new communicator id (bytes), made by one rank and sent to the others."""
    out = ctypes.create_string_buffer(ID_BYTES)
    _check(load().hl_nccl_unique_id(out))
    return out.raw


def init(nranks, id_bytes, rank, device_index):
    """Joins the communicator named by id_bytes; blocks until every rank has. Returns it."""
    comm = ctypes.c_void_p()
    _check(load().hl_nccl_init(ctypes.byref(comm), nranks, id_bytes, rank, device_index))
    return comm


def _handle(t):
    return ctypes.c_void_p(_core.handle_address(t._h))


def all_reduce_(comm, t):
    """Enqueues the in-place sum of hl tensor t (contiguous, on the communicator's device)."""
    _check(_lib.hl_nccl_all_reduce(comm, _handle(t)), comm)


def broadcast_(comm, t, root=0):
    """Enqueues the copy of root's t into every rank's t."""
    _check(_lib.hl_nccl_broadcast(comm, _handle(t), root), comm)


def mark(comm):
    """Marks the end of the work enqueued so far (query() says when the device is past it)."""
    _check(_lib.hl_nccl_mark(comm), comm)


def query(comm):
    """True when the device is past the mark, False while not; raises Error on a failure
    (NCCL's asynchronous error, or the device's)."""
    code = _lib.hl_nccl_query(comm)
    if code == IN_PROGRESS:
        return False
    _check(code, comm)
    return True


def abort(comm):
    """Ends the communicator now, even with collectives stuck on the device."""
    return _lib.hl_nccl_abort(comm)


def destroy(comm):
    return _lib.hl_nccl_destroy(comm)
