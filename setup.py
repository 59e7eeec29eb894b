# The C core: libcore/Makefile builds libcore into a static library and cffi compiles the
# extension around it (src/hl/_build.py); everything else about the package is in pyproject.toml.
import importlib.util
import os

from setuptools import setup
from setuptools.command.build_ext import build_ext

_spec = importlib.util.spec_from_file_location(
    "hl_build", os.path.join(os.path.dirname(os.path.abspath(__file__)), "src", "hl", "_build.py"))
_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_build)


class BuildExtWithLibcore(build_ext):
    def pre_run(self, ext, ffi):
        """cffi's hook, called just before the extension is generated and compiled."""
        _build.build_libcore()
        # libhlcuda*.so beside the extension, wherever it goes (build_lib, or src/hl for an
        # editable install): hl/_cuda_libs.py looks for them there (docs/cuda.md)
        package_dir = os.path.dirname(self.get_ext_fullpath(ext.name))
        os.makedirs(package_dir, exist_ok=True)
        _build.build_cuda(package_dir)


setup(cffi_modules=["src/hl/_build.py:ffibuilder"], cmdclass={"build_ext": BuildExtWithLibcore})
