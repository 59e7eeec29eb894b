"""Input checks shared by the layers, worded so the user can act on them (STYLE.md item 11):
what the layer expected, what it received, and the fix when there is an obvious one."""
import numbers
import operator

from .. import errors

_LAYOUTS = {1: "(N, C, L)", 2: "(N, C, H, W)"}
_CHANNELS_LAST = {1: "x.permute(0, 2, 1)", 2: "x.permute(0, 2, 3, 1)"}
_CHANNELS_FIRST = {1: "x.permute(0, 2, 1)", 2: "x.permute(0, 3, 1, 2)"}
_NAMES = {1: "NCL", 2: "NCHW"}


def count(value, what, layer, minimum=1, optional=False):
    """A size argument (features, channels, units, heads) as a Python int >= minimum, checked
    when the layer is constructed, so ``Linear(2.5)`` or ``Linear(-3)`` fail there and name the
    argument instead of failing at the first call inside the core. bools are refused (True is
    an int to Python, never a size to a person)."""
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise errors.ValueError(f"{layer}: {what} must be an int >= {minimum}, got {value!r} "
                                f"({type(value).__name__})")
    if value < minimum:
        raise errors.ValueError(f"{layer}: {what} must be an int >= {minimum}, got {value}")
    return int(value)


def number(value, what, layer, low=None, high=None, high_open=False):
    """A real argument (a rate, an epsilon, a momentum) as a float in [low, high] (or [low,
    high) with high_open), checked at construction."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and value == value
    if ok and low is not None:
        ok = value >= low
    if ok and high is not None:
        ok = value < high if high_open else value <= high
    if not ok:
        if high is not None:
            want = f"in [{low:g}, {high:g}{')' if high_open else ']'}"
        else:
            want = f">= {low:g}" if low is not None else "a real number"
        raise errors.ValueError(f"{layer}: {what} must be a number {want}, got {value!r}")
    return float(value)


def ints(value, n, what, layer):
    """value (an int or n ints) as a tuple of n Python ints, checked at construction time."""
    if isinstance(value, bool):
        raise errors.ValueError(f"{layer}: {what} must be an int or {n} ints, got {value!r}")
    if isinstance(value, numbers.Integral):
        return (int(value),) * n
    try:
        vals = tuple(operator.index(v) for v in value)
    except TypeError:
        raise errors.ValueError(f"{layer}: {what} must be an int or {n} ints, got "
                                f"{value!r}") from None
    if len(vals) == 1:
        vals = vals * n
    if len(vals) != n:
        raise errors.ValueError(f"{layer}: {what} must be an int or {n} ints, got {value!r}")
    return vals


def positive(vals, what, layer, allow_zero=False):
    low = 0 if allow_zero else 1
    if any(v < low for v in vals):
        must = "non-negative" if allow_zero else "positive"
        raise errors.ValueError(f"{layer}: {what} must be {must}, got "
                                f"{vals if len(vals) > 1 else vals[0]}")
    return vals


def spatial_rank(layer, x, n):
    """x must be (N, C, spatial...) with n spatial axes."""
    if x.ndim == n + 2:
        return
    hint = ""
    if x.ndim == n + 1:
        hint = "; for a single sample add the batch axis with x.unsqueeze(0)"
    raise errors.ShapeError(f"{layer.describe()}: expected a {n + 2}-D input {_LAYOUTS[n]}, "
                            f"received shape {tuple(x.shape)}{hint}")


def channels(layer, x, expected, n):
    """The channel axis (1) of x must hold `expected` channels."""
    got = x.shape[1]
    if got == expected:
        return
    msg = (f"{layer.describe()}: expected input with {expected} channels ({_NAMES[n]}), "
           f"received shape {tuple(x.shape)}")
    if x.shape[-1] == expected:
        msg += (f"; did you mean channels-last? Transpose with {_CHANNELS_FIRST[n]}.")
    raise errors.ShapeError(msg)


def window_fits(layer, x, n, kernel, stride, dilation, pads):
    """At least one output position: the (dilated) window must fit the padded input. pads
    are in ONNX order (all begins, then all ends)."""
    sizes = tuple(x.shape[2:])
    for i in range(n):
        span = dilation[i] * (kernel[i] - 1) + 1
        padded = sizes[i] + pads[i] + pads[n + i]
        if padded < span:
            what = "kernel" if all(d == 1 for d in dilation) else "dilated kernel"
            raise errors.ShapeError(
                f"{layer.describe()}: the input's spatial size {sizes} (padded: "
                f"{tuple(sizes[j] + pads[j] + pads[n + j] for j in range(n))}) is smaller "
                f"than the {what} {tuple(dilation[j] * (kernel[j] - 1) + 1 for j in range(n))}"
                f"; use a smaller kernel, more padding, or a larger input")
