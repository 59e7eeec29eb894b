"""paddle.v2.optimizer: the update equations of PaddlePaddle's v2 API (2017), on hl.

A v2 script configures an optimiser and hands it to the trainer::

    optimizer = paddle.optimizer.Momentum(
        momentum=0.9, learning_rate=0.1 / 128,
        regularization=paddle.optimizer.L2Regularization(rate=0.0005 * 128),
        model_average=paddle.optimizer.ModelAverage(average_window=0.5))

These classes hold the configuration, checked when constructed. The trainer calls
``optimizer.build(param_configs)`` to get the hl optimiser that does the updates (an
hl.opt.Optimizer; see hl/v2/_update_rules.py for the rules and v2's quirks,
hl/v2/_rule_base.py for the batch protocol, and hl/v2/lr_schedule.py for the learning-rate
schedules).

Every optimiser takes v2's settings as keywords: ``learning_rate=1e-3``,
``learning_rate_decay_a=0.``, ``learning_rate_decay_b=0.``,
``learning_rate_schedule='poly'`` (v2's default: with a = b = 0 it is constant),
``learning_rate_args=''``, ``regularization=None`` (an L2Regularization, or a list of them),
``model_average=None`` (a ModelAverage), ``gradient_clipping_threshold=None`` (each
gradient element clipped to [-t, t]); ``batch_size``, ``is_async=False`` and
``async_lagged_grad_discard_ratio`` are accepted as v2 did and play no part in local training.

v2 computes gradients of the *sum* of the per-sample costs, which is why its scripts divide
the learning rate by the batch size and multiply the L2 rate by it; the trainer provides that
gradient, these rules take it as it is.
"""
import math
import numbers
import warnings

from .. import errors
from . import _update_rules as rules
from ._update_rules import AverageWindow, ParameterConfig
from .lr_schedule import LearningRateSchedule

__all__ = ["Optimizer", "Momentum", "Adam", "Adamax", "AdaGrad", "DecayedAdaGrad",
           "AdaDelta", "RMSProp", "ModelAverage", "L2Regularization", "ParameterConfig"]

_SETTINGS = dict(learning_rate=1e-3, learning_rate_decay_a=0.0, learning_rate_decay_b=0.0,
                 learning_rate_schedule="poly", learning_rate_args="", regularization=None,
                 model_average=None, gradient_clipping_threshold=None, is_async=False,
                 async_lagged_grad_discard_ratio=1.5)
_IGNORED = ("batch_size",)


def _check(value, who, what, low=0.0, high=None, low_open=False, high_open=True):
    """A finite real in [low, high) (or (low, ...) with low_open)."""
    ok = (not isinstance(value, bool) and isinstance(value, numbers.Real) and
          math.isfinite(value) and (value > low if low_open else value >= low) and
          (high is None or (value < high if high_open else value <= high)))
    if not ok:
        span = (("(" if low_open else "[") + f"{low:g}, " +
                ("inf)" if high is None else f"{high:g}" + (")" if high_open else "]")))
        raise errors.ValueError(f"{who}: {what} must be a number in {span}, got {value!r}")
    return float(value)


class L2Regularization:
    """``L2Regularization(rate)``: the default L2 decay rate of every parameter (a
    parameter's own ``l2_rate`` wins). Each update adds ``rate * w`` to the gradient inside
    the rule (not for Adam and Adamax, which ignored it in v2)."""

    def __init__(self, rate):
        self.decay_rate = _check(rate, "L2Regularization", "rate")

    def __repr__(self):
        return f"L2Regularization(rate={self.decay_rate!r})"


