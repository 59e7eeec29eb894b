"""Learning-rate schedules: a schedule maps a step number to a learning rate.

**What a step is.** The step is the optimiser's step count: the number of completed calls to
``Optimizer.step()`` (``backward_and_update`` calls it once at its end). The first update of
a run happens at step 0, so it uses ``schedule(0)``; after ``k`` calls to ``step()`` the next
update uses ``schedule(k)``. This matches PyTorch's habit of calling ``scheduler.step()`` once
after each ``optimizer.step()``: hl's ``schedule(k)`` is the lr that ``torch.optim.lr_scheduler``
reports after ``k`` scheduler steps.

Schedules are pure functions of the step (no hidden counter), so resuming a checkpoint only
needs the optimiser's step count. An optimiser's ``lr`` accepts a float (a ``Constant``), a
``Schedule``, or any callable ``step -> lr``.
"""
import math
import numbers

from .. import errors

__all__ = ["Schedule", "Constant", "StepDecay", "ExponentialDecay", "CosineDecay",
           "LinearWarmup", "as_schedule"]


class Schedule:
    """Base class: ``schedule(step) -> float``. Subclasses implement ``value(step)``."""

    def __call__(self, step):
        return float(self.value(int(step)))

    def value(self, step):
        raise NotImplementedError

    def get_states(self):
        """Plain values that a stateful schedule needs to resume (none for the built-in ones,
        which depend on the step alone)."""
        return {}

    def set_states(self, states):
        pass

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


def _check_lr(lr, who):
    if not isinstance(lr, numbers.Real) or not math.isfinite(lr) or lr < 0:
        raise errors.ValueError(f"{who}: the learning rate must be a finite number >= 0, "
                                f"got {lr!r}")
    return float(lr)


def _check_positive_int(n, who, what):
    if not isinstance(n, numbers.Integral) or n < 1:
        raise errors.ValueError(f"{who}: {what} must be an integer >= 1, got {n!r}")
    return int(n)


class Constant(Schedule):
    """The same learning rate at every step."""

    def __init__(self, lr):
        self.lr = _check_lr(lr, "Constant")

    def value(self, step):
        return self.lr


class StepDecay(Schedule):
    """``lr * gamma ** (step // step_size)``: multiplied by gamma every step_size steps
    (torch.optim.lr_scheduler.StepLR)."""

    def __init__(self, lr, step_size, gamma=0.1):
        self.lr = _check_lr(lr, "StepDecay")
        self.step_size = _check_positive_int(step_size, "StepDecay", "step_size")
        self.gamma = float(gamma)

    def value(self, step):
        return self.lr * self.gamma ** (step // self.step_size)


class ExponentialDecay(Schedule):
    """``lr * gamma ** (step / decay_steps)``; with ``staircase=True`` the exponent is
    ``step // decay_steps`` (Keras's ExponentialDecay, with gamma as its decay_rate). With
    ``decay_steps=1`` it is torch.optim.lr_scheduler.ExponentialLR: gamma per step."""

    def __init__(self, lr, gamma, decay_steps=1, staircase=False):
        self.lr = _check_lr(lr, "ExponentialDecay")
        self.gamma = float(gamma)
        self.decay_steps = _check_positive_int(decay_steps, "ExponentialDecay", "decay_steps")
        self.staircase = bool(staircase)

    def value(self, step):
        p = step // self.decay_steps if self.staircase else step / self.decay_steps
        return self.lr * self.gamma ** p


class CosineDecay(Schedule):
    """Half a cosine from lr down to min_lr over total_steps, then min_lr:
    ``min_lr + (lr - min_lr) * (1 + cos(pi * min(step, total_steps) / total_steps)) / 2``.
    Within [0, total_steps] this is torch's CosineAnnealingLR (T_max=total_steps,
    eta_min=min_lr); past the end it stays at min_lr (as Keras's CosineDecay) where torch's
    would rise again."""

    def __init__(self, lr, total_steps, min_lr=0.0):
        self.lr = _check_lr(lr, "CosineDecay")
        self.total_steps = _check_positive_int(total_steps, "CosineDecay", "total_steps")
        self.min_lr = _check_lr(min_lr, "CosineDecay (min_lr)")

    def value(self, step):
        t = min(step, self.total_steps) / self.total_steps
        return self.min_lr + (self.lr - self.min_lr) * (1.0 + math.cos(math.pi * t)) / 2.0


class LinearWarmup(Schedule):
    """A linear ramp over the first warmup_steps, then ``after`` (a float or a schedule).

    During warm-up (step < warmup_steps) the lr is
    ``after(0) * (start_factor + (1 - start_factor) * step / warmup_steps)``, which is
    torch's LinearLR(start_factor, end_factor=1, total_iters=warmup_steps). From step
    warmup_steps on it is ``after(step - warmup_steps)``: the wrapped schedule starts counting
    when the warm-up ends (as torch's SequentialLR does), so a CosineDecay wrapped here decays
    over its own total_steps after the warm-up.
    """

    def __init__(self, warmup_steps, after, start_factor=0.0):
        self.warmup_steps = _check_positive_int(warmup_steps, "LinearWarmup", "warmup_steps")
        self.after = as_schedule(after)
        if not 0.0 <= start_factor <= 1.0:
            raise errors.ValueError(f"LinearWarmup: start_factor must be in [0, 1], got "
                                    f"{start_factor!r}")
        self.start_factor = float(start_factor)

    def value(self, step):
        if step < self.warmup_steps:
            f = self.start_factor + (1.0 - self.start_factor) * step / self.warmup_steps
            return self.after(0) * f
        return self.after(step - self.warmup_steps)

    def get_states(self):
        return self.after.get_states()

    def set_states(self, states):
        self.after.set_states(states)


class _Callable(Schedule):
    """Any function step -> lr."""

    def __init__(self, fn):
        self.fn = fn

    def value(self, step):
        lr = float(self.fn(step))
        if not math.isfinite(lr) or lr < 0:
            raise errors.ValueError(f"lr schedule {self.fn!r} returned {lr!r} at step {step}; "
                                    f"a learning rate must be a finite number >= 0")
        return lr


def as_schedule(lr):
    """A Schedule for an optimiser's lr argument: a number, a Schedule, or a callable."""
    if isinstance(lr, Schedule):
        return lr
    if isinstance(lr, numbers.Real) and not isinstance(lr, bool):
        return Constant(lr)
    if callable(lr):
        return _Callable(lr)
    raise errors.ValueError(f"lr must be a number, an hl.opt schedule or a callable step -> lr, "
                            f"got {type(lr).__name__}")
