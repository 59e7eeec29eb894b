"""The ONNX op families: each module holds one family's import handlers (ONNX node -> hl ops)
and export rules (hl Function -> ONNX nodes) side by side, registered in hl/onnx/registry.py.

    arith      Add, Sub, Mul, Div, Mod, Pow, Sum/Mean/Max/Min, comparisons, logic, bitwise
    unary      math functions and activations (SAME: the ops whose names map themselves), Clip
    cast       Cast, CastLike, Identity, QuantizeLinear, DequantizeLinear
    linalg     Gemm, MatMul, MatMulInteger, Det
    conv       Conv, ConvInteger, ConvTranspose
    pool       MaxPool, AveragePool, LpPool, global pools, MaxUnpool
    norm       BatchNormalization, LayerNormalization, GroupNormalization, ...
    softmax    Softmax, LogSoftmax, Hardmax, the losses, Dropout
    resize     Resize, Upsample
    reduce     Reduce*, ArgMax/ArgMin's export, cumulative sums
    shape      Reshape, Flatten, Squeeze, Unsqueeze, Transpose, Expand, Tile, ...
    slicing    Concat, Split, Slice, Pad, CenterCropPad, Col2Im, x[...]
    creation   Shape, Size, Constant, ConstantOfShape, Range, EyeLike, Trilu
    index      Gather*, Scatter*, OneHot, NonZero, TopK, ArgMax, Unique, CumSum, Einsum
    rnn        LSTM, GRU, RNN
    attention  Attention, RMSNormalization, RotaryEmbedding, SwiGLU, ...
    random     RandomNormal, RandomUniform, Bernoulli, Multinomial
    signal     window functions, DFT, STFT

The operators whose attributes are graphs (If, Loop, Scan, FlexAttention) run subgraphs with
the program's runner, so they live above it, in hl/onnx/control.py. Shared helpers: _util.py
(sizes, constants, half precision), _checks.py (dtype checks), _spatial.py (conv/pool geometry).
"""
from ..registry import lookup, onnx_op, rule_for, supported_ops
from . import (arith, attention, cast, conv, creation, index, linalg, norm, pool,  # noqa: F401
               random, reduce, resize, rnn, shape, signal, slicing, softmax, unary)

__all__ = ["lookup", "onnx_op", "rule_for", "supported_ops"]
