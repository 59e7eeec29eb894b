"""shape"""
from . import onnx_op
from ._util import F


@onnx_op("Flatten")
def flatten(n, x):
    axis = n.attr("axis", 1)
    axis = axis % x.ndim if x.ndim else 0
    lead = 1
    for d in x.shape[:axis]:
        lead *= d
    return F.reshape(x, lead, -1) if x.size else F.reshape(x, lead, 0)
