"""Common subexpressions of an inference program, computed once (prepare()).

Exporters repeat work per layer that depends only on the model's inputs: BERT's exports build
the attention mask (Unsqueeze, Cast, Sub from 1, Mul by -10000 or Where) once per layer, 12
identical chains over the same input. Two nodes compute the same values when they have the
same op, domain and opset, the same attributes and the same inputs, where an input is the same
when it is the same value (after earlier merges), or a small constant equal to the other's in
dtype, shape and every byte (exporters give each layer's copy of -10000 its own name). The
second such node is dropped and its readers read the first one's outputs.

Never merged: ops that are not functions of their inputs (random generators, Dropout: the
program's NO_FOLD set), nodes with subgraphs (their bodies may hold such ops), ops outside the
default domain (their semantics are not ONNX's to vouch for), and nodes whose outputs are
graph outputs or read by a subgraph by name (those names must stay). Attributes compare by
value, NaN never equal (such a node is simply not merged). Large constants compare by name:
their bytes are not read for this (weights are not hashed at prepare()).
"""
import copy
import math

import numpy as np

from .graph import Graph, _subgraph_free_names

# Ops whose outputs are not functions of their inputs (random draws, Dropout's mask) or of
# the mode (BatchNormalization): never folded into constants, never merged.
NO_FOLD = {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
           "Multinomial", "Bernoulli", "Dropout", "BatchNormalization"}

# Constants up to this many bytes are compared by value.
SMALL_CONSTANT = 4096


def merge_common_nodes(nodes, graph, constants, device, skip):
    """``nodes`` with later duplicates dropped and their readers reading the first node's
    outputs, or None when no two nodes compute the same thing. ``skip``: nodes that do not
    run (folded: their outputs are constants)."""
    keep_names = {o.name for o in graph.outputs}
    for node in nodes:
        if any(isinstance(v, Graph) for v in node.attrs.values()):
            keep_names |= _subgraph_free_names(node.proto)
    alias, seen, out, merged = {}, {}, [], False
    const_keys = {}
    for node in nodes:
        if node.index in skip:
            out.append(node)
            continue
        inputs = [alias.get(name, name) for name in node.inputs]
        key = _key(node, inputs, constants, const_keys)
        first = seen.get(key) if key is not None else None
        if first is not None and len(first.outputs) == len(node.outputs) and \
                not any(o in keep_names for o in node.outputs if o):
            for mine, theirs in zip(node.outputs, first.outputs):
                if mine:
                    alias[mine] = theirs
            merged = True
            continue
        if inputs != node.inputs:
            node = copy.copy(node)
            node.inputs = inputs
        if key is not None:
            seen.setdefault(key, node)
        out.append(node)
    return out if merged else None


def _key(node, inputs, constants, const_keys):
    """What makes two nodes compute the same values, hashable; None: never merged."""
    if node.op_type in NO_FOLD or node.domain not in ("", "ai.onnx") or not node.outputs \
            or any(isinstance(v, Graph) for v in node.attrs.values()):
        return None
    attrs = tuple(sorted((name, _value_key(v)) for name, v in node.attrs.items()))
    ins = tuple(_input_key(name, constants, const_keys) for name in inputs)
    # which outputs are asked for changes what some ops compute (Dropout's mask, TopK...)
    wanted = tuple(bool(o) for o in node.outputs)
    return node.op_type, node.domain, node.opset, attrs, ins, wanted


def _input_key(name, constants, const_keys):
    if not name or name not in constants:
        return name
    key = const_keys.get(name)
    if key is None:
        t = constants[name]
        if t.numel() * t.dtype.itemsize <= SMALL_CONSTANT:
            a = np.ascontiguousarray(t.numpy())
            key = ("const", a.dtype.str, a.shape, a.tobytes())
        else:
            key = ("const-name", name)
        const_keys[name] = key
    return key


def _value_key(v):
    """An attribute value as a hashable key that equals another's only for equal values."""
    if isinstance(v, np.ndarray):
        return ("array", v.dtype.str, v.shape, np.ascontiguousarray(v).tobytes())
    if isinstance(v, (list, tuple)):
        return ("seq",) + tuple(_value_key(x) for x in v)
    if isinstance(v, float):
        # NaN equals nothing; -0.0 is not 0.0 here (1 / x, copysign tell them apart)
        return ("float", v, math.copysign(1.0, v)) if v == v else ("nan", id(v))
    if isinstance(v, (bool, int, str, bytes)):
        return (type(v).__name__, v)
    return ("object", id(v))  # anything else (a sparse or graph value): only itself
