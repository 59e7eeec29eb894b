"""paddle.data_type: what a data layer's field holds per sample."""
from .. import errors


class InputType:
    """``kind``: 'dense', 'index' (integers below ``dim``), 'sparse_binary' (a list of
    indices set to 1), 'sparse' (a list of (index, value)); ``seq``: a list of those per
    sample, one per time step."""

    def __init__(self, dim, kind, seq=False):
        if isinstance(dim, bool) or int(dim) != dim or dim <= 0:
            raise errors.ValueError(f"paddle.data_type: the dimension must be a positive "
                                    f"integer, got {dim!r}")
        self.dim, self.kind, self.seq = int(dim), kind, bool(seq)

    @property
    def type(self):
        return self.kind

    def __repr__(self):
        return f"InputType(dim={self.dim}, kind={self.kind!r}, seq={self.seq})"


def dense_vector(dim, seq_type=0):
    return InputType(dim, "dense", seq_type != 0)


def dense_vector_sequence(dim):
    return InputType(dim, "dense", True)


def integer_value(value_range, seq_type=0):
    return InputType(value_range, "index", seq_type != 0)


def integer_value_sequence(value_range):
    return InputType(value_range, "index", True)


def sparse_binary_vector(dim, seq_type=0):
    return InputType(dim, "sparse_binary", seq_type != 0)


def sparse_vector(dim, seq_type=0):
    return InputType(dim, "sparse", seq_type != 0)


def sparse_binary_vector_sequence(dim):
    return InputType(dim, "sparse_binary", True)


def sparse_vector_sequence(dim):
    return InputType(dim, "sparse", True)


dense_array = dense_vector

__all__ = ["InputType", "dense_vector", "dense_vector_sequence", "integer_value",
           "integer_value_sequence", "sparse_binary_vector", "sparse_vector",
           "sparse_binary_vector_sequence", "sparse_vector_sequence", "dense_array"]
