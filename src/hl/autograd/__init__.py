"""hl.autograd: define-by-run reverse-mode differentiation.

Every differentiable op is a Function (forward, backward, infer) in the module of its family;
`functional` gathers them under hl.ops's names. `backward(loss)` yields (tensor, gradient)
pairs (SINGA style); `loss.backward()` fills `.grad` (PyTorch style). SINGA's
`autograd.mse_loss` is hl.losses.mse, put here by hl/__init__.py (losses sit a layer above).
"""
from . import functional
from .functional import *  # noqa: F401,F403 - SINGA scripts call autograd.relu(x), autograd.matmul(a, b)
from .engine import backward
from .function import Function, sum_to
from .mode import enable_grad, is_grad_enabled, no_grad, set_grad_enabled
from .placeholder import Placeholder
from . import methods  # noqa: F401 - installs Tensor's methods and operators

# SINGA's global switch, read by layers that were never put in train() or eval() mode
# themselves; assign hl.autograd.training = False in old scripts to evaluate.
training = True

__all__ = ["Function", "Placeholder", "backward", "enable_grad", "functional",
           "is_grad_enabled", "no_grad", "set_grad_enabled", "sum_to", "training"]
