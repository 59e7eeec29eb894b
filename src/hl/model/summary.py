"""Module.summary: Keras 3's model summary, drawn as Keras draws it (the box table rich
renders for keras.Model.summary, its column proportions and widths, the totals lines),
without depending on rich.

Rows are the model's direct sub-layers (``expand_nested`` adds the layers inside them,
indented with Keras's ``└``), named by their path in the model (the prefix of their keys
in state_dict), with the output shape of the call that built them (None for an axis left
unknown by hl.Input) and their parameter count. A functional model also lists its inputs
and, unless it is a plain chain, which outputs each layer reads ("Connected to").
"""
import re
import shutil
import textwrap

import numpy as np

from ..layers.symbolic import UNKNOWN


def print_summary(model, line_length=None, positions=None, print_fn=None,
                  expand_nested=False, show_trainable=False):
    functional = model._is_graph_network
    chain = not functional or _is_chain(model)
    if chain:
        default, positions = 88, positions or [0.45, 0.80, 1.0]
        header, align = ["Layer (type)", "Output Shape", "Param #"], ["<", "<", ">"]
    else:
        default, positions = 108, positions or [0.3, 0.56, 0.74, 1.0]
        header = ["Layer (type)", "Output Shape", "Param #", "Connected to"]
        align = ["<", "<", ">", "<"]
    if show_trainable:
        default += 12
        positions = [p * 0.90 for p in positions] + [1.0]
        header.append("Trainable")
        align.append("^")
    line_length = line_length or min(default, shutil.get_terminal_size().columns - 4)
    widths = _column_widths(positions, line_length)

    rows = []
    if functional:
        rows = _functional_rows(model, chain, show_trainable)
    else:
        for path, layer in model.named_children():
            rows.extend(_layer_rows(layer, path, 0, expand_nested, show_trainable))

    lines = [f'Model: "{model.name or _default_name(model)}"']
    lines.extend(_table(header, align, rows, widths))
    trainable = model.trainable_weights
    frozen = model.non_trainable_weights
    for label, ts in ((" Total params: ", trainable + frozen), (" Trainable params: ", trainable),
                      (" Non-trainable params: ", frozen)):
        count = sum(int(t.size) for t in ts)
        lines.append(f"{label}{count:,} ({_readable(_memory(ts))})")
    text = "\n".join(lines) + "\n"
    if print_fn is None:
        print(text, end="")
    else:
        print_fn(text)


# ---- rows -----------------------------------------------------------------------------------

def _layer_rows(layer, path, level, expand, show_trainable, shapes=None):
    prefix = "   " * level + "└ " if level else ""
    row = [f"{prefix}{path} ({type(layer).__name__})",
           _format_shapes(layer._output_shapes if shapes is None else shapes),
           _params(layer)]
    if show_trainable:
        row.append(("Y" if layer.trainable else "N") if layer.get_states() else "-")
    rows = [row]
    if expand:
        for name, child in layer.named_children():
            rows.extend(_layer_rows(child, f"{path}.{name}", level + 1, expand, show_trainable))
    return rows


def _params(layer):
    if layer._unbuilt_layers():
        return "0 (unbuilt)"
    return f"{layer.count_params():,}"


def _functional_rows(model, chain, show_trainable):
    """Inputs and layers in the order the graph runs them, each layer once (Keras's
    _operations), with its connections."""
    names = {id(layer): local for local, layer in model.named_children()}
    input_names = {}
    for i, t in enumerate(model.inputs):
        input_names[id(t)] = t.name or ("input_layer" if i == 0 else f"input_layer_{i}")
    nodes_of = {}
    for node in model._nodes:
        nodes_of.setdefault(id(node.layer), []).append(node)

    def source(t):
        if t.node is None:
            return f"{input_names[id(t)]}[0][0]"
        layer = t.node.layer
        return f"{names[id(layer)]}[{nodes_of[id(layer)].index(t.node)}][{t.index}]"

    rows, shown_inputs, shown_layers = [], set(), set()

    def input_row(t):
        if id(t) in shown_inputs:
            return
        shown_inputs.add(id(t))
        row = [f"{input_names[id(t)]} (InputLayer)", _format_shapes(t.shape), "0"]
        if not chain:
            row.append("-")
        if show_trainable:
            row.append("-")
        rows.append(row)

    for node in model._nodes:
        layer = node.layer
        if id(layer) in shown_layers or node is not nodes_of[id(layer)][-1]:
            continue  # a layer's row comes at its last call, after all it reads (Keras's)
        for t in (t for n in nodes_of[id(layer)] for t in n.inputs()):
            if t.node is None:
                input_row(t)
        shown_layers.add(id(layer))
        shapes = [tuple(s.shape) for s in node.outputs]
        row = _layer_rows(layer, names[id(layer)], 0, False, False,
                          shapes[0] if len(shapes) == 1 else tuple(shapes))[0]
        if not chain:
            row.append(", ".join(source(t) for n in nodes_of[id(layer)] for t in n.inputs()))
        if show_trainable:
            row.append(("Y" if layer.trainable else "N") if layer.get_states() else "-")
        rows.append(row)
    for t in model.inputs:  # an input that goes straight to the outputs
        input_row(t)
    return rows


