# The C core is compiled by cffi; everything else about the package is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["src/hl/_build.py:ffibuilder"])
