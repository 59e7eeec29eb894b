"""hl.ops: the kernels, thin wrappers over libcore's entry points, one module per op family.

Nothing here records gradients and nothing here is composed of other ops. A kernel of an op
that has a gradient is ``<op>_forward`` beside its backward kernels ``<op>_grad...``; generic
entry points take the op as an argument (``unary("exp", x)``, ``binary("add", a, b)``,
``reduction("sum", x, axes)``). The ops users call are defined once, in hl.autograd (which
hands on the few defined here that have nothing to differentiate: the constructors,
one_hot, nonzero, setitem, manual_seed). Each name below comes from the ``__all__`` of
exactly one family module; a name offered twice is an import error.
"""
from . import (_util, conv, creation, elementwise, index, linalg, normalization, optim, pool,
               random, reduce, resize, shape, softmax)

FAMILIES = (creation, elementwise, shape, random, reduce, linalg, conv, pool, normalization,
            softmax, index, resize, optim)


_NAMES = _util.one_definition_each("hl.ops", FAMILIES)
globals().update(_NAMES)
__all__ = sorted(_NAMES)
