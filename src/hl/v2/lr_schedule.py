"""PaddlePaddle v2's learning-rate schedules (legacy paddle/parameter/LearningRateScheduler).

The global learning rate of a batch is a function of ``n``, the number of samples processed
*including the current batch* (v2's updater adds the batch size to its count before it asks
for the rate), and of ``pass_id``, the number of passes finished so far. With
``lr = learning_rate``, ``a = learning_rate_decay_a``, ``b = learning_rate_decay_b``:

=============  ==========================================================================
constant       lr
poly           lr * (1 + a * n) ** (-b)             (v2's default; a = b = 0 is constant)
caffe_poly     lr * (1 - n / a) ** b, and 0 once n > a
exp            lr * a ** (n / b)
discexp        lr * a ** floor(n / b)
linear         max(lr - a * n, b)
manual         lr * rate_i for the first segment i with n <= seg_i, the last rate after
               the last segment; ``learning_rate_args = "seg0:rate0,seg1:rate1,..."``
pass_manual    the same with pass_id in place of n
=============  ==========================================================================

The schedule is a pure function of (n, pass_id): v2's manual schedules kept the current
segment as state, which gives the same answers because n and the pass never decrease
(segments must increase, which is checked here).
"""
import math
import numbers

from .. import errors

__all__ = ["LearningRateSchedule", "SCHEDULES", "parse_manual_args"]

SCHEDULES = ("constant", "poly", "caffe_poly", "exp", "discexp", "linear", "manual",
             "pass_manual")


def parse_manual_args(args, who="learning_rate_args"):
    """``"1000:1.0,2000:0.5"`` -> ([1000, 2000], [1.0, 0.5]). Segments are integers and
    must increase; rates are numbers."""
    if not isinstance(args, str) or not args.strip():
        raise errors.ValueError(
            f"{who}: the 'manual' and 'pass_manual' schedules need learning_rate_args such "
            f"as \"1000:1.0,2000:0.5\" (segment:rate pairs), got {args!r}")
    segments, rates = [], []
    for piece in args.split(","):
        seg, sep, rate = piece.strip().partition(":")
        try:
            if not sep:
                raise ValueError
            segments.append(int(seg))
            rates.append(float(rate))
        except ValueError:
            raise errors.ValueError(
                f"{who}: expected comma-separated <integer>:<rate> pairs such as "
                f"\"1000:1.0,2000:0.5\", got the piece {piece!r} in {args!r}") from None
        if not math.isfinite(rates[-1]) or rates[-1] < 0:
            raise errors.ValueError(f"{who}: rates must be finite numbers >= 0, got "
                                    f"{rate!r} in {args!r}")
    if any(b <= a for a, b in zip(segments, segments[1:])):
        raise errors.ValueError(f"{who}: the segments must increase, got {segments} in "
                                f"{args!r}")
    return segments, rates


def _number(value, who, what):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or \
            not math.isfinite(value):
        raise errors.ValueError(f"{who}: {what} must be a finite number, got {value!r}")
    return float(value)


class LearningRateSchedule:
    """``schedule(n, pass_id) -> float``: v2's global learning rate (see the module's
    docstring for the formulas). Arguments are checked here, so a bad configuration fails
    when the optimiser is configured rather than at the first batch."""

    def __init__(self, learning_rate, schedule="poly", decay_a=0.0, decay_b=0.0, args="",
                 who="optimizer"):
        self.learning_rate = _number(learning_rate, who, "learning_rate")
        if self.learning_rate < 0:
            raise errors.ValueError(f"{who}: learning_rate must be >= 0, got {learning_rate!r}")
        if schedule not in SCHEDULES:
            raise errors.ValueError(f"{who}: unknown learning_rate_schedule {schedule!r}; "
                                    f"v2 knows {', '.join(SCHEDULES)}")
        self.name = schedule
        self.a = _number(decay_a, who, "learning_rate_decay_a")
        self.b = _number(decay_b, who, "learning_rate_decay_b")
        self.args = args
        self.segments = self.rates = None
        if schedule in ("manual", "pass_manual"):
            self.segments, self.rates = parse_manual_args(args, f"{who}: learning_rate_args")
        elif schedule in ("exp", "discexp") and self.b <= 0:
            raise errors.ValueError(
                f"{who}: the {schedule!r} schedule divides the sample count by "
                f"learning_rate_decay_b, which must be > 0, got {decay_b!r}")
        elif schedule == "caffe_poly" and self.a <= 0:
            raise errors.ValueError(
                f"{who}: the 'caffe_poly' schedule needs learning_rate_decay_a > 0 (the "
                f"number of samples at which the rate reaches 0), got {decay_a!r}")

    @property
    def is_constant(self):
        """True when the rate never changes (constant, or poly with a or b zero)."""
        return self.name == "constant" or (self.name == "poly" and (self.a == 0 or self.b == 0))

    @property
    def counts_samples(self):
        """True when the rate depends on the number of samples processed."""
        return not self.is_constant and self.name != "pass_manual"

    def __call__(self, n, pass_id=0):
        lr, a, b, name = self.learning_rate, self.a, self.b, self.name
        if name == "constant":
            return lr
        if name == "poly":
            return lr * math.pow(1.0 + a * n, -b)
        if name == "caffe_poly":
            return 0.0 if n > a else lr * math.pow(1.0 - n / a, b)
        if name == "exp":
            return lr * math.pow(a, n / b)
        if name == "discexp":
            return lr * math.pow(a, math.floor(n / b))
        if name == "linear":
            return max(lr - a * n, b)
        num = pass_id if name == "pass_manual" else n
        for seg, rate in zip(self.segments, self.rates):
            if num <= seg:
                return lr * rate
        return lr * self.rates[-1]

    # hl.opt.Optimizer keeps its schedule's states; this one is a pure function of (n, pass)
    def get_states(self):
        return {}

    def set_states(self, states):
        pass

    def __repr__(self):
        extra = (f", learning_rate_args={self.args!r}" if self.segments is not None else
                 "" if self.name == "constant" else f", a={self.a!r}, b={self.b!r}")
        return f"LearningRateSchedule({self.name!r}, learning_rate={self.learning_rate!r}{extra})"
