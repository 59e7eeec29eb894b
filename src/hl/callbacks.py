"""hl.callbacks: ``from hl.callbacks import EarlyStopping``; the callbacks live in
hl/training/callbacks/, one per file."""
from .training.callbacks import *  # noqa: F401,F403
from .training.callbacks import __all__  # noqa: F401
