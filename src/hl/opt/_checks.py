"""Argument checks shared by the optimisers' constructors: each names the optimiser and the
argument (``SGD: lr must be a finite number >= 0, got -1``). bools are refused: True is a
number to Python, never a rate to a person."""
import math
import numbers

from .. import errors


def check_nonnegative(value, who, what):
    if not _real(value) or not math.isfinite(value) or value < 0:
        raise errors.ValueError(f"{who}: {what} must be a finite number >= 0, got {value!r}")
    return float(value)


def check_unit_interval(value, who, what):
    """0 <= value < 1 (a decay rate such as Adam's betas or RMSProp's alpha)."""
    if not _real(value) or not 0.0 <= value < 1.0:
        raise errors.ValueError(f"{who}: {what} must be in [0, 1), got {value!r}")
    return float(value)


def check_positive(value, who, what):
    if not _real(value) or not math.isfinite(value) or value <= 0:
        raise errors.ValueError(f"{who}: {what} must be a finite number > 0, got {value!r}")
    return float(value)


def _real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
