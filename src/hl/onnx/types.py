"""The element types hl and ONNX share: one table, read both ways (import and export)."""
import onnx

from .. import dtypes as _dt

# ONNX element types hl can hold, as numpy dtype names.
ELEM_TYPES = {
    onnx.TensorProto.FLOAT: "float32", onnx.TensorProto.DOUBLE: "float64",
    onnx.TensorProto.FLOAT16: "float16", onnx.TensorProto.BFLOAT16: "bfloat16",
    onnx.TensorProto.INT32: "int32", onnx.TensorProto.INT64: "int64",
    onnx.TensorProto.UINT8: "uint8", onnx.TensorProto.BOOL: "bool",
}
ONNX_TYPES = {name: code for code, name in ELEM_TYPES.items()}  # hl dtype name -> ONNX type


def elem_type_name(t):
    """An ONNX element type's name ("FLOAT", "INT8"), or the number where onnx has none."""
    return onnx.TensorProto.DataType.Name(t) if t in onnx.TensorProto.DataType.values() \
        else str(t)


def onnx_type(dtype):
    """The ONNX element type of an hl dtype (or dtype name)."""
    return ONNX_TYPES[_dt.dtype(dtype).name]
