"""hl.layers: Layer (lazy parameters, hierarchical names, params and states, Keras's and
PyTorch's layer APIs) and the standard layers, one family per module.

``hl.layers.Sequential`` is hl.model.Sequential, a Module: hl.model installs it here when hl
is imported (layers never import the model layer above them; see docs/design-notes.md).
"""
from . import activations, initializers
from .activation import (ELU, GELU, SELU, Activation, HardSigmoid, HardSwish, LeakyReLU,
                         LogSoftmax, Mish, ReLU, Sigmoid, SiLU, Softmax, Softplus, Swish, Tanh)
from .attention import MultiHeadAttention
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .core import Dropout, Flatten, Identity, Reshape
from .embedding import Embedding
from .layer import Layer, LoadReport
from .linear import Dense, Linear
from .merge import Add, Concatenate, Lambda, Multiply
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .pool import AvgPool1d, AvgPool2d, GlobalAvgPool2d, GlobalMaxPool2d, MaxPool1d, MaxPool2d
from .recurrent import GRU, LSTM, RNN
from .symbolic import Input, SymbolicTensor
from ..losses import MSELoss as MeanSquareError, SoftmaxCrossEntropy  # SINGA keeps losses here

SoftMaxCrossEntropy = SoftmaxCrossEntropy  # SINGA's spelling

__all__ = ["Layer", "LoadReport", "Sequential", "Input", "SymbolicTensor", "activations",
           "initializers", "Linear", "Dense", "Conv1d", "Conv2d", "ConvTranspose1d",
           "ConvTranspose2d", "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d",
           "GlobalAvgPool2d", "GlobalMaxPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
           "Identity", "Flatten", "Reshape", "Dropout", "Embedding", "Activation",
           "ReLU", "LeakyReLU", "ELU", "SELU", "GELU", "Sigmoid", "Tanh", "Softplus", "SiLU",
           "Swish", "Mish", "HardSigmoid", "HardSwish", "Softmax", "LogSoftmax",
           "RNN", "LSTM", "GRU", "MultiHeadAttention", "Concatenate", "Add", "Multiply",
           "Lambda", "SoftmaxCrossEntropy", "SoftMaxCrossEntropy", "MeanSquareError"]
