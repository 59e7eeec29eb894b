"""The v2 graph: variables (v2's LayerOutput) produced by operators, and walks over it.

Each ``paddle.layer.*`` call creates one Operator and returns its output variable. Nothing is
computed then: the graph is run later, one subgraph at a time, by hl.v2.network.Network (a
Session.run(targets, feed) in TensorFlow's terms). Sizes are known when a layer is created,
so parameter shapes are too (v2 had no lazy shapes).
"""
import collections

from .. import errors

_counters = collections.defaultdict(int)


def default_name(prefix):
    """v2's default layer name: ``__<prefix>_<n>__``, n counting per prefix per process."""
    n = _counters[prefix]
    _counters[prefix] += 1
    return f"__{prefix}_{n}__"


# A parameter an operator owns. `dims` are v2's (written to the tar's ParameterConfig; the
# tensor has shape dims, or (1, size) when dims is empty, as v2's Parameters.get_shape);
# `init` is (mean, std) of a normal draw; `l2_rate` None means "the optimiser's default";
# `tuning` holds ParamAttr's other optimiser settings (l1_rate, momentum, clipping).
ParamSpec = collections.namedtuple(
    "ParamSpec", "name size dims init learning_rate l2_rate is_static tuning",
    defaults=({},))


def param_shape(spec):
    return tuple(spec.dims) if spec.dims else (1, spec.size)


class LayerOutput:
    """A variable of the graph: what a layer call returns and what later layers take.

    ``size`` is the feature width of one sample (one time step for a sequence); ``image``
    is (channels, height, width) when the value is a feature map; ``is_seq`` marks a value
    with a time axis (a sequence per sample)."""

    def __init__(self, op, size, is_seq=False, image=None, activation=None):
        self.op = op
        self.name = op.name
        self.size = int(size)
        self.is_seq = bool(is_seq)
        self.image = image
        self.activation = activation
        op.output = self

    @property
    def parents(self):
        return self.op.inputs

    @property
    def num_filters(self):
        return self.image[0] if self.image else None

    @property
    def layer_type(self):
        return self.op.kind

    def __repr__(self):
        return f"<v2 layer {self.name!r}: {self.op.kind}, size {self.size}>"


class Operator:
    """One v2 layer's computation. Subclasses set ``kind`` (v2's layer type) and implement
    ``compute(run, *inputs)`` returning the value before activation; the activation and
    dropout (ExtraAttr(drop_rate)) are applied by ``Network`` after it. ``params`` lists the
    ParamSpecs the operator reads from ``run.param(name)``."""

    kind = "?"
    is_cost = False
    is_data = False

    def __init__(self, name, inputs, act=None, drop_rate=0.0):
        self.name = name
        self.inputs = list(inputs)
        self.act = act
        self.drop_rate = float(drop_rate or 0.0)
        self.params = []
        self.output = None
        for i, x in enumerate(self.inputs):
            if not isinstance(x, LayerOutput):
                raise errors.ValueError(
                    f"layer {name!r} ({self.kind}): input {i} is a {type(x).__name__}; v2 "
                    f"layers take the outputs of other paddle.layer calls")

    def compute(self, run, *xs):
        raise NotImplementedError

    def add_bias(self, spec):
        """Keeps a bias spec (None: no bias); ``self.bias`` is its name or None."""
        self.bias = spec.name if spec is not None else None
        if spec is not None:
            self.params.append(spec)

    def __repr__(self):
        return f"<{type(self).__name__} {self.name!r}>"


def as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def topological(targets):
    """Every operator the targets depend on, each after its inputs: a depth-first walk from
    the targets, parents first, left to right (v2's own order)."""
    order, seen = [], set()
    for t in as_list(targets):
        stack = [(t, False)]
        while stack:
            v, expanded = stack.pop()
            if id(v.op) in seen:
                continue
            if expanded:
                seen.add(id(v.op))
                order.append(v.op)
                continue
            stack.append((v, True))
            for p in reversed(v.op.inputs):
                if id(p.op) not in seen:
                    stack.append((p, False))
    return order


def data_layers(targets):
    """The data layers the targets read, in v2's default feeding order."""
    return [op.output for op in topological(targets) if op.is_data]


def check_layers(layers, what):
    for x in as_list(layers):
        if not isinstance(x, LayerOutput):
            raise errors.ValueError(f"{what}: expected v2 layers (what paddle.layer.* returns), "
                                    f"got a {type(x).__name__}")
    return as_list(layers)
