"""hl.graph: graph mode's machinery below the model (the runner and the recording hooks).

Users switch graph mode on with ``model.compile([x], use_graph=True)``, ``model.graph(True)``
or Keras's ``compile(..., jit_compile=True)``; docs/training.md explains its rules.
"""
from .plans import DEFAULT_SIZE, Plan, PlanCache
from .profiling import Profile, profile
from .recording import StepValues, on_abort_once, on_replay

__all__ = ["PlanCache", "Plan", "DEFAULT_SIZE", "Profile", "profile", "StepValues", "on_replay",
           "on_abort_once"]
