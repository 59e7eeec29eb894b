"""The activation registry: one table from Keras's activation names to hl's recording
functions, read by every ``activation=`` argument (Linear/Dense, the convolutions, the
recurrent layers, the Activation layer) and by the other front doors (hl.singa).

    hl.layers.activations.get("relu")(x)      # the function
    hl.layers.Dense(64, activation="gelu")    # applied after the layer's own computation

An identifier is a name below, None or "linear" (no activation), or any callable taking
one tensor; :func:`get` turns it into a callable and :func:`name_of` back into the name a
summary, repr or error shows.
"""
from .. import errors
from ..autograd import functional as F


def linear(x):
    """The identity (Keras's 'linear' activation)."""
    return x


def silu(x):
    """x * sigmoid(x) (Keras's 'silu', also 'swish')."""
    return x * F.sigmoid(x)


def relu6(x):
    """min(max(x, 0), 6)."""
    return F.clip(x, 0.0, 6.0)


def _softmax(x):
    return F.softmax(x, -1)


def _log_softmax(x):
    return F.log_softmax(x, -1)


def _leaky_relu(x):  # Keras's default slope for the name (PyTorch's LeakyReLU layer: 0.01)
    return F.leaky_relu(x, 0.2)


def _gelu(x):
    return F.gelu(x)


def _hard_sigmoid(x):  # PyTorch's and Keras 3's: clip(x / 6 + 1 / 2, 0, 1)
    return F.hard_sigmoid(x, 1.0 / 6.0, 0.5)


for _fn, _name in ((_softmax, "softmax"), (_log_softmax, "log_softmax"), (_gelu, "gelu"),
                   (_hard_sigmoid, "hard_sigmoid"), (_leaky_relu, "leaky_relu")):
    _fn.__name__ = _name

# name -> function of one tensor; the names are Keras 3's (keras.activations)
_REGISTRY = {
    "linear": linear,
    "relu": F.relu,
    "relu6": relu6,
    "leaky_relu": _leaky_relu,
    "elu": F.elu,
    "selu": F.selu,
    "gelu": _gelu,
    "sigmoid": F.sigmoid,
    "hard_sigmoid": _hard_sigmoid,
    "tanh": F.tanh,
    "softplus": F.softplus,
    "softsign": F.softsign,
    "silu": silu,
    "swish": silu,
    "mish": F.mish,
    "hard_swish": F.hard_swish,
    "hard_silu": F.hard_swish,
    "exponential": F.exp,
    "softmax": _softmax,
    "log_softmax": _log_softmax,
}


def names():
    """The registered names, sorted."""
    return sorted(_REGISTRY)


def get(identifier, who="activation"):
    """The function for a name, None (the identity) or a callable (returned as it is)."""
    if identifier is None:
        return linear
    if isinstance(identifier, str):
        fn = _REGISTRY.get(identifier.lower())
        if fn is None:
            raise errors.ValueError(f"{who}: unknown activation {identifier!r}; known: "
                                    f"{', '.join(names())}, or pass a callable")
        return fn
    if callable(identifier):
        return identifier
    raise errors.ValueError(f"{who}: an activation is a name ({', '.join(names())}), None "
                            f"or a callable, got {identifier!r}")


def checked(identifier, who):
    """What a layer keeps for its ``activation=`` argument: a lower-case name, None, or the
    callable. Layers keep the name rather than the function so that hl.save (whose loader
    admits classes, never functions) can store a model with registered activations."""
    get(identifier, who)
    if isinstance(identifier, str):
        identifier = identifier.lower()
        return None if identifier == "linear" else identifier
    return identifier


def apply(identifier, x):
    """x through the activation a layer kept (see checked)."""
    return x if identifier is None else get(identifier)(x)


def register(name, fn):
    """Adds `fn` under `name` (for a front door or a user's own activation)."""
    if not callable(fn):
        raise errors.ValueError(f"activations.register: {name!r} needs a callable, got {fn!r}")
    _REGISTRY[str(name).lower()] = fn


def name_of(identifier):
    """The identifier as shown: its registered name, or the callable's own name."""
    if identifier is None:
        return "linear"
    if isinstance(identifier, str):
        return identifier.lower()
    for name, fn in _REGISTRY.items():
        if fn is identifier:
            return name
    return getattr(identifier, "__name__", type(identifier).__name__)


__all__ = ["apply", "checked", "get", "linear", "name_of", "names", "register", "relu6", "silu"]
