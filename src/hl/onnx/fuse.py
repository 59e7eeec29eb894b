"""Rewrites for inference programs, where every weight is a constant.

Conv followed by BatchNormalization becomes one Conv whose weights and bias carry the
normalisation: per output channel k = scale / sqrt(var + eps), W' = W * k and
B' = (B - mean) * k + bias. That is the same arithmetic in another order (results agree to
float rounding), and it removes a pass over every convolution's output.

The rewrite never touches the Graph: it returns replacement nodes, and Program runs them only
for plain runs; a run that asks for intermediates (last_layers, aux_output, all_outputs) runs
the graph as written, so every value keeps its meaning.
"""
import copy

import numpy as np

from .ops._util import const


def conv_batchnorm(graph, constants, folded):
    """({index: replacement Node}, {index of a node to skip}, {name: new constant Tensor})."""
    producer, readers = {}, {}
    for node in graph.nodes:
        for name in node.outputs:
            producer[name] = node
        for name in node.inputs:
            readers[name] = readers.get(name, 0) + 1
    outputs = {o.name for o in graph.outputs}
    replace, skip, new_constants = {}, set(), {}
    for bn in graph.nodes:
        if bn.op_type != "BatchNormalization" or bn.index in folded:
            continue
        if [o for o in bn.outputs if o] != bn.outputs[:1] or bn.attr("training_mode", 0) or \
                bn.attr("spatial", 1) != 1:
            continue
        x = bn.inputs[0]
        conv = producer.get(x)
        if conv is None or conv.op_type != "Conv" or conv.index in folded or \
                readers.get(x) != 1 or x in outputs or conv.index in replace:
            continue
        w = constants.get(conv.inputs[1])
        b = constants.get(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else None
        stats = [constants.get(name) for name in bn.inputs[1:5]]
        if w is None or any(s is None for s in stats) or not w.dtype.is_floating or \
                w.dtype.name not in ("float32", "float64"):
            continue
        scale, bias, mean, var = (s.numpy().astype(np.float64) for s in stats)
        k = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
        wn = w.numpy()
        if k.shape != (wn.shape[0],):
            continue
        shift = (b.numpy().astype(np.float64) if b is not None else 0.0) - mean
        w2 = (wn * k.reshape((-1,) + (1,) * (wn.ndim - 1))).astype(wn.dtype)
        b2 = (shift * k + bias).astype(wn.dtype)
        wname, bname = f"{conv.name}/folded_W", f"{conv.name}/folded_B"
        new_constants[wname] = const(w2, like=w)
        new_constants[bname] = const(b2, like=w)
        fused = copy.copy(conv)
        fused.inputs = [conv.inputs[0], wname, bname]
        fused.outputs = [bn.outputs[0]]
        replace[conv.index] = fused
        skip.add(bn.index)
    return replace, skip, new_constants
