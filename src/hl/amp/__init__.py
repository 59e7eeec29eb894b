"""hl.amp: mixed precision, as torch.amp.

``autocast`` (hl/autograd/autocast.py) picks per op the dtype it computes in; ``GradScaler``
scales the loss so float16 gradients do not underflow, unscales them before the update and
skips the update when one is inf or NaN. docs/amp.md has the rules and the op lists.

    scaler = hl.amp.GradScaler()
    with hl.amp.autocast("cuda", dtype=hl.float16):
        loss = loss_fn(model(x), y)
    scaler.scale(loss).backward()
    scaler.step(opt)
    scaler.update()
"""
from ..autograd.autocast import autocast, get_autocast_dtype, is_autocast_enabled
from .grad_scaler import GradScaler

__all__ = ["GradScaler", "autocast", "get_autocast_dtype", "is_autocast_enabled"]
