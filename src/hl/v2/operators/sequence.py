"""Operators over sequences: pooling over the steps, last_seq / first_seq, lstmemory,
grumemory and the context projection of sequence_conv_pool.

A sequence batch is zero-padded at the end (values.Seq). The recurrent layers step over the
padded time axis and keep their state where a sample has no step (mask 0), so a sample's
result is that of its own steps only; in reverse, the padded steps come first and leave the
state at zero, so no reordering is needed."""
import math

import numpy as np

from ... import errors
from ..._tensor import tensor
from ...autograd import functional as F
from ..graph import Operator
from . import params
from .values import Seq


def need_seq(x, layer):
    if not isinstance(x, Seq):
        raise errors.ShapeError(f"layer {layer!r} needs a sequence input (a *_sequence data "
                                f"type or a layer computed from one)")
    return x


class SeqPool(Operator):
    """Max, Avg or Sum over each sequence's steps."""
    kind = "seq_pool"

    def __init__(self, name, input, pooling_type, drop_rate):
        super().__init__(name, [input], None, drop_rate)
        if pooling_type.name not in ("max", "average", "sum"):
            raise errors.ValueError(f"pooling {name!r}: pooling_type must be paddle.pooling."
                                    f"Max(), Avg() or Sum(), got {pooling_type!r}")
        self.type = pooling_type.name

    def compute(self, run, x):
        x = need_seq(x, self.name)
        if self.type == "max":
            fill = F.full_like(x.data, -3.0e38)
            return F.amax(F.where(x.mask > 0.5, x.data, fill), axis=1)
        total = F.sum(x.data * x.mask, axis=1)
        if self.type == "sum":
            return total
        n = tensor(np.maximum(x.lengths, 1).astype(np.float32).reshape(-1, 1))
        return total / n


class SeqEnd(Operator):
    """The first or the last step of each sequence."""
    kind = "seqlastins"

    def __init__(self, name, input, last, drop_rate):
        super().__init__(name, [input], None, drop_rate)
        self.last = last

    def compute(self, run, x):
        x = need_seq(x, self.name)
        if not self.last:
            return x.data[:, 0]
        n, t = x.data.shape[:2]
        pick = np.zeros((n, t, 1), np.float32)
        pick[np.arange(n), np.asarray(x.lengths) - 1, 0] = 1.0
        return F.sum(x.data * tensor(pick), axis=1)


def _state_size(input, size, gates, layer):
    """The recurrent layer's size: its input is the gates*size projection (v2's rule)."""
    size = input.size // gates if size is None else int(size)
    if input.size != gates * size:
        raise errors.ShapeError(f"{layer}: its input must be the {gates}*size projection "
                                f"({gates} * {size} = {gates * size}), got size {input.size}; "
                                f"put an fc of size {gates * size} with a Linear activation "
                                f"in front")
    return size


def _steps(x, reverse):
    t = x.data.shape[1]
    return range(t - 1, -1, -1) if reverse else range(t)


def _carry(m, new, old):
    """new where the step is real, old where it is padding."""
    return old + (new - old) * m


