"""The real NCCL through the real library: libhlcuda.so (nvcc) finds every entry point hl
uses in the nvidia-nccl-cu13 wheel's libnccl.so.2, by the names and types of nccl_api.h,
and NCCL answers the calls that need no GPU (its version, a unique id). Runs wherever nvcc
built libhlcuda.so and the `cuda` extra is installed, GPU or not; skips elsewhere (a gpu
test may). The collectives themselves need GPUs (tests/distributed/test_cuda.py)."""
import ctypes
import os

import pytest

from hl import _cuda_libs, _nccl

pytestmark = pytest.mark.gpu

_REAL = os.path.join(os.path.dirname(_cuda_libs.__file__), "libhlcuda.so")


@pytest.mark.skipif(not os.path.exists(_REAL) or _nccl.library_path() is None,
                    reason="needs libhlcuda.so (nvcc) and the nvidia-nccl-cu13 wheel")
def test_the_real_library_loads_nccl_entry_points_from_the_wheel():
    _cuda_libs._preload_runtime()  # libhlcuda.so needs the runtime wheels' libraries
    lib = ctypes.CDLL(_REAL)
    _nccl._declare(lib)
    why = ctypes.create_string_buffer(512)
    path = _nccl.library_path()
    assert lib.hl_nccl_open(path.encode(), why, len(why)) == 0, why.value
    version = lib.hl_nccl_version()
    assert version >= 22700, version  # the extra asks for 2.27 or newer
    uid = ctypes.create_string_buffer(_nccl.ID_BYTES)
    code = lib.hl_nccl_unique_id(uid)
    assert code == 0, lib.hl_nccl_describe(None, code)
    assert uid.raw != bytes(_nccl.ID_BYTES)  # NCCL filled in its bootstrap address