class ModelAverage:
    """``ModelAverage(average_window, max_average_window=None, do_average_in_cpu=False)``:
    testing and saving use the parameters averaged over roughly the last
    ``average_window * (batches so far)`` batches, at most max_average_window (without it,
    at most the number of batches of the last pass); see AverageWindow for v2's exact
    window. average_window 0 turns averaging off, as in v2. do_average_in_cpu is accepted
    and ignored."""

    def __init__(self, average_window, max_average_window=None, do_average_in_cpu=False):
        self.average_window = _check(average_window, "ModelAverage", "average_window")
        if max_average_window is not None and (
                isinstance(max_average_window, bool) or
                not isinstance(max_average_window, numbers.Integral) or max_average_window < 1):
            raise errors.ValueError(f"ModelAverage: max_average_window must be an integer "
                                    f">= 1 (a number of batches) or None, got "
                                    f"{max_average_window!r}")
        self.max_average_window = max_average_window
        self.do_average_in_cpu = bool(do_average_in_cpu)

    def window(self):
        """A fresh AverageWindow, or None when averaging is off."""
        if self.average_window <= 0:
            return None
        return AverageWindow(self.average_window, self.max_average_window)

    def __repr__(self):
        return (f"ModelAverage(average_window={self.average_window!r}, "
                f"max_average_window={self.max_average_window!r})")


class Optimizer:
    """The base of v2's optimiser configurations. Subclasses name their learning method's
    own keywords in ``method_keywords`` and their hl rule in ``rule``."""

    rule = None
    method_keywords = ()

    def __init__(self, **kwargs):
        who = type(self).__name__
        for k in _IGNORED:
            kwargs.pop(k, None)
        unknown = sorted(set(kwargs) - set(_SETTINGS))
        if unknown:
            accepted = list(self.method_keywords) + list(_SETTINGS) + list(_IGNORED)
            raise errors.ValueError(
                f"{who}: unknown keyword{'s' if len(unknown) > 1 else ''} {unknown}; "
                f"{who} accepts {', '.join(accepted)}")
        settings = dict(_SETTINGS, **kwargs)
        if settings["is_async"]:
            raise errors.UnsupportedError(
                f"{who}: is_async=True is asynchronous SGD through a parameter server, which "
                f"hl.v2 does not have; drop is_async to train locally")
        self.schedule = LearningRateSchedule(
            settings["learning_rate"], settings["learning_rate_schedule"],
            settings["learning_rate_decay_a"], settings["learning_rate_decay_b"],
            settings["learning_rate_args"], who=who)
        self.learning_rate = self.schedule.learning_rate
        self.regularization = settings["regularization"]
        self.decay_rate = self._l2_rate(self.regularization, who)
        average = settings["model_average"]
        if average is not None and not isinstance(average, ModelAverage):
            raise errors.ValueError(f"{who}: model_average must be a "
                                    f"paddle.optimizer.ModelAverage, got {average!r}")
        self.model_average = average
        clip = settings["gradient_clipping_threshold"]
        self.gradient_clipping_threshold = (
            0.0 if clip is None else _check(clip, who, "gradient_clipping_threshold"))

    @staticmethod
    def _l2_rate(regularization, who):
        if regularization is None:
            return 0.0
        items = regularization if isinstance(regularization, (list, tuple)) else [
            regularization]
        rate = 0.0
        for r in items:
            if not isinstance(r, L2Regularization):
                raise errors.ValueError(f"{who}: regularization must be a "
                                        f"paddle.optimizer.L2Regularization (or a list of "
                                        f"them), got {r!r}")
            rate = r.decay_rate  # v2 kept the last one
        return rate

    def _rule_kwargs(self):
        """The rule's own constructor arguments."""
        return {}

    def build(self, param_configs=None, params=None):
        """The hl optimiser for a model: ``param_configs`` maps parameter names to objects
        (or dicts) with ``learning_rate``, ``decay_rate`` (None: the regularization's rate)
        and ``is_static``, and optionally ``momentum``, ``decay_rate_l1`` and
        ``gradient_clipping_threshold``; a parameter not in it gets the defaults. ``params``
        (a dict name -> tensor, or tensors with names) lets model averaging cover parameters
        from the first batch even before they receive a gradient."""
        opt = self.rule(self.schedule, param_configs=param_configs,
                        decay_rate=self.decay_rate, momentum=self._momentum(),
                        gradient_clipping_threshold=self.gradient_clipping_threshold,
                        model_average=(None if self.model_average is None
                                       else self.model_average.window()),
                        params=params, **self._rule_kwargs())
        self._warn_quirks(opt)
        return opt

    def _momentum(self):
        return 0.0

    def _warn_quirks(self, opt):
        who = type(self).__name__
        if not opt.follows_schedule and not self.schedule.is_constant:
            warnings.warn(f"{who}: v2's {who} ignores learning_rate_schedule="
                          f"{self.schedule.name!r}; hl.v2 does the same, so the learning rate "
                          f"stays {self.learning_rate}", stacklevel=3)
        if not opt.applies_l2 and (opt.decay_rate or any(
                s.decay for s in opt._resolved.values())):
            warnings.warn(f"{who}: v2's {who} ignores L2 regularization (PaddlePaddle issue "
                          f"#5836); hl.v2 does the same, so the L2 rate has no effect",
                          stacklevel=3)

    def __repr__(self):
        own = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.method_keywords)
        return (f"{type(self).__name__}({own}{', ' if own else ''}"
                f"learning_rate={self.learning_rate!r}, schedule={self.schedule!r})")


