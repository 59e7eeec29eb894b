"""Builds hl's C core into the cffi extension module ``hl._hl_core``.

libcore itself is built by ``libcore/Makefile`` into a static library (objects compiled in
parallel and one by one: touching one .c file recompiles one object), which the extension
links; this file builds only cffi's small wrapper around it. The compiler flags of both come
from ``libcore/flags.mk``, the one list of them. The cffi declarations are read from
``libcore/include/hl_core.h`` (the block between HL_CDEF_BEGIN and HL_CDEF_END), so the header
and the binding cannot drift apart. OpenBLAS comes from the ``scipy-openblas32`` wheel: its
headers, its library, and symbols with a ``scipy_`` prefix.

Used by setuptools (``setup.py`` names ``src/hl/_build.py:ffibuilder`` and runs
``build_libcore()`` before compiling the extension) and directly for a development build in
place: ``python src/hl/_build.py``. Needs ``make`` and a C compiler.

The CUDA backend (libcore/cuda/, docs/cuda.md) is two more shared libraries beside the
extension, loaded at run time: libhlcuda_emu.so (the kernels compiled for the host, always
built) and libhlcuda.so (nvcc, when found; headers and libraries of cuBLAS from the
nvidia-cublas wheel, the `cuda` extra).

Environment:
  HL_SANITIZE=1  build with AddressSanitizer and UBSan, and without the caching allocator
                 (see docs/sanitizers.md)
  HL_NATIVE=1    compile for this machine's CPU (-march=native)
  HL_CUDA=1      require the real CUDA library (fail when nvcc or cuBLAS is missing);
  HL_CUDA=0      skip it; unset: build it when nvcc and cuBLAS's headers are found
"""
import glob
import os
import re
import shutil
import subprocess
import sys

from cffi import FFI

# src/hl/_build.py -> the repository root
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBCORE = os.path.join(ROOT, "libcore")
HEADER = os.path.join(LIBCORE, "include", "hl_core.h")
FLAGS = os.path.join(LIBCORE, "flags.mk")


def cdef_text(header_path=HEADER):
    """The cffi-readable part of the public header, comments removed."""
    with open(header_path) as f:
        text = f.read()
    body = text.split("/* HL_CDEF_BEGIN */", 1)[1].split("/* HL_CDEF_END */", 1)[0]
    return re.sub(r"/\*.*?\*/", "", body, flags=re.S)


def hl_flags(path=FLAGS):
    """libcore/flags.mk's ``NAME := words`` lines as {NAME: [word, ...]}."""
    with open(path) as f:
        text = f.read().replace("\\\n", " ")
    flags = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        name, assign, value = line.partition(":=")
        if not assign or "$" in value or not name.strip().isidentifier():
            raise ValueError(f"{path}: not a plain `NAME := words` line: {line!r}")
        flags[name.strip()] = value.split()
    return flags


def _openblas():
    import scipy_openblas32 as ob

    return ob.get_include_dir(), ob.get_lib_dir(), ob.get_library()


def _variant():
    """(sanitize, native) as asked for by HL_SANITIZE and HL_NATIVE."""
    return os.environ.get("HL_SANITIZE") == "1", os.environ.get("HL_NATIVE") == "1"


def _make(*targets, libcore=LIBCORE, **run_args):
    sanitize, native = _variant()
    include, libdir, lib = _openblas()
    command = ["make", "-C", libcore, "--no-print-directory", f"-j{os.cpu_count() or 1}",
               f"PYTHON={sys.executable}", f"SANITIZE={int(sanitize)}", f"NATIVE={int(native)}",
               f"OB_INC={include}", f"OB_LIB={libdir}", f"OB_NAME={lib}", *targets]
    return subprocess.run(command, check=True, **run_args)


def libcore_archive():
    """The absolute path of the static library of the variant asked for (built or not)."""
    return _make("-s", "print-lib", stdout=subprocess.PIPE, text=True).stdout.strip()


def build_libcore():
    """Brings libcore's static library up to date: only what changed is recompiled."""
    _make("lib")


def _nvcc():
    found = shutil.which("nvcc")
    if found:
        return found
    for home in (os.environ.get("CUDA_HOME"), "/usr/local/cuda"):
        if home and os.path.exists(os.path.join(home, "bin", "nvcc")):
            return os.path.join(home, "bin", "nvcc")
    return None


