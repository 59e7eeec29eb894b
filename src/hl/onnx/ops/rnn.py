"""Recurrent operators: LSTM, GRU and RNN, every opset (layout arrived in 14).

Each direction multiplies the whole input sequence by W once, up front, then loops over the
time steps with one h @ R^T per step, so gradients flow through ordinary hl ops. With
sequence_lens, a batch entry stops updating its state after its last step and its outputs
there are zero; the reverse direction runs each entry's own valid prefix backwards.
"""

import numpy as np

from ... import errors
from ..registry import onnx_op
from ._util import const, F, via_float32


# ---- activations --------------------------------------------------------------------------
# name -> (function of (x, alpha, beta), default alpha, default beta); None: not taken. The
# activation_alpha/beta lists are consumed in order by the activations that take them.

def _thresholded_relu(x, a, b):
    return x * F.cast(F.gt(x, a), x.dtype)


_ACTIVATIONS = {
    "relu": (lambda x, a, b: F.relu(x), None, None),
    "tanh": (lambda x, a, b: F.tanh(x), None, None),
    "sigmoid": (lambda x, a, b: F.sigmoid(x), None, None),
    "affine": (lambda x, a, b: x * a + b, 1.0, 0.0),
    "leakyrelu": (lambda x, a, b: F.leaky_relu(x, a), 0.01, None),
    "thresholdedrelu": (_thresholded_relu, 1.0, None),
    "scaledtanh": (lambda x, a, b: F.tanh(x * b) * a, 1.0, 1.0),
    "hardsigmoid": (lambda x, a, b: F.hard_sigmoid(x, a, b), 0.2, 0.5),
    "elu": (lambda x, a, b: F.elu(x, a), 1.0, None),
    "softsign": (lambda x, a, b: F.softsign(x), None, None),
    "softplus": (lambda x, a, b: F.softplus(x), None, None),
}


def _activations(n, defaults, num_dir):
    """The node's activation functions, a list per direction."""
    names = n.attr("activations") or defaults * num_dir
    if len(names) == len(defaults) and num_dir == 2:
        names = list(names) * 2  # one set given for both directions
    if len(names) != len(defaults) * num_dir:
        raise n.error(f"activations {names} must list {len(defaults)} functions per direction "
                      f"({num_dir} direction(s))", errors.ValueError)
    alphas = list(n.attr("activation_alpha", []))
    betas = list(n.attr("activation_beta", []))
    fns = []
    for name in names:
        spec = _ACTIVATIONS.get(name.lower())
        if spec is None:
            raise n.error(f"activation {name!r} is not one of {sorted(_ACTIVATIONS)}",
                          errors.UnsupportedError)
        fn, a, b = spec
        if a is not None and alphas:
            a = alphas.pop(0)
        if b is not None and betas:
            b = betas.pop(0)
        fns.append(lambda x, fn=fn, a=a, b=b: fn(x, a, b))
    k = len(defaults)
    return [fns[d * k:(d + 1) * k] for d in range(num_dir)]


# ---- the shared frame: shapes, directions, sequence lengths ---------------------------------