class Momentum(Optimizer):
    """``Momentum(momentum=None, sparse=False, **settings)``: SGD with momentum,
    ``mom = momentum * mom - lr * (g + decay * w); w += mom``. momentum None is 0; sparse
    changes nothing for dense gradients."""

    rule = rules.MomentumRule
    method_keywords = ("momentum", "sparse")

    def __init__(self, momentum=None, sparse=False, **kwargs):
        super().__init__(**kwargs)
        self.momentum = 0.0 if momentum is None else _check(momentum, "Momentum", "momentum")
        self.sparse = bool(sparse)

    def _momentum(self):
        return self.momentum


class Adam(Optimizer):
    """``Adam(beta1=0.9, beta2=0.999, epsilon=1e-8, **settings)``."""

    rule = rules.AdamRule
    method_keywords = ("beta1", "beta2", "epsilon")

    def __init__(self, beta1=0.9, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1 = _check(beta1, "Adam", "beta1", high=1.0)
        self.beta2 = _check(beta2, "Adam", "beta2", high=1.0)
        self.epsilon = _check(epsilon, "Adam", "epsilon")

    def _rule_kwargs(self):
        return dict(beta1=self.beta1, beta2=self.beta2, epsilon=self.epsilon)


class Adamax(Optimizer):
    """``Adamax(beta1=0.9, beta2=0.999, **settings)``."""

    rule = rules.AdamaxRule
    method_keywords = ("beta1", "beta2")

    def __init__(self, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(**kwargs)
        self.beta1 = _check(beta1, "Adamax", "beta1", high=1.0)
        self.beta2 = _check(beta2, "Adamax", "beta2", high=1.0)

    def _rule_kwargs(self):
        return dict(beta1=self.beta1, beta2=self.beta2)


class AdaGrad(Optimizer):
    """``AdaGrad(**settings)`` (epsilon 1e-6, v2's fixed ada_epsilon)."""

    rule = rules.AdaGradRule

    def _rule_kwargs(self):
        return dict(epsilon=1e-6)


class _RhoEpsilon(Optimizer):
    method_keywords = ("rho", "epsilon")

    def __init__(self, rho=0.95, epsilon=1e-6, **kwargs):
        super().__init__(**kwargs)
        who = type(self).__name__
        self.rho = _check(rho, who, "rho", high=1.0)
        self.epsilon = _check(epsilon, who, "epsilon")

    def _rule_kwargs(self):
        return dict(rho=self.rho, epsilon=self.epsilon)


class DecayedAdaGrad(_RhoEpsilon):
    """``DecayedAdaGrad(rho=0.95, epsilon=1e-06, **settings)``."""

    rule = rules.DecayedAdaGradRule


class AdaDelta(_RhoEpsilon):
    """``AdaDelta(rho=0.95, epsilon=1e-06, **settings)``. v2 multiplies AdaDelta's step by
    learning_rate too (default 1e-3)."""

    rule = rules.AdaDeltaRule


class RMSProp(_RhoEpsilon):
    """``RMSProp(rho=0.95, epsilon=1e-6, **settings)`` (v2's is centred, with epsilon
    inside the square root)."""

    rule = rules.RMSPropRule
