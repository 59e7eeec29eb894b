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
from ..ops._util import one_definition_each
from . import (binary, conv, creation, elementwise, index, indexing, linalg, normalization,
               pool, random, reduce, resize, shape, softmax)

FAMILIES = (elementwise, binary, creation, reduce, conv, pool, normalization, softmax, random,
            resize, linalg, shape, index, indexing)

# ops of hl.ops with no gradient to define, handed on as they are
PLAIN = ("manual_seed", "nonzero", "one_hot", "setitem",
         # constructors (requires_grad= makes a leaf; there is nothing to differentiate)
         "empty", "full", "zeros", "ones", "empty_like", "zeros_like", "ones_like", "full_like",
         "arange", "eye", "uniform", "rand", "normal", "randn", "bernoulli")


_NAMES = one_definition_each("hl.autograd", FAMILIES, {n: getattr(_ops, n) for n in PLAIN})
globals().update(_NAMES)
__all__ = sorted(_NAMES)
