"""The pieces every optimiser's update is made of, shared by hl.opt's optimisers and hl.v2's
rules (one family: each rule is a sequence of these, so a piece of arithmetic is written once),
and the whole updates of hl.opt's optimisers (``sgd``, ``adam``, ``rmsprop``, ``adagrad``) and
of hl.v2's most used rules (``v2_momentum``, ``v2_adam``).

A whole update runs as one call of the core's optimiser kernel (hl.ops.optim_update: one pass
over the parameter, reading it, its gradient and its state once) where the parameter's device
has that kernel, and as its sequence of pieces elsewhere. The kernel performs each element's
float operations in the sequence's order and dtype, so both give the same bits (tested in
tests/opt/test_fused_rules.py); eager steps and replayed plans run the same kernel.

Each piece is a short sequence of in-place ops on the device. A scale (``decay``, ``weight``,
``scale``...) is a Python float or a 0-d tensor (graph mode reads per-step values such as the
learning rate from tensors: hl.graph.StepValues); either gives the same bits, since hl turns a
Python scalar into a 0-d tensor of the operand's dtype. ``scratch`` is a tensor of the
parameter's shape the piece may write its temporary into (None: a new one); the temporary is
returned for the caller to reuse.
"""
from .. import ops
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


# ---- whole updates ---------------------------------------------------------------------


def sgd(param, grad, buf, neg_lr, weight_decay=0.0, momentum=0.0, dampening=0.0,
        nesterov=False, first=False):
    """torch.optim.SGD's update: d = grad (+ L2); with a momentum buffer ``buf`` (None
    without momentum), buf = d on the first update (``first``) and momentum * buf +
    (1 - dampening) * d after; the direction is d + momentum * buf (nesterov) or buf;
    param += neg_lr * direction."""
    if ops.optim_update_available(param, grad):
        flags = ("nesterov",) * bool(nesterov) + ("init",) * bool(first)
        ops.optim_update("sgd", param, grad, [buf] if buf is not None else [], [neg_lr],
                         [weight_decay, momentum, 1.0 - dampening], flags)
        return
    d = with_l2(grad, param, weight_decay)
    if buf is not None:
        if first:
            buf.copy_(d)
        else:
            heavy_ball(buf, d if dampening == 0 else F.mul(d, 1.0 - dampening), momentum)
        d = F.add(d, F.mul(buf, momentum)) if nesterov else buf
    descend(param, d, neg_lr)


def adam(param, grad, m, v, vmax, neg_step_size, bias_correction2_sqrt, beta_1, beta_2, eps,
         weight_decay=0.0, decay_factor=None):
    """torch.optim.Adam's update (AdamW's with ``decay_factor`` = 1 - lr * weight_decay, the
    decoupled decay, then weight_decay is not added to the gradient); vmax is AMSGrad's
    maximum (None without)."""
    decoupled = decay_factor is not None
    if ops.optim_update_available(param, grad):
        values = [neg_step_size, bias_correction2_sqrt] + [decay_factor] * decoupled
        ops.optim_update("adam", param, grad, [m, v] + [vmax] * (vmax is not None), values,
                         [0.0 if decoupled else weight_decay, 1.0 - beta_1, beta_2,
                          1.0 - beta_2, eps], ("decoupled",) * decoupled)
        return
    if decoupled:
        F.mul(param, decay_factor, out=param)
    else:
        grad = with_l2(grad, param, weight_decay)
    tmp = lerp(m, grad, 1.0 - beta_1)
    ema_square(v, grad, beta_2, scratch=tmp)
    if vmax is not None:
        F.maximum(vmax, v, out=vmax)
        v = vmax
    denom = rms(v, eps, out=tmp, correction=bias_correction2_sqrt)
    F.true_divide(m, denom, out=denom)
    descend(param, denom, neg_step_size, out=denom)


def rmsprop(param, grad, square_avg, grad_avg, buf, neg_lr, alpha, eps, weight_decay=0.0,
            momentum=0.0):
    """torch.optim.RMSprop's update; grad_avg is the centered variant's mean (None when not
    centered), buf the momentum buffer (None without momentum)."""
    if ops.optim_update_available(param, grad):
        states = [square_avg] + [t for t in (grad_avg, buf) if t is not None]
        flags = ("centered",) * (grad_avg is not None) + ("momentum",) * (buf is not None)
        ops.optim_update("rmsprop", param, grad, states, [neg_lr],
                         [weight_decay, alpha, 1.0 - alpha, eps, momentum], flags)
        return
    grad = with_l2(grad, param, weight_decay)
    tmp = ema_square(square_avg, grad, alpha)
    if grad_avg is not None:
        lerp(grad_avg, grad, 1.0 - alpha, scratch=tmp)
        F.mul(grad_avg, grad_avg, out=tmp)
        avg = rms(F.sub(square_avg, tmp, out=tmp), eps, out=tmp)
    else:
        avg = rms(square_avg, eps, out=tmp)
    F.true_divide(grad, avg, out=avg)  # g / avg
    if buf is not None:
        avg = heavy_ball(buf, avg, momentum)
    descend(param, avg, neg_lr, out=tmp)


def adagrad(param, grad, total, neg_lr, eps, weight_decay=0.0):
    """torch.optim.Adagrad's update (neg_lr already holds its lr decay)."""
    if ops.optim_update_available(param, grad):
        ops.optim_update("adagrad", param, grad, [total], [neg_lr], [weight_decay, eps])
        return
    grad = with_l2(grad, param, weight_decay)
    tmp = accumulate_square(total, grad)
    denom = rms(total, eps, out=tmp)
    F.true_divide(grad, denom, out=denom)
    descend(param, denom, neg_lr, out=denom)


def v2_momentum(param, grad, mom, neg_lr, decay=0.0, momentum=0.0):
    """PaddlePaddle v2's sgdUpdate: d = grad (+ L2 decay); with a momentum buffer ``mom``,
    mom = momentum * mom + neg_lr * d and param += mom; without, param += neg_lr * d."""
    if mom is None:
        sgd(param, grad, None, neg_lr, decay)
        return
    if ops.optim_update_available(param, grad):
        ops.optim_update("v2_momentum", param, grad, [mom], [neg_lr], [decay, momentum])
        return
    direction = with_l2(grad, param, decay, fresh=True)
    F.mul(direction, neg_lr, out=direction)
    heavy_ball(mom, direction, momentum)
    F.add(param, mom, out=param)


def v2_adam(param, grad, m, v, neg_alpha, beta1, beta2, eps):
    """v2's Adam: m = beta1 m + (1 - beta1) g; v = beta2 v + (1 - beta2) g^2;
    param += neg_alpha * m / (sqrt(v) + eps) (neg_alpha holds both bias corrections)."""
    if ops.optim_update_available(param, grad):
        ops.optim_update("v2_adam", param, grad, [m, v], [neg_alpha],
                         [beta1, 1.0 - beta1, beta2, 1.0 - beta2, eps])
        return
    tmp = ema(m, grad, beta1)
    ema_square(v, grad, beta2, scratch=tmp)
    denom = rms(v, eps, out=tmp)
    F.true_divide(m, denom, out=denom)
    descend(param, denom, neg_alpha, out=denom)
