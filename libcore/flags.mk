# The one list of libcore's compiler flags. Two readers:
#   libcore/Makefile  includes this file;
#   src/hl/_build.py  parses it (hl_flags()) for the cffi wrapper's compile and link lines.
# So that both read the same thing, keep to plain `NAME := words` lines (a trailing backslash
# continues a line, `#` starts a comment): no make functions, no references to other variables.
# A change here recompiles every object (the Makefile's rules depend on this file).

# Every build.
# -fwrapv: integer tensors wrap on overflow, as in numpy; without it a kernel's int32 or int64
#   a + b that overflows is undefined behaviour in C (CPython's CFLAGS carry it too, but the
#   core must not depend on that).
# -fno-trapping-math: hl never reads floating-point exception flags, and without it GCC will not
#   vectorise a loop whose element expression selects between computed values (elementwise.c's
#   float32 tanh); results are the same, bit for bit.
# -ffp-contract=off: a * b + c in C is a multiply and an add, never one FMA; the kernels write
#   their FMAs as intrinsics. Otherwise the AVX-512 copy of a HL_CLONES loop (avx512f implies
#   FMA in GCC) rounds once where the AVX2 copy and the baseline build round twice, and an
#   AVX-512 CPU gives other bits than an AVX2 one: the conv epilogue's HardSigmoid stopped
#   matching the element-wise op on an Intel Xeon (tests/ops/test_conv_fused.py).
# -fPIC: the objects go into the Python extension and into libhlcore.so as well as the archive.
HL_CFLAGS := -std=gnu11 -fopenmp -Wall -Wno-unused-function -fno-strict-aliasing -fwrapv -ffp-contract=off \
             -fno-trapping-math -fPIC

# libcore's own objects only (not the cffi wrapper): nothing is exported but the hl_ API, which
# hl_core.h declares under `#pragma GCC visibility push(default)`.
HL_CORE_CFLAGS := -fvisibility=hidden

# The default build.
HL_OPT_CFLAGS := -O3

# HL_NATIVE=1 (python src/hl/_build.py) or NATIVE=1 (make): for this machine's CPU only.
HL_NATIVE_CFLAGS := -march=native

# HL_SANITIZE=1 / SANITIZE=1 / make asan: AddressSanitizer + UBSan (docs/sanitizers.md), with the
# caching allocator off (HL_NO_CACHE) so that ASan sees every use after free. HL_SAN_FLAGS go on
# the compile and the link lines. float-cast-overflow is not part of GCC's "undefined" group:
# float -> int casts must saturate.
HL_SAN_CFLAGS := -O1 -g -DHL_NO_CACHE
HL_SAN_FLAGS := -fsanitize=address,undefined,float-cast-overflow -fno-omit-frame-pointer \
                -fno-sanitize-recover=undefined,float-cast-overflow

# Linking libcore into anything.
# cpu/blas_threads.c works through a constructor that nothing calls, and a linker takes from an
# archive only the members that something refers to: --undefined names the constructor so that
# its object is always taken (without it OpenBLAS keeps its own thread pool and fights OpenMP's
# threads for the cores). Unlike --whole-archive it does not depend on where it stands on the
# command line, which setuptools does not let the extension choose.
HL_LDFLAGS := -fopenmp -Wl,--undefined=hl_cpu_use_openmp_for_blas
