"""The ONNX import table: one handler per operator type, grouped by family.

A handler turns one ONNX node into hl ops:

    @onnx_op("LeakyRelu")
    def leaky_relu(n, x):
        return F.leaky_relu(x, n.attr("alpha", 0.01))

It takes the node (``n``: attributes, opset, training flag, host reads; see ``node.Node``)
and the node's inputs as hl tensors (None for an omitted optional input), and returns a
tensor, or a tuple for a node with several outputs (None for one it does not produce).
It computes with ``hl.autograd.functional`` so the same code serves inference and training.

Where an operator changed between opsets (an attribute that became an input), the handler
reads ``n.opset``, or two handlers are registered with ``since=``: the newest one whose
``since`` is at most the model's opset runs. To add an operator: write its handler in the
family module that fits, with a test in tests/onnx, and add its export rule (export.py).
"""
IMPORTERS = {}  # (domain, op_type) -> [(since_version, handler), ...], newest first

DEFAULT_DOMAINS = ("", "ai.onnx")


def onnx_op(*op_types, domain="", since=1):
    """Registers the decorated function as the handler of ``op_types`` from opset ``since``."""
    def register(fn):
        for op_type in op_types:
            entries = IMPORTERS.setdefault((domain, op_type), [])
            entries.append((since, fn))
            entries.sort(key=lambda e: -e[0])
        return fn
    return register


def lookup(domain, op_type, opset):
    """The handler for ``op_type`` at ``opset``, or None where hl has none."""
    if domain in DEFAULT_DOMAINS:
        domain = ""
    for since, fn in IMPORTERS.get((domain, op_type), ()):
        if since <= opset:
            return fn
    return None


def supported_ops(domain=""):
    """The sorted operator types hl imports from ``domain``."""
    return sorted(t for d, t in IMPORTERS if d == domain)


# The families register their handlers when imported.
from . import elementwise, nn, reduce, shape, index, rnn, misc  # noqa: E402,F401
