"""Operators on vectors: data, fc, embedding, concat, addto (and dropout), max_id."""
import math

from ... import errors
from ...autograd import functional as F
from ..graph import Operator
from . import params
from .values import Seq, flat, map_data, same_steps


class Data(Operator):
    kind = "data"
    is_data = True

    def __init__(self, name, input_type, height=None, width=None):
        super().__init__(name, [])
        self.type = input_type
        self.height, self.width = height, width

    def compute(self, run):
        return run.feed(self)


class FC(Operator):
    """out = act(sum_i x_i @ W_i + b); W_i is (in_i, size), b is (1, size)."""
    kind = "fc"

    def __init__(self, name, inputs, size, act, param_attrs, bias_attr, drop_rate):
        super().__init__(name, inputs, act, drop_rate)
        if len(param_attrs) != len(inputs):
            raise errors.ValueError(f"fc {name!r}: {len(inputs)} inputs but {len(param_attrs)} "
                                    f"param_attr entries")
        for i, (x, a) in enumerate(zip(inputs, param_attrs)):
            self.params.append(params.weight(name, i, x.size * size, (x.size, size), a,
                                             1.0 / math.sqrt(x.size)))
        self.add_bias(params.bias(name, size, (1, size), bias_attr))

    def compute(self, run, *xs):
        seq = same_steps(xs, self.name)
        out = None
        for x, spec in zip(xs, self.params):
            w = run.param(spec.name)
            term = F.matmul(x.data if seq else flat(x), w)
            out = term if out is None else out + term
        if self.bias:
            out = out + F.reshape(run.param(self.bias), -1)
        return Seq(out, seq.mask, seq.lengths) if seq else out


class Embedding(Operator):
    """Rows of a (dict size, size) table picked by integer ids."""
    kind = "mixed"

    def __init__(self, name, input, size, param_attr, drop_rate):
        super().__init__(name, [input], None, drop_rate)
        if input.op.is_data and input.op.type.kind != "index":
            raise errors.ValueError(f"embedding {name!r}: its input {input.name!r} must be "
                                    f"integer_value or integer_value_sequence data")
        self.params.append(params.weight(name, 0, input.size * size, (input.size, size),
                                         param_attr, 1.0 / math.sqrt(input.size)))

    def compute(self, run, ids):
        table = run.param(self.params[0].name)
        return map_data(lambda i: F.take(table, i, axis=0), ids)


class Concat(Operator):
    """The inputs' features side by side (feature maps are flattened first)."""
    kind = "concat"

    def compute(self, run, *xs):
        seq = same_steps(xs, self.name)
        if seq:
            return Seq(F.concat([x.data for x in xs], axis=-1), seq.mask, seq.lengths)
        return F.concat([flat(x) for x in xs], axis=1)


class AddTo(Operator):
    """The element-wise sum of inputs of one size, plus an optional bias."""
    kind = "addto"

    def __init__(self, name, inputs, act, bias_attr, drop_rate):
        super().__init__(name, inputs, act, drop_rate)
        sizes = {x.size for x in inputs}
        if len(sizes) != 1:
            raise errors.ShapeError(f"addto {name!r}: its inputs must have one size, got "
                                    f"{[x.size for x in inputs]}")
        self.add_bias(params.bias(name, inputs[0].size, (1, inputs[0].size), bias_attr, default=False))

    def compute(self, run, *xs):
        out = xs[0]
        for x in xs[1:]:
            out = map_data(lambda a, b=x: a + (b.data if isinstance(b, Seq) else b), out)
        if self.bias:
            b = F.reshape(run.param(self.bias), -1)
            out = map_data(lambda a: a + (F.reshape(b, 1, *a.shape[1:]) if a.ndim == 4 else b),
                           out)
        return out


class MaxId(Operator):
    """The index of each sample's largest value (an int64 vector)."""
    kind = "maxid"

    def compute(self, run, x):
        return map_data(lambda t: F.argmax(t, axis=-1), x if isinstance(x, Seq) else flat(x))
