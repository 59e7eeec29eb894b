"""Every tensor function, differentiable where a derivative exists.

This namespace is hl.ops with each op that has a gradient replaced by its recording version
from the family modules here. Tensor methods and operators, the top-level ``hl.<name>``
functions and the layers all call through it, so ``x.relu()``, ``hl.relu(x)`` and a ReLU layer
record alike. The family modules hold the Function classes; add a new one's names below.
"""
from ..ops import *  # noqa: F401,F403 - the plain ops first; the families override them
from ..ops.shape import getitem, setitem  # noqa: F401
from .creation import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .conv import *  # noqa: F401,F403
from .pool import *  # noqa: F401,F403
from .normalization import *  # noqa: F401,F403
from .softmax import *  # noqa: F401,F403
from .random import *  # noqa: F401,F403
from .resize import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403
from .index import *  # noqa: F401,F403
from .indexing import *  # noqa: F401,F403

# The functions users call (not the op-family modules the star imports bring along, which
# would shadow hl.autograd's own submodules of the same names, and not the backward kernels,
# relu_grad, conv2d_grad_input...: they stay in hl.ops, as PyTorch keeps kernels in torch.ops).
__all__ = [_n for _n, _v in list(globals().items())
           if not _n.startswith("_") and callable(_v)
           and not _n.endswith("_grad") and "_grad_" not in _n]