class _Frame:
    """What LSTM, GRU and RNN share: the input in [seq, batch, input] layout, the weights
    split per direction, the sequence lengths and the initial states."""

    def __init__(self, n, x, w, r, b, seq_lens, states, gates, defaults):
        self.n = n
        self.layout = n.attr("layout", 0)
        if self.layout not in (0, 1):
            raise n.error(f"layout must be 0 or 1, got {self.layout}", errors.ValueError)
        direction = n.attr("direction", "forward")
        if direction not in ("forward", "reverse", "bidirectional"):
            raise n.error(f"direction must be forward, reverse or bidirectional, got "
                          f"{direction!r}", errors.ValueError)
        self.directions = ["forward", "reverse"] if direction == "bidirectional" else [direction]
        num_dir = len(self.directions)
        if x.ndim != 3:
            raise n.error(f"X must have 3 dimensions, got shape {x.shape}", errors.ShapeError)
        if not x.dtype.is_floating:
            raise n.error(f"X must be a float tensor, got {x.dtype.name}", errors.DTypeError)
        if self.layout == 1:  # [batch, seq, ...] -> [seq, batch, ...]
            x = F.transpose(x, 1, 0, 2)
            states = [None if s is None else F.transpose(s, 1, 0, 2) for s in states]
        if w.ndim != 3 or r.ndim != 3:
            raise n.error(f"W and R must have 3 dimensions, got shapes {w.shape} and "
                          f"{r.shape}", errors.ShapeError)
        seq, batch, size = x.shape
        hidden = n.attr("hidden_size", r.shape[-1])
        self.x, self.seq, self.batch, self.hidden = x, seq, batch, hidden
        self._check(w, (num_dir, gates * hidden, size), "W")
        self._check(r, (num_dir, gates * hidden, hidden), "R")
        if b is not None:
            self._check(b, (num_dir, 2 * gates * hidden), "B")
        for name, s in zip(("initial_h", "initial_c"), states):
            if s is not None:
                self._check(s, (num_dir, batch, hidden), name + " (in layout 0)")
        self.w, self.r, self.b, self.states = w, r, b, states
        self.acts = _activations(n, defaults, num_dir)
        clip = n.attr("clip")
        self.clip = None if clip is None else float(clip)
        self.lens = self._lengths(seq_lens)

    def _check(self, t, want, name):
        if tuple(t.shape) != tuple(want):
            raise self.n.error(f"{name} must have shape {tuple(want)} for X of shape "
                               f"{self.x.shape} (layout {self.layout}), hidden_size "
                               f"{self.hidden} and {len(self.directions)} direction(s), got "
                               f"{tuple(t.shape)}", errors.ShapeError)
        if t.dtype != self.x.dtype:
            raise self.n.error(f"{name} must have X's dtype {self.x.dtype.name}, got "
                               f"{t.dtype.name}", errors.DTypeError)

    def _lengths(self, seq_lens):
        """The per-entry lengths as a numpy array, or None when every entry is full length."""
        if seq_lens is None:
            return None
        lens = np.asarray(self.n.ints(seq_lens, "sequence_lens"))
        if lens.shape != (self.batch,):
            raise self.n.error(f"sequence_lens must have shape ({self.batch},), got "
                               f"{tuple(seq_lens.shape)}", errors.ShapeError)
        if ((lens < 0) | (lens > self.seq)).any():
            raise self.n.error(f"sequence_lens {lens.tolist()} must lie in [0, {self.seq}]",
                               errors.ValueError)
        return None if (lens == self.seq).all() else lens

    def gate_clip(self, t):
        return t if self.clip is None else F.clip(t, -self.clip, self.clip)

    def biases(self, d, gates):
        """(input bias, recurrence bias) of direction d, each [gates * hidden], or None."""
        if self.b is None:
            return None, None
        gh = gates * self.hidden
        bd = self.b[d]
        return bd[:gh], bd[gh:]

    def initial(self, i, d):
        s = self.states[i] if i < len(self.states) else None
        if s is None:
            return F.zeros(self.batch, self.hidden, dtype=self.x.dtype, device=self.x.device)
        return s[d]

    def _time_order(self, t):
        """t ([seq, batch, k]) with each entry's valid steps in reverse order (an
        involution: applying it twice gives t back)."""
        if self.lens is None:
            return F.flip(t, 0)
        idx = np.arange(self.seq)[:, None].repeat(self.batch, 1)
        for b, length in enumerate(self.lens):
            idx[:length, b] = idx[:length, b][::-1]
        idx = np.broadcast_to(idx[:, :, None], t.shape)
        return F.gather_elements(t, const(idx.astype(np.int64), like=t), axis=0)

    def run(self, project, step, nstates):
        """Runs every direction: project(d) gives the input's contribution to the gates for
        all steps, [seq, batch, k]; step(d, xt, states) gives the new states (the hidden
        state first). Returns (Y in layout 0, [final state i for i < nstates])."""
        ys, finals = [], [[] for _ in range(nstates)]
        mask = None
        if self.lens is not None:
            steps = np.arange(self.seq)[:, None] < self.lens[None, :]
            mask = const(steps[:, :, None].astype(self.x.dtype.np), like=self.x)
        for d, direction in enumerate(self.directions):
            xw = project(d)
            if direction == "reverse":
                xw = self._time_order(xw)
            states = [self.initial(i, d) for i in range(nstates)]
            hs = []
            for t in range(self.seq):
                new = step(d, xw[t], states)
                if mask is not None:  # entries past their length keep their state
                    m = mask[t]
                    new = [s_new * m + s_old * (1.0 - m) for s_new, s_old in zip(new, states)]
                    hs.append(new[0] * m)
                else:
                    hs.append(new[0])
                states = new
            y = F.stack(hs, 0) if hs else F.zeros(0, self.batch, self.hidden,
                                                  dtype=self.x.dtype, device=self.x.device)
            if direction == "reverse":
                y = self._time_order(y)
            ys.append(y)
            for i in range(nstates):
                finals[i].append(states[i])
        return F.stack(ys, 1), [F.stack(f, 0) for f in finals]

    def outputs(self, y, finals):
        """Y ([seq, dirs, batch, hidden]) and the final states in the node's layout."""
        if self.layout == 1:
            y = F.permute(y, 2, 0, 1, 3)
            finals = [F.transpose(f, 1, 0, 2) for f in finals]
        return (y, *finals)

    def project(self, d, bias=None):
        """x @ W[d]^T (+ bias) for every step at once."""
        xw = F.matmul(self.x, F.transpose(self.w[d], 1, 0))
        return xw if bias is None else xw + bias


