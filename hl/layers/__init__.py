"""hl.layers: Layer (lazy parameters, hierarchical names, params and states) and the
standard layers, one family per module."""
from . import initializers
from .containers import Sequential
from .layer import Layer, LoadReport
from .linear import Linear

__all__ = ["Layer", "LoadReport", "Linear", "Sequential", "initializers"]
from .attention import MultiHeadAttention  # noqa: E402
from .recurrent import GRU, LSTM, RNN  # noqa: E402

__all__ += ["RNN", "LSTM", "GRU", "MultiHeadAttention"]
