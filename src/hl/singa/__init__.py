"""hl.singa: Apache SINGA's Python API as a front door onto hl.

A program written for SINGA runs by changing ``from singa import X`` to
``from hl.singa import X``:

    from hl.singa import device, tensor, layer, model, opt, autograd

Every name here is SINGA's spelling mapped onto hl's own tensors, autograd functions, layers,
Module, optimisers and checkpoint format: nothing is implemented twice. Where hl behaves
differently from SINGA, the door adapts arguments and results; docs/singa.md lists each
difference (graph mode runs eagerly for now, there is no CUDA device yet, ...).
"""
import importlib

from .._core import version as _version

__version__ = _version()

_SUBMODULES = ("autograd", "device", "initializer", "layer", "loss", "metric", "model",
               "opt", "singa_wrap", "sonnx", "tensor", "utils")


def __getattr__(name):
    # `import hl.singa` stays cheap; `singa.layer` (or `from hl.singa import layer`) loads it.
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'hl.singa' has no attribute {name!r}")


__all__ = list(_SUBMODULES)
