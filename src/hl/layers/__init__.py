"""hl.layers: Layer (lazy parameters, hierarchical names, params and states) and the
standard layers, one family per module."""
from . import initializers
from .activation import (ELU, GELU, SELU, HardSigmoid, HardSwish, LeakyReLU, LogSoftmax, Mish,
                         ReLU, Sigmoid, SiLU, Softmax, Softplus, Swish, Tanh)
from .attention import MultiHeadAttention
from .containers import Sequential
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .core import Dropout, Flatten, Identity, Reshape
from .embedding import Embedding
from .layer import Layer, LoadReport
from .linear import Linear
from .normalization import BatchNorm1d, BatchNorm2d, LayerNorm
from .pool import AvgPool1d, AvgPool2d, GlobalAvgPool2d, GlobalMaxPool2d, MaxPool1d, MaxPool2d
from .recurrent import GRU, LSTM, RNN
from ..losses import MSELoss as MeanSquareError, SoftmaxCrossEntropy  # SINGA keeps losses here

SoftMaxCrossEntropy = SoftmaxCrossEntropy  # SINGA's spelling

__all__ = ["Layer", "LoadReport", "Sequential", "initializers",
           "Linear", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "GlobalAvgPool2d",
           "GlobalMaxPool2d", "BatchNorm1d", "BatchNorm2d", "LayerNorm",
           "Identity", "Flatten", "Reshape", "Dropout", "Embedding",
           "ReLU", "LeakyReLU", "ELU", "SELU", "GELU", "Sigmoid", "Tanh", "Softplus", "SiLU",
           "Swish", "Mish", "HardSigmoid", "HardSwish", "Softmax", "LogSoftmax",
           "RNN", "LSTM", "GRU", "MultiHeadAttention", "SoftmaxCrossEntropy",
           "SoftMaxCrossEntropy", "MeanSquareError"]
