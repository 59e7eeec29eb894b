"""Builds hl's C core into the cffi extension module ``hl._hl_core``.

The cffi declarations are read from ``libcore/include/hl_core.h`` (the block between
HL_CDEF_BEGIN and HL_CDEF_END), so the header and the binding cannot drift apart. OpenBLAS
comes from the ``scipy-openblas32`` wheel: its headers, its library, and symbols with a
``scipy_`` prefix.

Used by setuptools (``setup.py`` names ``src/hl/_build.py:ffibuilder``) and directly for a
development build in place: ``python src/hl/_build.py``.

Environment:
  HL_SANITIZE=1  build with AddressSanitizer and UBSan, and without the caching allocator
                 (see docs/sanitizers.md)
  HL_NATIVE=1    compile for this machine's CPU (-march=native)
"""
import glob
import os
import re

from cffi import FFI

# src/hl/_build.py -> the repository root
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
HEADER = os.path.join(ROOT, "libcore", "include", "hl_core.h")


def cdef_text(header_path=HEADER):
    """The cffi-readable part of the public header, comments removed."""
    with open(header_path) as f:
        text = f.read()
    body = text.split("/* HL_CDEF_BEGIN */", 1)[1].split("/* HL_CDEF_END */", 1)[0]
    return re.sub(r"/\*.*?\*/", "", body, flags=re.S)


def _openblas():
    import scipy_openblas32 as ob

    return ob.get_include_dir(), ob.get_lib_dir(), ob.get_library()


def make_builder(absolute_paths=False):
    include, libdir, lib = _openblas()
    sources = sorted(glob.glob(os.path.join("libcore", "src", "**", "*.c"), recursive=True,
                               root_dir=ROOT))
    # setuptools wants paths relative to setup.py; ffi.compile() changes directory.
    if absolute_paths:
        sources = [os.path.join(ROOT, s) for s in sources]
    # -fwrapv: integer tensors wrap on overflow, as in numpy; without it a kernel's int32 or
    # int64 a + b that overflows is undefined behaviour in C. (Python's own CFLAGS carry it
    # too, but the core must not depend on that; libcore/Makefile uses the same flags.)
    # -fno-trapping-math: hl never reads floating-point exception flags, and without it GCC
    # will not vectorise a loop whose element expression selects between computed values
    # (elementwise.c's float32 tanh); results are the same, bit for bit.
    cflags = ["-std=gnu11", "-O3", "-fopenmp", "-Wall", "-Wno-unused-function",
              "-fno-strict-aliasing", "-fwrapv", "-fno-trapping-math"]
    # No RUNPATH: the wheel's intended use is preloading. hl._core imports scipy_openblas32,
    # which loads libscipy_openblas.so into the process before the extension, and the loader
    # then satisfies the extension's DT_NEEDED entry by its soname. A RUNPATH would point into
    # whatever directory the library sat in at build time (pip's temporary build env).
    ldflags = ["-fopenmp"]
    if os.environ.get("HL_NATIVE") == "1":
        cflags.append("-march=native")
    if os.environ.get("HL_SANITIZE") == "1":
        san = ["-fsanitize=address,undefined,float-cast-overflow", "-fno-omit-frame-pointer",
               "-fno-sanitize-recover=undefined,float-cast-overflow"]
        cflags = [f for f in cflags if f != "-O3"] + ["-O1", "-g", "-DHL_NO_CACHE"] + san
        ldflags += san

    ffi = FFI()
    ffi.cdef(cdef_text())
    ffi.set_source(
        "hl._hl_core",
        '#include "hl_core.h"',
        sources=sources,
        include_dirs=[os.path.join(ROOT, "libcore", "include"), include],
        library_dirs=[libdir],
        libraries=[lib, "m"],
        extra_compile_args=cflags,
        extra_link_args=ldflags,
    )
    return ffi


ffibuilder = make_builder(absolute_paths=__name__ == "__main__")

if __name__ == "__main__":
    # In-place development build: the module lands in src/hl/.
    ffibuilder.compile(tmpdir=os.path.join(ROOT, "build", "cffi"), verbose=False)
    built = glob.glob(os.path.join(ROOT, "build", "cffi", "hl", "_hl_core*.so"))
    for path in built:
        os.replace(path, os.path.join(ROOT, "src", "hl", os.path.basename(path)))
    print("built", [os.path.basename(p) for p in built])
