"""Every tensor function users call, differentiable where a derivative exists.

Each name comes from exactly one place: the ``__all__`` of one autograd family module (the
op's one definition, a Function or a composite of Functions), or, for the few ops with nothing
to differentiate and no autograd definition, hl.ops itself (the same object re-exported). A
name offered by two sources is an error at import, not a silent winner. Tensor methods and
operators, the top-level ``hl.<name>`` functions and the layers all call through here, so
``x.relu()``, ``hl.relu(x)`` and a ReLU layer record alike. A new family module is added to
FAMILIES; backward kernels (relu_grad, conv2d_grad_input...) stay in hl.ops, as PyTorch keeps
kernels in torch.ops.
"""
from .. import ops as _ops
from . import (binary, conv, creation, elementwise, index, indexing, linalg, normalization,
               pool, random, reduce, resize, shape, softmax)

FAMILIES = (elementwise, binary, creation, reduce, conv, pool, normalization, softmax, random,
            resize, linalg, shape, index, indexing)

# ops of hl.ops with no gradient to define, handed on as they are
PLAIN = ("manual_seed", "nonzero", "one_hot", "setitem",
         # constructors (requires_grad= makes a leaf; there is nothing to differentiate)
         "empty", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like", "full_like",
         "arange", "eye", "uniform", "rand", "normal", "randn", "bernoulli")


def _collect():
    names = {}
    for module in FAMILIES:
        for name in module.__all__:
            if name in names:
                raise ImportError(f"hl.autograd: {name!r} is defined by both "
                                  f"{names[name].__name__} and {module.__name__}")
            names[name] = module
    for name in PLAIN:
        if name in names:
            raise ImportError(f"hl.autograd: {name!r} is defined by {names[name].__name__} "
                              f"and is also listed as a plain hl.ops function")
    table = {name: getattr(module, name) for name, module in names.items()}
    table.update((name, getattr(_ops, name)) for name in PLAIN)
    return table


globals().update(_collect())
__all__ = sorted(name for name in _collect())
