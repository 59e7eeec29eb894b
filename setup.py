# The C core is compiled by cffi; everything else about the package is in pyproject.toml.
from setuptools import setup

setup(cffi_modules=["hl/_build.py:ffibuilder"])
