"""Network: a subgraph of the v2 graph as an hl Module.

``Network(targets, parameters)`` holds the operators the targets need, in order, and adopts
the parameter tensors they read from a Parameters object (the tensors themselves, so every
network built over the same Parameters shares them, as v2's gradient machines shared one
parameter store). ``forward(feeds)`` runs exactly those operators and returns the targets'
values: training runs the costs' subgraph, infer runs the output layer's, which holds no
cost and no label (``last_ran`` lists what a run computed)."""
from .. import errors
from ..autograd import functional as F
from ..model import Module
from .graph import as_list, data_layers, topological
from .operators.values import Seq, map_data


class Run:
    """One pass over the operators: their values so far and the parameters they read."""

    def __init__(self, network, feeds):
        self.network = network
        self.feeds = feeds
        self.training = network.training
        self.values = {}
        self.pre = {}

    def param(self, name):
        return self.network.__dict__[name]

    def feed(self, op):
        if op.name not in self.feeds:
            raise errors.ValueError(f"no data was fed to data layer {op.name!r}")
        return self.feeds[op.name]

    def pre_activation(self, op):
        return self.pre[id(op)]


def _activate(op, pre, training):
    out = pre
    if op.act is not None:
        act = op.act
        if getattr(act, "name", "") == "softmax":
            out = map_data(lambda t: F.reshape(act(F.reshape(t, t.shape[0], -1)), *t.shape)
                           if t.ndim == 4 else act(t), pre)
        else:
            out = map_data(act, pre)
    if op.drop_rate:
        # v2's dropout: zero with probability p while training, scale by 1 - p at test time
        keep = 1.0 - op.drop_rate
        if training:
            out = map_data(lambda t: F.dropout(t, op.drop_rate, training=True) * keep, out)
        else:
            out = map_data(lambda t: t * keep, out)
    return out


class Network(Module):
    def __init__(self, targets, parameters):
        super().__init__()
        d = self.__dict__
        d["_targets"] = as_list(targets)
        d["_ops"] = topological(targets)
        d["_data"] = data_layers(targets)
        d["last_ran"] = []
        seen = {}
        for op in self._ops:
            for spec in op.params:
                if spec.name in seen:
                    if seen[spec.name].size != spec.size:
                        raise errors.ShapeError(
                            f"parameter {spec.name!r} is shared by layers that need "
                            f"{seen[spec.name].size} and {spec.size} values")
                    continue
                seen[spec.name] = spec
                t = parameters.tensor_for(spec)
                if spec.is_static:
                    self.add_state(spec.name, t)
                else:
                    self.set_param(spec.name, t)
        self.__dict__["_built"] = True

    @property
    def data_layers(self):
        return list(self._data)

    @property
    def operators(self):
        return list(self._ops)

    def forward(self, feeds):
        run = Run(self, feeds)
        ran = []
        for op in self._ops:
            xs = [run.values[id(x.op)] for x in op.inputs]
            pre = op.compute(run, *xs)
            run.pre[id(op)] = pre
            run.values[id(op)] = _activate(op, pre, run.training)
            ran.append(op.name)
        self.__dict__["last_ran"] = ran
        self.__dict__["last_values"] = {op.output: run.values[id(op)] for op in self._ops}
        return [run.values[id(t.op)] for t in self._targets]


def host_rows(v):
    """A value as v2 returned it: a 2-D float array, sequences' steps one row each."""
    import numpy as np
    if isinstance(v, Seq):
        data = v.data.numpy()
        rows = [data[i, :n] for i, n in enumerate(v.lengths)]
        return np.concatenate(rows, axis=0) if rows else data.reshape(0, data.shape[-1])
    a = v.numpy()
    return a.reshape(a.shape[0], -1) if a.ndim != 1 else a
