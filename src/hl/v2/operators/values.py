"""What flows along the graph's edges at run time.

A sample that is a vector is a row of a 2-D tensor (N, size); a feature map is (N, C, H, W)
(v2 kept it flat; the layout in memory is the same); a sequence is a ``Seq``: a zero-padded
(N, T, size) tensor with a (N, T, 1) mask of the real steps, so the steps of one batch run
together and the pooling and recurrent layers ignore the padding."""
import collections

from ...autograd import functional as F

Seq = collections.namedtuple("Seq", "data mask lengths")


def flat(x):
    """A non-sequence value as (N, size)."""
    return F.reshape(x, x.shape[0], -1) if x.ndim != 2 else x


def map_data(fn, x):
    """fn applied to a value's tensor, keeping a sequence's mask."""
    if isinstance(x, Seq):
        return Seq(fn(x.data), x.mask, x.lengths)
    return fn(x)


def same_steps(values, layer):
    """The one mask a layer's sequence inputs share (v2 adds step by step, so their lengths
    must agree); None when no input is a sequence."""
    from ... import errors
    seqs = [v for v in values if isinstance(v, Seq)]
    if not seqs:
        return None
    if len(seqs) != len(values):
        raise errors.ShapeError(f"layer {layer!r}: mixes sequence and non-sequence inputs; v2 "
                                f"layers combine values of the same kind")
    first = seqs[0]
    for s in seqs[1:]:
        if tuple(s.lengths) != tuple(first.lengths):
            raise errors.ShapeError(f"layer {layer!r}: its sequence inputs have different "
                                    f"lengths ({list(first.lengths)[:5]} vs "
                                    f"{list(s.lengths)[:5]})")
    return first
