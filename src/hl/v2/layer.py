"""paddle.layer: v2's layer functions. Each builds one operator of the graph (see graph.py)
and returns its output variable; names and defaults are v2's."""
from .. import errors
from . import activation as act_
from . import pooling as pool_
from .attr import ExtraLayerAttribute
from .data_type import InputType
from .graph import LayerOutput, as_list, default_name
from .operators import cost as cost_ops
from .operators import dense, image, sequence

__all__ = ["data", "fc", "embedding", "concat", "addto", "dropout", "max_id", "img_conv",
           "img_pool", "batch_norm", "pooling", "last_seq", "first_seq", "lstmemory",
           "grumemory", "context_projection", "classification_cost", "cross_entropy_cost",
           "square_error_cost", "mse_cost", "regression_cost", "LayerOutput", "parse_network"]


def _drop(layer_attr):
    if layer_attr is None:
        return 0.0
    if not isinstance(layer_attr, ExtraLayerAttribute):
        raise errors.ValueError(f"layer_attr must be paddle.attr.Extra(...), got "
                                f"{type(layer_attr).__name__}")
    return layer_attr.drop_rate


def _act(act, default, layer):
    a = default if act is None else act
    if isinstance(a, type):
        a = a()
    if not isinstance(a, act_.BaseActivation):
        raise errors.ValueError(f"layer {layer!r}: act must be a paddle.activation object such "
                                f"as paddle.activation.Relu(), got {a!r}")
    return a


def _one(input, layer):
    if isinstance(input, (list, tuple)):
        if len(input) != 1:
            raise errors.ValueError(f"layer {layer!r} takes one input, got {len(input)}")
        input = input[0]
    return input


def _image_out(op):
    c, h, w = op.image
    return c * h * w


# ---- data and vectors ------------------------------------------------------------------

def data(name, type, height=None, width=None, layer_attr=None):
    if not isinstance(type, InputType):
        raise errors.ValueError(f"data layer {name!r}: type must come from paddle.data_type, "
                                f"e.g. paddle.data_type.dense_vector(784); got {type!r}")
    op = dense.Data(name, type, height, width)
    return LayerOutput(op, type.dim, is_seq=type.seq)


def fc(input, size, act=None, name=None, param_attr=None, bias_attr=None, layer_attr=None):
    name = name or default_name("fc_layer")
    inputs = as_list(input)
    attrs = param_attr if isinstance(param_attr, (list, tuple)) else [param_attr] * len(inputs)
    a = _act(act, act_.Tanh(), name)
    op = dense.FC(name, inputs, int(size), a, list(attrs), bias_attr, _drop(layer_attr))
    return LayerOutput(op, size, is_seq=any(x.is_seq for x in inputs), activation=a)


def embedding(input, size, name=None, param_attr=None, layer_attr=None):
    name = name or default_name("embedding")
    input = _one(input, name)
    op = dense.Embedding(name, input, int(size), param_attr, _drop(layer_attr))
    return LayerOutput(op, size, is_seq=input.is_seq)


def concat(input, act=None, name=None, layer_attr=None, bias_attr=None):
    name = name or default_name("concat")
    inputs = as_list(input)
    a = _act(act, act_.Identity(), name)
    op = dense.Concat(name, inputs, a, _drop(layer_attr))
    return LayerOutput(op, sum(x.size for x in inputs), is_seq=any(x.is_seq for x in inputs),
                       activation=a)


def addto(input, act=None, name=None, bias_attr=None, layer_attr=None):
    name = name or default_name("addto")
    inputs = as_list(input)
    a = _act(act, act_.Linear(), name)
    op = dense.AddTo(name, inputs, a, bias_attr, _drop(layer_attr))
    first = inputs[0]
    return LayerOutput(op, first.size, is_seq=first.is_seq, image=first.image, activation=a)


def dropout(input, dropout_rate, name=None):
    """v2's dropout layer: an addto of one input with drop_rate."""
    return addto(input, name=name or default_name("dropout"), act=act_.Linear(),
                 bias_attr=False, layer_attr=ExtraLayerAttribute(drop_rate=dropout_rate))


def max_id(input, name=None, layer_attr=None):
    name = name or default_name("maxid_layer")
    input = _one(input, name)
    op = dense.MaxId(name, [input])
    return LayerOutput(op, 1, is_seq=input.is_seq)


# ---- images ----------------------------------------------------------------------------

def img_conv(input, filter_size, num_filters, name=None, num_channels=None, act=None, groups=1,
             stride=1, padding=0, dilation=1, bias_attr=None, param_attr=None,
             shared_biases=True, layer_attr=None, filter_size_y=None, stride_y=None,
             padding_y=None, dilation_y=None, trans=False, layer_type=None):
    name = name or default_name("conv")
    input = _one(input, name)
    if trans:
        raise errors.UnsupportedError(f"img_conv {name!r}: trans=True (a transposed "
                                      f"convolution) is not supported")
    if not shared_biases:
        raise errors.UnsupportedError(f"img_conv {name!r}: shared_biases=False is not "
                                      f"supported")
    a = _act(act, act_.Relu(), name)
    op = image.Conv(name, input, (int(filter_size_y or filter_size), int(filter_size)),
                    int(num_filters), num_channels, a, int(groups),
                    (int(stride_y or stride), int(stride)),
                    (int(padding if padding_y is None else padding_y), int(padding)),
                    (int(dilation_y or dilation), int(dilation)), bias_attr, param_attr,
                    _drop(layer_attr))
    return LayerOutput(op, _image_out(op), image=op.image, activation=a)


