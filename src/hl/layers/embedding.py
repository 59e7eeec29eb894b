"""Embedding: a lookup table of vectors, indexed by integer ids."""
from .. import dtypes as _dt
from .. import errors
from ..autograd import functional as F
from . import _checks, initializers
from .layer import Layer


class Embedding(Layer):
    """``Embedding(num_embeddings, embedding_dim)``: ids of any shape (int32 or int64, each in
    [0, num_embeddings)) -> vectors, shape ids.shape + (embedding_dim,). The table W is
    (num_embeddings, embedding_dim), drawn from N(0, 1) as in PyTorch unless W_init says
    otherwise; an id that appears several times in a batch accumulates its gradients."""

    def __init__(self, num_embeddings, embedding_dim, W_init=None, dtype=None, name=None):
        super().__init__(name)
        self.num_embeddings = _checks.count(num_embeddings, "num_embeddings", "Embedding")
        self.embedding_dim = _checks.count(embedding_dim, "embedding_dim", "Embedding")
        self.W_init = initializers.normal(0.0, 1.0) if W_init is None else W_init
        self.dtype = _dt.float32 if dtype is None else _dt.dtype(dtype)

    def initialize(self, ids):
        self.add_param("W", (self.num_embeddings, self.embedding_dim), self.W_init,
                       self.dtype, getattr(ids, "device", None))

    def forward(self, ids):
        if hasattr(ids, "dtype") and not ids.dtype.is_integer:
            raise errors.DTypeError(f"{self.describe()}: expected integer ids (int32 or int64), "
                                    f"received {ids.dtype.name} with shape {tuple(ids.shape)}; "
                                    f"convert them with ids.astype(hl.int64)")
        try:
            return F.gather(self.W, ids, axis=0)
        except errors.IndexError as e:
            raise errors.IndexError(f"{self.describe()}: ids must lie in [0, "
                                    f"{self.num_embeddings}) ({e})") from None

    def extra_repr(self):
        return f"{self.num_embeddings}, {self.embedding_dim}"


__all__ = ["Embedding"]
