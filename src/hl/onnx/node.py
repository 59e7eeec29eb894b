"""Node: one ONNX node as its handler sees it.

Attributes are decoded once, at import (strings to str, tensors to numpy, graphs kept as
GraphProto for If/Loop/Scan); the handler reads them with ``n.attr(name, default)``. Inputs
that are sizes, axes or indices (Reshape's shape, Slice's starts) arrive as small integer
tensors: ``n.ints(t)`` reads them on the host, checking they are integers.
"""
import numpy as np
import onnx
from onnx import helper, numpy_helper

from .. import errors


class Node:
    def __init__(self, proto, index, opset, handler=None):
        self.proto = proto
        self.index = index                 # position in topological order
        self.op_type = proto.op_type
        self.domain = proto.domain or ""
        self.name = proto.name or f"{proto.op_type}_{index}"
        self.inputs = list(proto.input)    # "" marks an omitted optional input
        self.outputs = list(proto.output)
        self.opset = opset                 # the model's opset for this node's domain
        self.handler = handler
        self.training = False              # set by the runner for each run
        self.graph = None                  # the Graph this node belongs to (If/Loop read it)
        self.device = None                 # where the program runs (set by Program): for
        #                                    nodes with no input to take a device from
        self.attrs = {a.name: _decode(a, self) for a in proto.attribute}

    def attr(self, name, default=None):
        return self.attrs.get(name, default)

    def has(self, name):
        return name in self.attrs

    @property
    def noutputs(self):
        """How many outputs the model asks for (trailing optional ones may be absent)."""
        return len(self.outputs)

    def wants(self, i):
        """Does the model use output i (present and named)?"""
        return i < len(self.outputs) and self.outputs[i] != ""

    def describe(self):
        return f"ONNX node '{self.name}' ({self.op_type}, opset {self.opset})"

    def error(self, message, kind=None):
        """An hl error naming this node; raise it."""
        return (kind or errors.ONNXError)(f"{self.describe()}: {message}")

    # ---- reading inputs on the host ------------------------------------------------------

    def host(self, t):
        """The tensor's values as a numpy array (None stays None)."""
        if t is None:
            return None
        return t.numpy() if hasattr(t, "numpy") else np.asarray(t)

    def ints(self, t, what="input"):
        """An integer tensor (sizes, axes, indices) as a list of Python ints."""
        if t is None:
            return None
        a = self.host(t)
        if a.dtype.kind not in "iub":
            raise self.error(f"{what} must hold integers, got {a.dtype}", errors.DTypeError)
        return [int(v) for v in a.reshape(-1)]

    def floats(self, t):
        if t is None:
            return None
        return [float(v) for v in self.host(t).reshape(-1)]

    def scalar(self, t, default=None):
        """A one-element tensor as a Python number (default where the input is omitted)."""
        if t is None:
            return default
        a = self.host(t)
        if a.size != 1:
            raise self.error(f"expected a single value, got shape {a.shape}", errors.ShapeError)
        return a.reshape(-1)[0].item()

    def __repr__(self):
        return f"<Node {self.describe()}>"


def _decode(a, node):
    """An attribute's value; a file's malformed one (bad UTF-8, tensor data that does not fit
    its dims, a sparse tensor too big to densify) is an ONNXError naming the node."""
    try:
        value = helper.get_attribute_value(a)
        if a.type == onnx.AttributeProto.STRING:
            return value.decode("utf-8")
        if a.type == onnx.AttributeProto.STRINGS:
            return [v.decode("utf-8") for v in value]
        if a.type == onnx.AttributeProto.TENSOR:
            return numpy_helper.to_array(value)
        if a.type == onnx.AttributeProto.SPARSE_TENSOR:
            from .ops._util import MAX_BYTES
            dims = [int(d) for d in value.dims]
            n = 1
            for d in dims:
                n *= max(d, 0)
            if n * 8 > MAX_BYTES or any(d < 0 for d in dims):
                raise errors.ONNXError(f"sparse dims {dims} exceed the tensor size limit")
        return _plain(a, value)
    except errors.HLError:
        raise
    except (UnicodeError, ValueError, TypeError, IndexError, KeyError, OverflowError,
            MemoryError) as e:
        raise errors.ONNXError(f"ONNX node {node.describe()}: attribute {a.name!r:.80} is "
                               f"malformed ({type(e).__name__}: {str(e)[:200]})") from None


def _plain(a, value):
    if a.type in (onnx.AttributeProto.INTS, onnx.AttributeProto.FLOATS):
        return list(value)
    if a.type == onnx.AttributeProto.SPARSE_TENSOR:
        return _sparse_to_dense(value)
    return value


def _sparse_to_dense(sp):
    values = numpy_helper.to_array(sp.values)
    idx = numpy_helper.to_array(sp.indices)
    dims = tuple(sp.dims)
    out = np.zeros(int(np.prod(dims)), dtype=values.dtype)
    if idx.ndim == 2:  # coordinates
        idx = np.ravel_multi_index(tuple(idx.T), dims)
    out[idx.reshape(-1)] = values.reshape(-1)
    return out.reshape(dims)
