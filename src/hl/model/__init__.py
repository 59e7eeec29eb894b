"""hl.model: Module (a Layer that compiles, fits and saves itself; SINGA's Model API and
Keras's), Sequential, and Keras's Model (subclassed, or functional from hl.Input).

    module.py       Module: compile, train_one_batch, fit (from hl.training), summary,
                    get_layer, save_states / load_states
    sequential.py   Sequential, also reachable as hl.layers.Sequential
    functional.py   Model and Functional: hl.Model(inputs=..., outputs=...)
    summary.py      Keras's summary table
"""
from .. import layers as _layers
from ..autograd import Placeholder
from ..layers.symbolic import Input
from .functional import Functional, Model
from .module import Module
from .sequential import Sequential

# One Sequential: hl.layers.Sequential is this class. hl.layers cannot import it (layers sit
# below the model layer and never import upwards), so the model layer installs it there, as
# hl/__init__ gives Tensor its recording functions (see docs/design-notes.md).
_layers.Sequential = Sequential

__all__ = ["Functional", "Input", "Model", "Module", "Placeholder", "Sequential"]
