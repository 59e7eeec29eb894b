"""ParamSpecs with v2's names and starting values: ``_<layer>.w<i>`` for the i-th input's
weight, ``_<layer>.wbias`` for the bias, unless a ParamAttr names the parameter (two layers
naming the same parameter share it, as in v2)."""
from ... import errors
from ..attr import ParameterAttribute
from ..graph import ParamSpec


def _attr(a, what):
    if a is None or a is True:
        return ParameterAttribute()
    if not isinstance(a, ParameterAttribute):
        raise errors.ValueError(f"{what}: expected paddle.attr.Param(...), got "
                                f"{type(a).__name__}")
    return a


def _tuning(attr):
    return {"decay_rate_l1": attr.l1_rate, "momentum": attr.momentum,
            "gradient_clipping_threshold": attr.gradient_clipping_threshold}


def weight(layer, i, size, dims, attr, smart_std):
    attr = _attr(attr, f"layer {layer!r} param_attr")
    return ParamSpec(attr.name or f"_{layer}.w{i}", int(size), tuple(dims), attr.init(smart_std),
                     attr.learning_rate, attr.l2_rate, attr.is_static, _tuning(attr))


def bias(layer, size, dims, bias_attr, default=True):
    """The bias spec, or None when bias_attr is False (or None with default=False)."""
    if bias_attr is False or (bias_attr is None and not default):
        return None
    attr = _attr(bias_attr, f"layer {layer!r} bias_attr")
    init = (attr.initial_mean or 0.0, attr.initial_std or 0.0)  # biases start at zero
    return ParamSpec(attr.name or f"_{layer}.wbias", int(size), tuple(dims), init,
                     attr.learning_rate, attr.l2_rate, attr.is_static, _tuning(attr))


def static(name, size, dims, value):
    """A statistic kept beside the parameters (batch norm's moving mean and variance): v2
    stores it as a static parameter, so it is saved and loaded with them."""
    return ParamSpec(name, int(size), tuple(dims), (float(value), 0.0), 1.0, None, True)