# ---- the operators ----------------------------------------------------------------------------

@onnx_op("LSTM")
@via_float32
def lstm(n, x, w, r, b=None, seq_lens=None, initial_h=None, initial_c=None, p=None):
    fr = _Frame(n, x, w, r, b, seq_lens, [initial_h, initial_c], 4,
                ["Sigmoid", "Tanh", "Tanh"])
    hid = fr.hidden
    if p is not None:
        fr._check(p, (len(fr.directions), 3 * hid), "P")
    input_forget = bool(n.attr("input_forget", 0))
    rt = [F.transpose(r[d], 1, 0) for d in range(len(fr.directions))]

    def project(d):
        wb, rb = fr.biases(d, 4)
        return fr.project(d, None if wb is None else wb + rb)

    def step(d, xt, states):
        h, c = states
        f_act, g_act, h_act = fr.acts[d]
        gates = xt + F.matmul(h, rt[d])  # ONNX's gate order: input, output, forget, cell
        gi, go, gf, gc = (gates[:, k * hid:(k + 1) * hid] for k in range(4))
        if p is not None:
            pi, po, pf = (p[d, k * hid:(k + 1) * hid] for k in range(3))
            gi = gi + pi * c
            gf = gf + pf * c
        i = f_act(fr.gate_clip(gi))
        f = 1.0 - i if input_forget else f_act(fr.gate_clip(gf))
        c_new = f * c + i * g_act(fr.gate_clip(gc))
        if p is not None:
            go = go + po * c_new
        o = f_act(fr.gate_clip(go))
        return [o * h_act(c_new), c_new]

    y, finals = fr.run(project, step, 2)
    return fr.outputs(y, finals)


@onnx_op("GRU")
@via_float32
def gru(n, x, w, r, b=None, seq_lens=None, initial_h=None):
    fr = _Frame(n, x, w, r, b, seq_lens, [initial_h], 3, ["Sigmoid", "Tanh"])
    hid = fr.hidden
    before_reset = bool(n.attr("linear_before_reset", 0))
    ndir = len(fr.directions)
    r_zr = [F.transpose(r[d, :2 * hid], 1, 0) for d in range(ndir)]   # update, reset
    r_h = [F.transpose(r[d, 2 * hid:], 1, 0) for d in range(ndir)]    # hidden
    rb_h = [fr.biases(d, 3)[1] for d in range(ndir)]
    rb_h = [None if rb is None else rb[2 * hid:] for rb in rb_h]

    def project(d):
        wb, rb = fr.biases(d, 3)
        if wb is None:
            return fr.project(d)
        # The recurrence bias of z and r adds like the input bias; that of the hidden gate
        # does too unless linear_before_reset puts it inside the reset product.
        if before_reset:
            rb = F.concat([rb[:2 * hid], F.zeros_like(rb[2 * hid:])], 0)
        return fr.project(d, wb + rb)

    def step(d, xt, states):
        (h,) = states
        f_act, g_act = fr.acts[d]
        zr = xt[:, :2 * hid] + F.matmul(h, r_zr[d])
        z = f_act(fr.gate_clip(zr[:, :hid]))
        rg = f_act(fr.gate_clip(zr[:, hid:]))
        if before_reset:
            hr = F.matmul(h, r_h[d])
            if rb_h[d] is not None:
                hr = hr + rb_h[d]
            pre = xt[:, 2 * hid:] + rg * hr
        else:
            pre = xt[:, 2 * hid:] + F.matmul(rg * h, r_h[d])
        cand = g_act(fr.gate_clip(pre))
        return [(1.0 - z) * cand + z * h]

    y, finals = fr.run(project, step, 1)
    return fr.outputs(y, finals)


@onnx_op("RNN")
@via_float32
def rnn(n, x, w, r, b=None, seq_lens=None, initial_h=None):
    fr = _Frame(n, x, w, r, b, seq_lens, [initial_h], 1, ["Tanh"])
    rt = [F.transpose(r[d], 1, 0) for d in range(len(fr.directions))]

    def project(d):
        wb, rb = fr.biases(d, 1)
        return fr.project(d, None if wb is None else wb + rb)

    def step(d, xt, states):
        (h,) = states
        (act,) = fr.acts[d]
        return [act(fr.gate_clip(xt + F.matmul(h, rt[d])))]

    y, finals = fr.run(project, step, 1)
    return fr.outputs(y, finals)
