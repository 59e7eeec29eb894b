"""paddle.attr: ParamAttr (how a parameter starts and learns) and ExtraAttr (dropout)."""
from .. import errors


class ParameterAttribute:
    """``ParamAttr(name=None, initial_std=None, initial_mean=None, learning_rate=None,
    l2_rate=None, is_static=False, ...)``. A parameter with neither initial_std nor
    initial_mean set starts as v2's "smart" normal draw, std 1/sqrt(fan_in) (convolutions:
    sqrt(2 / (filter area * channels))); biases start at zero."""

    def __init__(self, name=None, is_static=False, initial_std=None, initial_mean=None,
                 initial_max=None, initial_min=None, l1_rate=None, l2_rate=None,
                 learning_rate=None, momentum=None, gradient_clipping_threshold=None,
                 sparse_update=False, update_hooks=None, initializer=None):
        if initial_max is not None or initial_min is not None or initializer is not None:
            raise errors.UnsupportedError(
                "paddle.attr.Param: initial_max / initial_min / initializer are not supported; "
                "use initial_mean and initial_std (a normal draw)")
        self.name = name
        self.is_static = bool(is_static)
        self.initial_std = None if initial_std is None else float(initial_std)
        self.initial_mean = None if initial_mean is None else float(initial_mean)
        self.l2_rate = None if l2_rate is None else float(l2_rate)
        self.learning_rate = 1.0 if learning_rate is None else float(learning_rate)
        # per-parameter optimiser settings (None: the optimiser's own)
        self.l1_rate = float(l1_rate or 0.0)
        self.momentum = None if momentum is None else float(momentum)
        self.gradient_clipping_threshold = gradient_clipping_threshold

    def init(self, smart_std):
        """(mean, std) of the starting draw."""
        if self.initial_std is None and self.initial_mean is None:
            return 0.0, smart_std
        return (self.initial_mean or 0.0,
                0.01 if self.initial_std is None else self.initial_std)


class ExtraLayerAttribute:
    """``ExtraAttr(drop_rate=None, error_clipping_threshold=None, device=None)``: drop_rate
    applies dropout to the layer's output (v2's way: no rescaling while training, outputs
    scaled by 1 - drop_rate at test time)."""

    def __init__(self, error_clipping_threshold=None, drop_rate=None, device=None):
        if drop_rate is not None and not 0.0 <= float(drop_rate) < 1.0:
            raise errors.ValueError(f"paddle.attr.Extra: drop_rate must be in [0, 1), got "
                                    f"{drop_rate}")
        self.drop_rate = float(drop_rate or 0.0)


Param = ParamAttr = ParameterAttribute
Extra = ExtraAttr = ExtraLayerAttribute

__all__ = ["Param", "ParamAttr", "ParameterAttribute", "Extra", "ExtraAttr",
           "ExtraLayerAttribute"]
