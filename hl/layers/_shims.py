"""Stand-ins for autograd functions that have not landed yet; delete each once it has."""
from ..autograd import functional as F


def dropout(x, p):
    """Inverted dropout with drop probability p (callers only call it in training)."""
    if hasattr(F, "dropout"):
        return F.dropout(x, p)
    # Until the recording dropout lands: a Bernoulli keep-mask (no gradient of its own) times x.
    keep = F.bernoulli(*x.shape, p=1.0 - p, dtype=x.dtype, device=x.device)
    return x * (keep * (1.0 / (1.0 - p)))
