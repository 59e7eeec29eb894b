"""Element-wise operators: arithmetic, comparisons and logic (numpy broadcasting), math
functions and activations."""
from . import onnx_op
from ._util import F


# ---- binary arithmetic ------------------------------------------------------------------

@onnx_op("Add")
def add(n, a, b):
    return F.add(a, b)


@onnx_op("Sub")
def sub(n, a, b):
    return F.sub(a, b)


@onnx_op("Mul")
def mul(n, a, b):
    return F.mul(a, b)


@onnx_op("Div")
def div(n, a, b):
    if a.dtype.is_integer:  # ONNX integer division truncates toward zero
        return F.trunc(F.div(F.cast(a, "float64"), F.cast(b, "float64"))).astype(a.dtype)
    return F.div(a, b)


# ---- activations ------------------------------------------------------------------------

@onnx_op("Relu")
def relu(n, x):
    return F.relu(x)
