"""paddle.parameters: the named parameter store of a v2 graph, and v2's tar files.

``create(cost)`` walks the graph from the cost and draws every parameter as v2 did (a
normal draw from each ParamSpec's mean and std, using hl's generator so hl.manual_seed
repeats it). Values are hl tensors in v2's shapes (fc weight (in, size), bias (1, size),
convolution weight (1, size)); the operators view them in the shapes they compute with, and
every Network built over the same Parameters shares them. ``get`` returns a copy as numpy,
``set`` writes into the tensor in place (so networks see it at once)."""
import numpy as np

from .. import errors
from .. import ops
from .._tensor import tensor
from ..autograd import no_grad
from . import param_file
from ._update_rules import ParameterConfig
from .graph import check_layers, param_shape, topological


class Parameters:
    def __init__(self):
        self._tensors = {}   # name -> hl Tensor, in v2's shape
        self._configs = {}   # name -> param_file.ParamConfig
        self._tuning = {}    # name -> _update_rules.ParameterConfig (the optimisers' view)

    # ---- building ---------------------------------------------------------------------

    def _add(self, spec, values=None):
        shape = param_shape(spec)
        if values is None:
            mean, std = spec.init
            with no_grad():
                values = (ops.randn(*shape) * std + mean) if std else ops.full(shape, mean)
        else:
            values = tensor(np.ascontiguousarray(values, np.float32).reshape(shape))
        self._tensors[spec.name] = values
        self._configs[spec.name] = param_file.ParamConfig(
            name=spec.name, size=spec.size, dims=tuple(spec.dims),
            learning_rate=spec.learning_rate, initial_mean=spec.init[0],
            initial_std=spec.init[1], decay_rate=spec.l2_rate or 0.0,
            is_static=spec.is_static)
        self._tuning[spec.name] = ParameterConfig(spec.learning_rate, spec.l2_rate,
                                                  spec.is_static, **spec.tuning)

    def tensor_for(self, spec):
        """The tensor of `spec` for a Network, checked against what the layer needs."""
        if spec.name not in self._tensors:
            raise errors.ValueError(
                f"the parameters have no {spec.name!r}, which layer {spec.name[1:].rsplit('.', 1)[0]!r} "
                f"needs; create them from a graph holding that layer "
                f"(paddle.parameters.create(cost)) or load a tar that has it")
        t = self._tensors[spec.name]
        if t.size != spec.size:
            raise errors.ShapeError(f"parameter {spec.name!r} has {t.size} values; the layer "
                                    f"needs {spec.size} {param_shape(spec)}")
        if tuple(t.shape) != param_shape(spec):  # from a tar with other dims: same values
            t = self._tensors[spec.name] = t.reshape(*param_shape(spec))
        return t

    # ---- v2's dictionary interface ----------------------------------------------------

    def names(self):
        return list(self._tensors)

    def keys(self):
        return self.names()

    def has_key(self, key):
        return key in self._tensors

    def __contains__(self, key):
        return key in self._tensors

    def __iter__(self):
        return iter(self.names())

    def __len__(self):
        return len(self._tensors)

    def _check(self, name):
        if name not in self._tensors:
            raise errors.ValueError(f"no parameter named {name!r}; the parameters are "
                                    f"{self.names()[:20]}")

    def get_shape(self, key):
        self._check(key)
        return tuple(self._tensors[key].shape)

    def get(self, parameter_name):
        """A float32 copy of the values, in v2's shape."""
        self._check(parameter_name)
        return np.array(self._tensors[parameter_name].numpy(), dtype=np.float32)

    def __getitem__(self, key):
        return self.get(key)

    def set(self, parameter_name, value):
        """Writes value (its shape must be get_shape's) into the parameter, in place."""
        self._check(parameter_name)
        value = np.asarray(value)
        shape = self.get_shape(parameter_name)
        if value.shape != shape:
            raise errors.ShapeError(f"Parameters.set({parameter_name!r}): the value has shape "
                                    f"{value.shape}, the parameter {shape}")
        if not np.issubdtype(value.dtype, np.number):
            raise errors.DTypeError(f"Parameters.set({parameter_name!r}): the value has dtype "
                                    f"{value.dtype}; expected numbers (stored as float32)")
        with no_grad():
            self._tensors[parameter_name].copy_(tensor(value.astype(np.float32)))

    def __setitem__(self, key, value):
        self.set(key, value)

    def configs(self):
        """name -> the parameter's optimiser settings (learning_rate, decay_rate (None: the
        optimiser's L2 rate), is_static, momentum, decay_rate_l1, clipping)."""
        return dict(self._tuning)

    # ---- files ------------------------------------------------------------------------

    def to_tar(self, f):
        """Writes v2's tar (a path is written atomically)."""
        param_file.save(f, [(self._configs[n], self.get(n)) for n in self.names()])

    @staticmethod
    def from_tar(f):
        """Parameters holding everything in a v2 tar (no graph needed: infer and trainers
        pick the names their layers use)."""
        p = Parameters()
        for name, (config, values) in param_file.read(f).items():
            p._tensors[name] = tensor(np.ascontiguousarray(values, np.float32))
            p._configs[name] = config
            p._tuning[name] = ParameterConfig(config.learning_rate, config.decay_rate or None,
                                              config.is_static)
        return p

    def init_from_tar(self, f, exclude_params=()):
        """Loads the values of the tar's parameters that these parameters have (all of
        them but exclude_params), checking every shape before writing any."""
        loaded = param_file.read(f)
        todo = [(n, v) for n, (_, v) in loaded.items()
                if n in self._tensors and n not in set(exclude_params)]
        for name, values in todo:
            if values.size != self._tensors[name].size:
                raise errors.ShapeError(f"init_from_tar: parameter {name!r} has {values.size} "
                                        f"values in the file, {self._tensors[name].size} here")
        for name, values in todo:
            self.set(name, values.reshape(self.get_shape(name)))


def create(layers):
    """Parameters for every layer the given layers (a cost, or a list) depend on."""
    layers = check_layers(layers, "paddle.parameters.create")
    p = Parameters()
    for op in topological(layers):
        for spec in op.params:
            if spec.name in p._tensors:
                if p._configs[spec.name].size != spec.size:
                    raise errors.ShapeError(f"parameter {spec.name!r} is shared by layers that "
                                            f"need {p._configs[spec.name].size} and {spec.size} "
                                            f"values")
                continue
            p._add(spec)
    return p


__all__ = ["Parameters", "create"]
