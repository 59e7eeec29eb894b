"""The pieces every optimiser's update is made of, shared by hl.opt's optimisers and hl.v2's
rules (one family: each rule is a sequence of these, so a piece of arithmetic is written once).

Each piece is a short sequence of in-place ops on the device. A scale (``decay``, ``weight``,
``scale``...) is a Python float or a 0-d tensor (graph mode reads per-step values such as the
learning rate from tensors: hl.graph.StepValues); either gives the same bits, since hl turns a
Python scalar into a 0-d tensor of the operand's dtype. ``scratch`` is a tensor of the
parameter's shape the piece may write its temporary into (None: a new one); the temporary is
returned for the caller to reuse.
"""
from ..autograd import functional as F


def with_l2(grad, param, rate, fresh=False):
    """grad + rate * param, the L2-decayed gradient (a new tensor). Without decay, grad itself,
    or with ``fresh`` a copy (for a caller that writes into the result)."""
    if rate:
        return F.add(grad, F.mul(param, rate))
    return F.mul(grad, 1.0) if fresh else grad


def lerp(avg, x, weight, scratch=None):
    """avg += weight * (x - avg): PyTorch's exponential average (its lerp)."""
    tmp = F.sub(x, avg, out=scratch)
    F.mul(tmp, weight, out=tmp)
    F.add(avg, tmp, out=avg)
    return tmp


def ema(avg, x, decay, scratch=None):
    """avg = decay * avg + (1 - decay) * x: v2's exponential average."""
    F.mul(avg, decay, out=avg)
    tmp = F.mul(x, 1.0 - decay, out=scratch)
    F.add(avg, tmp, out=avg)
    return tmp


def ema_square(avg, grad, decay, scratch=None, weight=None):
    """avg = decay * avg + weight * grad^2, weight = 1 - decay unless given (v2's first batch
    gives 1)."""
    w = 1.0 - decay if weight is None else weight
    F.mul(avg, decay, out=avg)
    sq = F.mul(grad, grad, out=scratch)
    if w != 1.0:
        F.mul(sq, w, out=sq)
    F.add(avg, sq, out=avg)
    return sq


def accumulate_square(total, grad, scratch=None):
    """total += grad^2 (AdaGrad's sum)."""
    sq = F.mul(grad, grad, out=scratch)
    F.add(total, sq, out=total)
    return sq


def heavy_ball(buf, x, momentum):
    """buf = momentum * buf + x."""
    F.mul(buf, momentum, out=buf)
    F.add(buf, x, out=buf)
    return buf


def rms(avg, eps, out=None, correction=None):
    """sqrt(avg) (divided by correction, when given) + eps: the denominator of the adaptive
    rules."""
    d = F.sqrt(avg, out=out)
    if correction is not None:
        F.true_divide(d, correction, out=d)
    F.add(d, eps, out=d)
    return d


def descend(param, direction, scale, out=None):
    """param += scale * direction (scale is minus the step size)."""
    step = F.mul(direction, scale, out=out)
    F.add(param, step, out=param)
