"""paddle.networks: v2's composite layers, built from paddle.layer calls with v2's names."""
from . import activation as act_
from . import layer
from .attr import ExtraLayerAttribute
from .graph import default_name

__all__ = ["simple_img_conv_pool", "img_conv_group", "simple_lstm", "sequence_conv_pool"]


def simple_img_conv_pool(input, filter_size, num_filters, pool_size, name=None, pool_type=None,
                         act=None, groups=1, conv_stride=1, conv_padding=0, bias_attr=None,
                         num_channel=None, param_attr=None, shared_bias=True,
                         conv_layer_attr=None, pool_stride=1, pool_padding=0,
                         pool_layer_attr=None):
    """img_conv then img_pool, named ``<name>_conv`` and ``<name>_pool``."""
    name = name or default_name("conv_pool")
    conv = layer.img_conv(input, filter_size, num_filters, name=f"{name}_conv",
                          num_channels=num_channel, act=act, groups=groups, stride=conv_stride,
                          padding=conv_padding, bias_attr=bias_attr, param_attr=param_attr,
                          shared_biases=shared_bias, layer_attr=conv_layer_attr)
    return layer.img_pool(conv, pool_size, name=f"{name}_pool", pool_type=pool_type,
                          stride=pool_stride, padding=pool_padding, layer_attr=pool_layer_attr)


def _per_conv(value, n):
    return list(value) if isinstance(value, (list, tuple)) else [value] * n


def img_conv_group(input, conv_num_filter, pool_size, num_channels=None, conv_padding=1,
                   conv_filter_size=3, conv_act=None, conv_with_batchnorm=False,
                   conv_batchnorm_drop_rate=0, pool_stride=1, pool_type=None,
                   param_attr=None):
    """A stack of convolutions (each optionally followed by batch norm, whose activation is
    then conv_act while the convolution stays linear), then one pooling layer (VGG's
    block)."""
    n = len(conv_num_filter)
    pads, sizes = _per_conv(conv_padding, n), _per_conv(conv_filter_size, n)
    acts, with_bn = _per_conv(conv_act, n), _per_conv(conv_with_batchnorm, n)
    drops = _per_conv(conv_batchnorm_drop_rate, n)
    x = input
    for i in range(n):
        x = layer.img_conv(x, sizes[i], conv_num_filter[i], padding=pads[i],
                           num_channels=num_channels if i == 0 else None,
                           act=act_.Linear() if with_bn[i] else acts[i], param_attr=param_attr)
        if with_bn[i]:
            extra = ExtraLayerAttribute(drop_rate=drops[i]) if abs(drops[i]) >= 1e-5 else None
            x = layer.batch_norm(x, act=acts[i], layer_attr=extra)
    return layer.img_pool(x, pool_size, stride=pool_stride, pool_type=pool_type)


def simple_lstm(input, size, name=None, reverse=False, mat_param_attr=None,
                bias_param_attr=None, inner_param_attr=None, act=None, gate_act=None,
                state_act=None, mixed_layer_attr=None, lstm_cell_attr=None):
    """The 4*size projection (``lstm_transform_<name>``, no bias) and an lstmemory."""
    name = name or default_name("lstm")
    proj = layer.fc(input, size * 4, act=act_.Identity(), name=f"lstm_transform_{name}",
                    param_attr=mat_param_attr, bias_attr=False, layer_attr=mixed_layer_attr)
    return layer.lstmemory(proj, name=name, reverse=reverse, bias_attr=bias_param_attr,
                           param_attr=inner_param_attr, act=act, gate_act=gate_act,
                           state_act=state_act, layer_attr=lstm_cell_attr)


def sequence_conv_pool(input, context_len, hidden_size, name=None, context_start=None,
                       pool_type=None, context_proj_layer_name=None,
                       context_proj_param_attr=False, fc_layer_name=None, fc_param_attr=None,
                       fc_bias_attr=None, fc_act=None, pool_bias_attr=None, fc_attr=None,
                       context_attr=None, pool_attr=None):
    """A text convolution: each step with its context_len neighbours, an fc of hidden_size,
    then pooling over the sequence."""
    name = name or default_name("sequence_conv_pooling")
    proj = layer.context_projection(input, context_len, context_start,
                                    context_proj_param_attr,
                                    name=context_proj_layer_name or f"{name}_conv_proj")
    hidden = layer.fc(proj, hidden_size, act=fc_act, name=fc_layer_name or f"{name}_conv_fc",
                      param_attr=fc_param_attr, bias_attr=fc_bias_attr, layer_attr=fc_attr)
    return layer.pooling(hidden, pooling_type=pool_type, name=name, bias_attr=pool_bias_attr,
                         layer_attr=pool_attr)