class LSTM(Operator):
    """v2's lstmemory. The input is the 4*size projection, laid out [candidate, input gate,
    forget gate, output gate]; w0 (size, 4*size) is the recurrent weight; wbias holds the 4
    gate biases then the peephole weights of the input, forget and output gates (7*size)."""
    kind = "lstmemory"

    def __init__(self, name, input, size, reverse, act, gate_act, state_act, bias_attr,
                 param_attr, drop_rate):
        super().__init__(name, [input], None, drop_rate)
        size = _state_size(input, size, 4, f"lstmemory {name!r}")
        self.size, self.reverse = size, bool(reverse)
        self.node_act, self.gate_act, self.state_act = act, gate_act, state_act
        # v2 declares the recurrent weight's dims [size, size, 4]: memory (size, 4*size)
        self.params.append(params.weight(name, 0, size * size * 4, (size, size, 4),
                                         param_attr, 1.0 / math.sqrt(size)))
        self.add_bias(params.bias(name, size * 7, (1, size * 7), bias_attr))

    def compute(self, run, x):
        x = need_seq(x, self.name)
        s = self.size
        w = F.reshape(run.param(self.params[0].name), s, 4 * s)
        data = x.data
        if self.bias:
            b = F.reshape(run.param(self.bias), -1)
            data = data + b[:4 * s]
            ci, cf, co = b[4 * s:5 * s], b[5 * s:6 * s], b[6 * s:]
        n = data.shape[0]
        h = c = F.zeros((n, s), dtype=data.dtype)
        outs = [None] * data.shape[1]
        for t in _steps(x, self.reverse):
            g = data[:, t] + F.matmul(h, w)
            a, gi, gf, go = F.split(g, 4, axis=1)
            if self.bias:
                gi, gf = gi + c * ci, gf + c * cf
            c_new = self.node_act(a) * self.gate_act(gi) + c * self.gate_act(gf)
            go = go + c_new * co if self.bias else go
            h_new = self.gate_act(go) * self.state_act(c_new)
            m = x.mask[:, t]
            c, h = _carry(m, c_new, c), _carry(m, h_new, h)
            outs[t] = h
        return Seq(F.stack(outs, axis=1), x.mask, x.lengths)


class GRU(Operator):
    """v2's grumemory. The input is the 3*size projection, laid out [update gate z, reset
    gate r, candidate]; w0 holds the (size, 2*size) gate weight followed by the (size, size)
    candidate weight; h = (1 - z) * h_prev + z * candidate."""
    kind = "gated_recurrent"

    def __init__(self, name, input, size, reverse, act, gate_act, bias_attr, param_attr,
                 drop_rate):
        super().__init__(name, [input], None, drop_rate)
        size = _state_size(input, size, 3, f"grumemory {name!r}")
        self.size, self.reverse = size, bool(reverse)
        self.node_act, self.gate_act = act, gate_act
        self.params.append(params.weight(name, 0, size * size * 3, (size, size * 3),
                                         param_attr, 1.0 / math.sqrt(size)))
        self.add_bias(params.bias(name, size * 3, (1, size * 3), bias_attr))

    def compute(self, run, x):
        x = need_seq(x, self.name)
        s = self.size
        flat_w = F.reshape(run.param(self.params[0].name), -1)
        w_gate = F.reshape(flat_w[:2 * s * s], s, 2 * s)
        w_cand = F.reshape(flat_w[2 * s * s:], s, s)
        data = x.data
        if self.bias:
            data = data + F.reshape(run.param(self.bias), -1)
        h = F.zeros((data.shape[0], s), dtype=data.dtype)
        outs = [None] * data.shape[1]
        for t in _steps(x, self.reverse):
            xt = data[:, t]
            zr = self.gate_act(xt[:, :2 * s] + F.matmul(h, w_gate))
            z, r = zr[:, :s], zr[:, s:]
            cand = self.node_act(xt[:, 2 * s:] + F.matmul(r * h, w_cand))
            h = _carry(x.mask[:, t], h + z * (cand - h), h)
            outs[t] = h
        return Seq(F.stack(outs, axis=1), x.mask, x.lengths)


class Context(Operator):
    """Each step's features next to those of its neighbours: steps start .. start+len-1
    relative to it, zero beyond the sequence (v2's context_projection without trainable
    padding)."""
    kind = "context_projection"

    def __init__(self, name, input, context_len, context_start):
        super().__init__(name, [input])
        self.len = int(context_len)
        self.start = -(self.len - 1) // 2 if context_start is None else int(context_start)

    def compute(self, run, x):
        x = need_seq(x, self.name)
        data = x.data * x.mask  # the padding must read as zero
        t = data.shape[1]
        parts = []
        for j in range(self.len):
            off = self.start + j
            if off == 0:
                parts.append(data)
                continue
            shifted = (F.pad(data[:, off:], [(0, 0), (0, off), (0, 0)]) if off > 0 else
                       F.pad(data[:, :t + off], [(0, 0), (-off, 0), (0, 0)]))
            parts.append(shifted)
        return Seq(F.concat(parts, axis=-1), x.mask, x.lengths)