def _is_chain(model):
    """Keras's 'sequential-like': one input, every node reading one tensor, the output of the
    node before it, and no layer called twice."""
    if len(model.inputs) != 1 or len(model.outputs) != 1:
        return False
    previous = model.inputs[0]
    layers = set()
    for node in model._nodes:
        ins = node.inputs()
        if len(ins) != 1 or ins[0] is not previous or id(node.layer) in layers or \
                len(node.outputs) != 1:
            return False
        layers.add(id(node.layer))
        previous = node.outputs[0]
    return True


# ---- formatting -----------------------------------------------------------------------------

def _format_shapes(shapes):
    if shapes is None:
        return "?"
    if all(d is None or isinstance(d, int) for d in shapes):
        dims = ["None" if d is None or d == UNKNOWN else str(d) for d in shapes]
        return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
    return "[" + ", ".join(_format_shapes(s) for s in shapes) + "]"


def _default_name(model):
    return "functional" if model._is_graph_network else snake_case(type(model).__name__)


def snake_case(name):
    """Keras's default name for a class: Conv2D -> conv2d, MyBlock -> my_block."""
    return re.sub(r"(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z][a-z])", r"_\1\2", name).lower()


def _memory(tensors):
    seen = {id(t): t for t in tensors}
    return sum(int(t.size) * np.dtype(t.dtype.np).itemsize for t in seen.values())


def _readable(size):
    """Keras's readable_memory_size: powers of 1024, two decimals."""
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if size / 1024 < 1:
            return f"{size:.2f} {unit}"
        size /= 1024
    return f"{size:.2f} PB"


def _column_widths(positions, line_length):
    """The widths (padding included) of each column inside the borders: Keras's widths from
    the relative positions, reduced to fit the line as rich reduces a table that is too wide
    (evenly, rounding half to even)."""
    if positions[-1] <= 1:
        positions = [int(p * line_length) for p in positions]
    widths, current = [], 0
    for p in positions:
        widths.append(p - current + 2)  # rich adds one space of padding each side
        current = p
    excess = sum(widths) - (line_length - len(widths) - 1)
    if excess > 0:
        out, remaining, ratio_left = [], excess, len(widths)
        for w in widths:
            cut = min(w, round(remaining / ratio_left))
            out.append(w - cut)
            remaining -= cut
            ratio_left -= 1
        widths = out
    return widths


def _table(header, align, rows, widths):
    def cells(texts, aligns, left, mid, right):
        wrapped = [textwrap.wrap(t, max(w - 2, 1), break_on_hyphens=False) or [""]
                   for t, w in zip(texts, widths)]
        height = max(len(c) for c in wrapped)
        out = []
        for i in range(height):
            parts = []
            for c, a, w in zip(wrapped, aligns, widths):
                text = c[i] if i < len(c) else ""
                parts.append(" " + format(text, f"{a}{w - 2}") + " ")
            out.append(left + mid.join(parts) + right)
        return out

    def rule(left, fill, mid, right):
        return left + mid.join(fill * w for w in widths) + right

    lines = [rule("┏", "━", "┳", "┓")]
    lines += cells(header, ["<" if a == "<" else a for a in align], "┃", "┃", "┃")
    lines.append(rule("┡", "━", "╇", "┩"))
    for i, row in enumerate(rows):
        if i:
            lines.append(rule("├", "─", "┼", "┤"))
        lines += cells(row, align, "│", "│", "│")
    lines.append(rule("└", "─", "┴", "┘"))
    return lines


__all__ = ["print_summary"]
