"""Grad mode, one flag per thread. It lives outside hl.autograd so that hl.Tensor's operators
can read it without importing the autograd package (which imports hl.Tensor)."""
import threading


class _GradState(threading.local):
    enabled = True


state = _GradState()
