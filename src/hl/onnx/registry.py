"""hl.onnx's op tables: ONNX operator -> import handler, hl Function class -> export rule.

Both directions of an op family are written side by side in one module of hl/onnx/ops/ and
registered here when that module is imported (hl/onnx/ops/__init__.py imports them all).
This module imports nothing of hl.onnx, so every family, the graph and the exporter can
import it without a cycle.

Importing: a handler turns one ONNX node into hl ops::

    @onnx_op("LeakyRelu")
    def leaky_relu(n, x):
        return F.leaky_relu(x, n.attr("alpha", 0.01))

It takes the node (``n``: attributes, opset, training flag, host reads; see node.Node) and the
node's inputs as hl tensors (None for an omitted optional input), and returns a tensor, or a
tuple for a node with several outputs (None for one it does not produce). It computes with
``hl.autograd.functional`` so the same code serves inference and training. Where an operator
changed between opsets, the handler reads ``n.opset``, or several handlers are registered
with ``since=``: the newest one whose ``since`` is at most the model's opset runs.

Exporting: a rule writes one hl Function call as ONNX nodes::

    @exports(Softmax, LogSoftmax)
    def export_softmax(g, f, xs, ys): ...

``g`` is the export Builder (``g.op``, ``g.const``, ``g.ints``, ``g.reduce``, ``g.reshape``,
``g.opset``...; hl/onnx/export/builder.py), ``f`` the Function's arguments as they were
before forward (``f.axis``, ``f.eps``), ``xs`` the input values and ``ys`` the output values
(``.name``, ``.shape``, ``.dtype``, ``.sig``; None for an omitted input). The rule must
produce each ``ys[i].name``.
"""
IMPORTERS = {}  # (domain, op_type) -> [(since_version, handler), ...], newest first
EXPORTERS = {}  # hl Function class -> export rule

DEFAULT_DOMAINS = ("", "ai.onnx")


def onnx_op(*op_types, domain="", since=1):
    """Registers the decorated function as the import handler of ``op_types`` from opset
    ``since``."""
    def register(fn):
        for op_type in op_types:
            entries = IMPORTERS.setdefault((domain, op_type), [])
            entries.append((since, fn))
            entries.sort(key=lambda e: -e[0])
        return fn
    return register


def exports(*classes):
    """Registers the decorated function as the export rule of these Function classes."""
    def register(rule):
        for c in classes:
            EXPORTERS[c] = rule
        return rule
    return register


def lookup(domain, op_type, opset):
    """The import handler for ``op_type`` at ``opset``, or None where hl has none."""
    if domain in DEFAULT_DOMAINS:
        domain = ""
    for since, fn in IMPORTERS.get((domain, op_type), ()):
        if since <= opset:
            return fn
    return None


def rule_for(cls):
    """The export rule for a Function class (or the nearest base class that has one)."""
    for c in cls.__mro__:
        if c in EXPORTERS:
            return EXPORTERS[c]
    return None


def supported_ops(domain=""):
    """The sorted operator types hl imports from ``domain``."""
    return sorted(t for d, t in IMPORTERS if d == domain)