def img_pool(input, pool_size, name=None, num_channels=None, pool_type=None, stride=1,
             padding=0, layer_attr=None, pool_size_y=None, stride_y=None, padding_y=None,
             ceil_mode=True, exclude_mode=None):
    name = name or default_name("pool")
    input = _one(input, name)
    pool_type = pool_type if pool_type is not None else pool_.Max()
    if isinstance(pool_type, type):
        pool_type = pool_type()
    op = image.Pool(name, input, (int(pool_size_y or pool_size), int(pool_size)), num_channels,
                    pool_type, (int(stride_y or stride), int(stride)),
                    (int(padding if padding_y is None else padding_y), int(padding)),
                    bool(ceil_mode), _drop(layer_attr))
    return LayerOutput(op, _image_out(op), image=op.image)


def batch_norm(input, act=None, name=None, img3D=False, num_channels=None, bias_attr=None,
               param_attr=None, layer_attr=None, batch_norm_type=None, epsilon=1e-5,
               moving_average_fraction=0.9, use_global_stats=None, mean_var_names=None):
    name = name or default_name("batch_norm")
    input = _one(input, name)
    a = _act(act, act_.Relu(), name)
    op = image.BatchNorm(name, input, a, num_channels, bias_attr, param_attr, epsilon,
                         moving_average_fraction, use_global_stats, _drop(layer_attr))
    return LayerOutput(op, input.size, image=op.image, activation=a)


# ---- sequences -------------------------------------------------------------------------

def pooling(input, pooling_type=None, name=None, bias_attr=None, agg_level=None, stride=-1,
            layer_attr=None):
    name = name or default_name("seq_pooling")
    input = _one(input, name)
    if stride != -1:
        raise errors.UnsupportedError(f"pooling {name!r}: stride pooling is not supported")
    pooling_type = pooling_type if pooling_type is not None else pool_.Max()
    if isinstance(pooling_type, type):
        pooling_type = pooling_type()
    op = sequence.SeqPool(name, input, pooling_type, _drop(layer_attr))
    return LayerOutput(op, input.size)


def last_seq(input, name=None, agg_level=None, stride=-1, layer_attr=None):
    name = name or default_name("last_seq")
    input = _one(input, name)
    return LayerOutput(sequence.SeqEnd(name, input, True, _drop(layer_attr)), input.size)


def first_seq(input, name=None, agg_level=None, stride=-1, layer_attr=None):
    name = name or default_name("first_seq")
    input = _one(input, name)
    return LayerOutput(sequence.SeqEnd(name, input, False, _drop(layer_attr)), input.size)


def lstmemory(input, name=None, size=None, reverse=False, act=None, gate_act=None,
              state_act=None, bias_attr=None, param_attr=None, layer_attr=None):
    name = name or default_name("lstmemory")
    input = _one(input, name)
    op = sequence.LSTM(name, input, size, reverse, _act(act, act_.Tanh(), name),
                       _act(gate_act, act_.Sigmoid(), name),
                       _act(state_act, act_.Tanh(), name), bias_attr, param_attr,
                       _drop(layer_attr))
    return LayerOutput(op, op.size, is_seq=True)


def grumemory(input, size=None, name=None, reverse=False, act=None, gate_act=None,
              bias_attr=None, param_attr=None, layer_attr=None):
    name = name or default_name("gru")
    input = _one(input, name)
    op = sequence.GRU(name, input, size, reverse, _act(act, act_.Tanh(), name),
                      _act(gate_act, act_.Sigmoid(), name), bias_attr, param_attr,
                      _drop(layer_attr))
    return LayerOutput(op, op.size, is_seq=True)


def context_projection(input, context_len, context_start=None, padding_attr=False, name=None):
    name = name or default_name("context_projection")
    input = _one(input, name)
    if padding_attr not in (False, None):
        raise errors.UnsupportedError("context_projection: trainable padding is not supported")
    op = sequence.Context(name, input, context_len, context_start)
    return LayerOutput(op, input.size * op.len, is_seq=True)


# ---- costs -----------------------------------------------------------------------------

def _cost_inputs(input, label, name):
    for what, x in (("input", input), ("label", label)):
        if not isinstance(x, LayerOutput):
            raise errors.ValueError(f"cost {name!r}: {what} must be a v2 layer, got "
                                    f"{type(x).__name__}")


def classification_cost(input, label, weight=None, name=None, evaluator=None, layer_attr=None,
                        coeff=1.0):
    name = name or default_name("cost")
    _cost_inputs(input, label, name)
    if not isinstance(input.activation, act_.Softmax):
        raise errors.ValueError(
            f"classification_cost {name!r}: its input {input.name!r} must have a Softmax "
            f"activation (act=paddle.activation.Softmax()), as v2 requires; it has "
            f"{input.activation!r}")
    op = cost_ops.CrossEntropy(name, input, label, weight, coeff)
    op.evaluators.append(cost_ops.ClassificationError(input, label))
    return LayerOutput(op, 1)


def cross_entropy_cost(input, label, name=None, coeff=1.0, weight=None, layer_attr=None):
    name = name or default_name("cross_entropy")
    _cost_inputs(input, label, name)
    return LayerOutput(cost_ops.CrossEntropy(name, input, label, weight, coeff), 1)


def square_error_cost(input, label, weight=None, name=None, coeff=1.0, layer_attr=None):
    name = name or default_name("square_error_cost")
    _cost_inputs(input, label, name)
    if input.size != label.size:
        raise errors.ShapeError(f"square_error_cost {name!r}: input {input.name!r} has size "
                                f"{input.size}, label {label.name!r} {label.size}")
    return LayerOutput(cost_ops.SquareError(name, input, label, weight, coeff), 1)


mse_cost = regression_cost = square_error_cost
cross_entropy = cross_entropy_cost


def parse_network(*outputs):
    """v2's parse_network returned the model's protobuf; here, the operators in run order."""
    from .graph import topological
    return topological([o for out in outputs for o in as_list(out)])