def _cublas_dirs():
    """(a directory holding cuBLAS's headers, the directory of libcublas.so.13): nvcc's own
    toolkit when it has cuBLAS, else the nvidia-cublas wheel (only cuBLAS's headers, linked
    into build/cublas-include: the wheels' include folder also holds a CUDA runtime's headers,
    which must not shadow nvcc's own), else (None, None)."""
    nvcc = _nvcc()
    toolkit = os.path.dirname(os.path.dirname(os.path.realpath(nvcc))) if nvcc else None
    if toolkit and os.path.exists(os.path.join(toolkit, "include", "cublas_v2.h")):
        return os.path.join(toolkit, "include"), os.path.join(toolkit, "lib64")  # a full toolkit
    try:
        import nvidia
    except ImportError:
        return None, None
    for root in nvidia.__path__:
        inc, lib = os.path.join(root, "cu13", "include"), os.path.join(root, "cu13", "lib")
        if os.path.exists(os.path.join(inc, "cublas_v2.h")):
            only = os.path.join(ROOT, "build", "cublas-include")
            os.makedirs(only, exist_ok=True)
            for header in glob.glob(os.path.join(inc, "cublas*.h")):
                link = os.path.join(only, os.path.basename(header))
                if os.path.lexists(link):
                    os.remove(link)
                os.symlink(header, link)
            return only, lib
    return None, None


def _install(path, dest):
    """Copies the library at path into dest through a temporary name and a rename, so that a
    process that has the old one loaded keeps its (intact) file."""
    target = os.path.join(dest, os.path.basename(path))
    shutil.copy2(path, target + ".tmp")
    os.replace(target + ".tmp", target)


def build_cuda(dest):
    """Builds the CUDA backend's libraries and copies them into dest (the hl package
    directory). The emulated one always; the real one as HL_CUDA asks (see the docstring)."""
    out = os.path.dirname(libcore_archive())
    _make("cuda-emu")
    _install(os.path.join(out, "libhlcuda_emu.so"), dest)
    mode = os.environ.get("HL_CUDA", "")
    if mode == "0":
        return
    nvcc = _nvcc()
    inc, libdir = _cublas_dirs()
    missing = "nvcc" if not nvcc else ("cuBLAS (pip install nvidia-cublas nvidia-cuda-runtime)"
                                       if not inc else None)
    if missing:
        if mode == "1":
            raise RuntimeError(f"HL_CUDA=1, but {missing} was not found")
        print(f"hl: not building the CUDA backend: {missing} not found", file=sys.stderr)
        return
    _make("cuda", f"NVCC={nvcc}", f"CUDA_INC={inc}", f"CUDA_LIB={libdir}")
    _install(os.path.join(out, "libhlcuda.so"), dest)


def make_builder(absolute_paths=False):
    _, libdir, lib = _openblas()
    sanitize, native = _variant()
    flags = hl_flags()
    # The wrapper is compiled with libcore's flags of the same variant, and linked with the
    # same flags as anything linking libcore (flags.mk explains them).
    cflags = flags["HL_CFLAGS"] + (flags["HL_SAN_CFLAGS"] + flags["HL_SAN_FLAGS"] if sanitize
                                   else flags["HL_OPT_CFLAGS"])
    if native:
        cflags += flags["HL_NATIVE_CFLAGS"]
    # No RUNPATH: the wheel's intended use is preloading. hl._core imports scipy_openblas32,
    # which loads libscipy_openblas.so into the process before the extension, and the loader
    # then satisfies the extension's DT_NEEDED entry by its soname. A RUNPATH would point into
    # whatever directory the library sat in at build time (pip's temporary build env).
    ldflags = (flags["HL_SAN_FLAGS"] if sanitize else []) + flags["HL_LDFLAGS"]
    archive = libcore_archive()
    # setuptools wants paths relative to setup.py; ffi.compile() changes directory.
    include_dir = os.path.join(LIBCORE, "include") if absolute_paths else os.path.join(
        "libcore", "include")

    ffi = FFI()
    ffi.cdef(cdef_text())
    ffi.set_source(
        "hl._hl_core",
        '#include "hl_core.h"',
        include_dirs=[include_dir],
        # On the link line before the libraries (as objects are), so that a linker using
        # --as-needed still records libscipy_openblas, which only the archive refers to.
        extra_objects=[archive],
        # setuptools relinks the extension only when one of these is newer than it.
        depends=[archive],
        library_dirs=[libdir],
        libraries=[lib, "m"],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return ffi


ffibuilder = make_builder(absolute_paths=__name__ == "__main__")

if __name__ == "__main__":
    # In-place development build: the module lands in src/hl/.
    build_libcore()
    ffibuilder.compile(tmpdir=os.path.join(ROOT, "build", "cffi"), verbose=False)
    built = glob.glob(os.path.join(ROOT, "build", "cffi", "hl", "_hl_core*.so"))
    for path in built:
        os.replace(path, os.path.join(ROOT, "src", "hl", os.path.basename(path)))
    build_cuda(os.path.join(ROOT, "src", "hl"))
    print("built", [os.path.basename(p) for p in built])
