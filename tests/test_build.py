"""The build (libcore/Makefile, libcore/flags.mk, src/hl/_build.py): one list of flags read by
both builds, incremental objects with tracked header dependencies, and an extension that exports
only the hl_ API of hl_core.h, keeps cpu/blas_threads.c's constructor and has no RUNPATH into a
temporary directory. The references are independent of the build: the #include lines of the
sources, and the binutils' view (nm, readelf) of the extension that `import hl` loaded."""
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import time

import pytest

import hl._hl_core

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LIBCORE = os.path.join(ROOT, "libcore")
SRC = os.path.join(LIBCORE, "src")


@pytest.fixture(scope="module")
def build():
    """src/hl/_build.py of this checkout (the installed hl need not be this checkout's)."""
    spec = importlib.util.spec_from_file_location("hl_build_under_test",
                                                  os.path.join(ROOT, "src", "hl", "_build.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _compiled_sources(build, tmp_path, touched=None):
    """The sources that `make lib` would compile, as paths under libcore/src, in the variant
    the environment asks for, after touching `touched` (a path under libcore/src). It runs on
    an up-to-date copy of libcore (modification times kept), so the checkout is left alone."""
    build.build_libcore()
    copy = str(tmp_path / "libcore")
    shutil.copytree(LIBCORE, copy, symlinks=True)
    if touched is not None:
        later = time.time() + 10
        os.utime(os.path.join(copy, "src", touched), (later, later))
    out = build._make("-n", "lib", libcore=copy, stdout=subprocess.PIPE, text=True).stdout
    compiled = set()
    for line in out.splitlines():
        words = shlex.split(line)
        if "-c" in words:
            compiled.add(os.path.relpath(words[words.index("-c") + 1], "src"))
    return compiled


def _includers(header):
    """Every .c file under libcore/src that includes `header`, directly or through other
    headers, found from the #include "..." lines."""
    includes = {}
    for folder, _, files in os.walk(SRC):
        for name in files:
            path = os.path.join(folder, name)
            with open(path) as f:
                quoted = re.findall(r'^\s*#\s*include\s+"([^"]+)"', f.read(), re.M)
            includes[path] = {os.path.normpath(os.path.join(folder, q)) for q in quoted}
    target = os.path.normpath(os.path.join(SRC, header))
    found, frontier = set(), {target}
    while frontier:
        frontier = {p for p, inc in includes.items() if inc & frontier} - found
        found |= frontier
    return {os.path.relpath(p, SRC) for p in found if p.endswith(".c")}


def test_flags_file_gives_the_makefile_its_compile_line(build):
    flags = build.hl_flags()
    compile_line = build._make("-n", "-B", "SANITIZE=0", "NATIVE=0", "build/opt/obj/dtype.o",
                               stdout=subprocess.PIPE, text=True).stdout
    words = shlex.split(next(l for l in compile_line.splitlines() if " -c " in l))
    expected = flags["HL_CFLAGS"] + flags["HL_CORE_CFLAGS"] + flags["HL_OPT_CFLAGS"]
    assert words[1:1 + len(expected)] == expected
    # and the sanitizer variant: the flags.mk lines that docs/sanitizers.md describes
    san_line = build._make("-n", "-B", "SANITIZE=1", "NATIVE=1", "build/asan-native/obj/dtype.o",
                           stdout=subprocess.PIPE, text=True).stdout
    words = shlex.split(next(l for l in san_line.splitlines() if " -c " in l))
    for flag in flags["HL_SAN_CFLAGS"] + flags["HL_SAN_FLAGS"] + flags["HL_NATIVE_CFLAGS"]:
        assert flag in words
    assert "-O3" not in words


def test_flags_file_refuses_what_python_cannot_read(build, tmp_path):
    bad = tmp_path / "flags.mk"
    bad.write_text("HL_CFLAGS := -O2 $(EXTRA)\n")
    with pytest.raises(ValueError, match="not a plain"):
        build.hl_flags(str(bad))
    bad.write_text("# a comment\nHL_CFLAGS := -O2 \\\n    -g  # trailing\n")
    assert build.hl_flags(str(bad)) == {"HL_CFLAGS": ["-O2", "-g"]}


def test_touching_one_source_recompiles_one_object(build, tmp_path):
    assert _compiled_sources(build, tmp_path / "a", "cpu/topk.c") == {"cpu/topk.c"}
    assert _compiled_sources(build, tmp_path / "b") == set()  # up to date: nothing at all


@pytest.mark.parametrize("header", ["cpu/pool_impl.h", "cpu/loops.h", "core.h"])
def test_touching_a_header_recompiles_exactly_its_includers(build, tmp_path, header):
    includers = _includers(header)
    assert includers  # the headers named above are in use
    assert _compiled_sources(build, tmp_path, header) == includers


def _binutils(*args):
    return subprocess.run(args, check=True, stdout=subprocess.PIPE, text=True).stdout


def test_extension_exports_only_the_public_api(build):
    declared = set(re.findall(r"\b(hl_\w+)\s*\(", build.cdef_text()))
    exported = {line.split()[-1] for line in _binutils(
        "nm", "-D", "--defined-only", hl._hl_core.__file__).splitlines() if line.strip()}
    assert exported == declared | {"PyInit__hl_core"}


def test_extension_keeps_the_blas_threads_constructor():
    # Nothing refers to it; flags.mk's HL_LDFLAGS make the linker take its object anyway.
    local = _binutils("nm", hl._hl_core.__file__)
    assert re.search(r"\bhl_cpu_use_openmp_for_blas$", local, re.M)


def test_extension_has_no_runpath_into_a_build_directory():
    dynamic = _binutils("readelf", "-d", hl._hl_core.__file__)
    paths = [p for line in dynamic.splitlines() if "RPATH" in line or "RUNPATH" in line
             for p in re.search(r"\[(.*)\]", line).group(1).split(":")]
    assert not [p for p in paths if p.startswith(("/tmp", "/var/tmp")) or "pip-" in p
                or "scipy_openblas" in p], paths
    assert "libscipy_openblas.so" in dynamic  # found by soname: scipy_openblas32 preloads it


def _cuda_libraries():
    here = os.path.dirname(hl.__file__)
    return [os.path.join(here, n) for n in ("libhlcuda_emu.so", "libhlcuda.so")
            if os.path.exists(os.path.join(here, n))]


def test_cuda_libraries_export_only_the_plugin_entry_and_need_no_runpath():
    """libhlcuda*.so (docs/cuda.md): built beside the extension (the emulated one always),
    exporting the plugin entry and test hooks only (cuda/exports.map), finding the CUDA
    runtime by soname (hl/_cuda_libs.py preloads the wheels' copies), no RUNPATH."""
    libs = _cuda_libraries()
    assert any(p.endswith("libhlcuda_emu.so") for p in libs), libs
    for path in libs:
        exported = {line.split()[-1] for line in _binutils(
            "nm", "-D", "--defined-only", path).splitlines() if line.strip()}
        hooks = {"hl_cuda_emu_fail_next_launch", "hl_cuda_emu_fail_launch_after",
                 "hl_cuda_emu_launch_count", "hl_cuda_emu_gemm_count",
                 "hl_cuda_emu_conv_workspace",
                 "hl_cuda_emu_graph_launches", "hl_cuda_emu_spoil_next_capture",
                 "hl_cuda_pinned_stats"}
        nccl = {"hl_nccl_open", "hl_nccl_version", "hl_nccl_unique_id", "hl_nccl_init",
                "hl_nccl_all_reduce", "hl_nccl_broadcast", "hl_nccl_mark", "hl_nccl_query",
                "hl_nccl_abort", "hl_nccl_destroy", "hl_nccl_describe"}  # nccl.cu's glue
        assert nccl <= exported, (path, nccl - exported)
        assert exported - hooks - nccl - {"hl_plugin_backend"} == set(), (path, exported)
        dynamic = _binutils("readelf", "-d", path)
        assert "RPATH" not in dynamic and "RUNPATH" not in dynamic, path
        if path.endswith("libhlcuda.so"):
            assert "libcudart.so.13" in dynamic and "libcublas.so.13" in dynamic
            assert "libnccl" not in dynamic  # NCCL is dlopened from its wheel when used
