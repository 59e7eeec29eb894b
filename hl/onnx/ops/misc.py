"""misc"""
from . import onnx_op  # noqa: F401
