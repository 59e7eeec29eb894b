"""Recurrent layers: RNN (tanh or relu), LSTM and GRU, multi-layer and bidirectional, with
PyTorch's semantics and parameter layout.

Each layer l and direction d owns, in PyTorch's (out, in) layout and gate order,

    W_ih_l{l}[_reverse]   (gates * hidden, input)     LSTM gates i, f, g, o; GRU r, z, n
    W_hh_l{l}[_reverse]   (gates * hidden, hidden)
    b_ih_l{l}[_reverse]   (gates * hidden,)           (when bias=True)
    b_hh_l{l}[_reverse]   (gates * hidden,)

which are torch's ``weight_ih_l0``, ``weight_hh_l0_reverse``, ... under hl's W/b names, so a
torch state dict maps over by renaming alone. The input size is learnt on the first call.

Inputs are time-major (T, N, features) unless ``batch_first=True`` (N, T, features), as in
PyTorch (and SINGA); a 2-D input (T, features) is one unbatched sequence. ``layer(x, h0)``
(``layer(x, (h0, c0))`` for LSTM) returns ``(output, h_n)`` (``(output, (h_n, c_n))``) with
torch's shapes; a missing initial state is zero.

Speed: the input projection of a whole sequence is one matmul per layer and direction (both
biases folded in where the maths allows), split once into per-step views; each step is then
one matmul plus the gate arithmetic. A zero initial state skips the first step's matmul.
"""
import math

from .. import errors
from ..autograd import functional as F
from . import _checks, activations, initializers
from .layer import Layer


def _unbind(t, n):
    """The n slices of t along axis 0, without that axis."""
    return [F.reshape(piece, *piece.shape[1:]) for piece in F.split(t, n, axis=0)]


class _Recurrent(Layer):
    GATES = 1          # gate blocks stacked in each weight

    def __init__(self, hidden_size, *args, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, W_init=None, b_init=None, activation="tanh",
                 recurrent_activation="sigmoid", name=None):
        super().__init__(name)
        kind = type(self).__name__
        if len(args) > 1:
            raise errors.ValueError(
                f"{type(self).__name__}(hidden_size) or {type(self).__name__}(input_size, "
                f"hidden_size); pass num_layers, bias, batch_first, dropout and bidirectional "
                f"by keyword")
        if args:  # (input_size, hidden_size), PyTorch's order
            self.input_size = _checks.count(hidden_size, "input_size", kind)
            self.hidden_size = _checks.count(args[0], "hidden_size", kind)
        else:
            self.input_size, self.hidden_size = None, _checks.count(hidden_size, "hidden_size",
                                                                    kind)
        self.num_layers = _checks.count(num_layers, "num_layers", kind)
        self.bias = bool(bias)
        self.batch_first = bool(batch_first)
        self.dropout = _checks.number(dropout, "dropout", kind, 0.0, 1.0, high_open=True)
        # Keras's arguments: the cell's activation (tanh in PyTorch's equations) and the gates'
        self.activation = activations.checked(activation, kind)
        self.recurrent_activation = activations.checked(recurrent_activation, kind)
        self.bidirectional = bool(bidirectional)
        self.num_directions = 2 if bidirectional else 1
        # PyTorch's default: every weight and bias U(-1/sqrt(hidden), 1/sqrt(hidden)).
        k = 1.0 / math.sqrt(self.hidden_size)
        self.W_init = W_init if W_init is not None else initializers.uniform(-k, k)
        self.b_init = b_init if b_init is not None else initializers.uniform(-k, k)

    # ---- parameters ---------------------------------------------------------------------

    @staticmethod
    def _suffix(layer, direction):
        return f"_l{layer}" + ("_reverse" if direction else "")

    def initialize(self, x, hx=None):
        self._check_input(x)
        n_in = x.shape[-1]
        if self.input_size is not None and n_in != self.input_size:
            raise errors.ShapeError(
                f"{self.describe()}: expected input with {self.input_size} features in the "
                f"last axis, received shape {tuple(x.shape)}")
        self.input_size = n_in
        g, h = self.GATES * self.hidden_size, self.hidden_size
        for layer in range(self.num_layers):
            width = n_in if layer == 0 else h * self.num_directions
            for d in range(self.num_directions):
                s = self._suffix(layer, d)
                self.add_param("W_ih" + s, (g, width), self.W_init, x.dtype, x.device)
                self.add_param("W_hh" + s, (g, h), self.W_init, x.dtype, x.device)
                if self.bias:
                    self.add_param("b_ih" + s, (g,), self.b_init, x.dtype, x.device)
                    self.add_param("b_hh" + s, (g,), self.b_init, x.dtype, x.device)

    def _weights(self, layer, d):
        s = self._suffix(layer, d)
        p = self.__dict__
        return p["W_ih" + s], p["W_hh" + s], p.get("b_ih" + s), p.get("b_hh" + s)

    # ---- checks -------------------------------------------------------------------------

    def _layout(self):
        return "(N, T, features)" if self.batch_first else "(T, N, features)"

    def _check_input(self, x):
        if x.ndim not in (2, 3):
            raise errors.ShapeError(
                f"{self.describe()}: expected input {self._layout()} or unbatched (T, "
                f"features), received shape {tuple(x.shape)}")
        t = x.shape[1] if (x.ndim == 3 and self.batch_first) else x.shape[0]
        if t == 0:
            raise errors.ShapeError(f"{self.describe()}: the sequence length is 0 (input shape "
                                    f"{tuple(x.shape)}); it must be at least 1")

    def _initial(self, state, what, batch, batched):
        """The per-(layer, direction) pieces of an initial state, or Nones for zeros."""
        n = self.num_layers * self.num_directions
        if state is None:
            return [None] * n
        want = (n, batch, self.hidden_size) if batched else (n, self.hidden_size)
        if tuple(state.shape) != want:
            raise errors.ShapeError(
                f"{self.describe()}: expected {what} of shape {want} (num_layers * "
                f"num_directions, {'batch, ' if batched else ''}hidden_size), received "
                f"{tuple(state.shape)}")
        if not batched:
            state = F.reshape(state, n, 1, self.hidden_size)
        return _unbind(state, n)

    # ---- running ------------------------------------------------------------------------

    def forward(self, x, hx=None):
        self._check_input(x)
        if x.shape[-1] != self.input_size:
            raise errors.ShapeError(
                f"{self.describe()}: expected input with {self.input_size} features in the "
                f"last axis, received shape {tuple(x.shape)}")
        batched = x.ndim == 3
        if not batched:
            x = F.reshape(x, x.shape[0], 1, x.shape[1])
        elif self.batch_first:
            x = F.permute(x, 1, 0, 2)
        steps, batch = x.shape[0], x.shape[1]
        states = self._initial_states(hx, batch, batched)

        flat = F.reshape(x, steps * batch, self.input_size)   # rows ordered (t, n)
        finals = []
        for layer in range(self.num_layers):
            outs = []
            for d in range(self.num_directions):
                k = layer * self.num_directions + d
                seq, final = self._run_direction(flat, steps, layer, d,
                                                 [s[k] for s in states])
                outs.append(seq)
                finals.append(final)
            flat = outs[0] if len(outs) == 1 else F.concat(outs, axis=1)
            if self.dropout and layer < self.num_layers - 1:
                flat = F.dropout(flat, self.dropout, training=self.training)

        width = self.hidden_size * self.num_directions
        if batched:
            out = F.reshape(flat, steps, batch, width)
            if self.batch_first:
                out = F.permute(out, 1, 0, 2)
        else:
            out = F.reshape(flat, steps, width)
        return out, self._final_states(finals, batched)

    def _initial_states(self, hx, batch, batched):
        return [self._initial(hx, "h0", batch, batched)]

    def _final_states(self, finals, batched):
        return self._stack_final([f[0] for f in finals], batched)

    def _stack_final(self, pieces, batched):
        h = F.stack(pieces, axis=0)
        return h if batched else F.reshape(h, h.shape[0], self.hidden_size)

    def _run_direction(self, flat, steps, layer, d, state):
        """One layer in one direction over the (T * N, features) input: the (T * N, hidden)
        outputs in time order, and the final state (a list, one tensor per state kind)."""
        W_ih, W_hh, b_ih, b_hh = self._weights(layer, d)
        xs = F.split(self._project(flat, W_ih, b_ih, b_hh), steps, axis=0)
        outs = [None] * steps
        order = range(steps - 1, -1, -1) if d else range(steps)
        for t in order:
            state = self._step(xs[t], state, W_hh, b_hh)
            outs[t] = state[0]
        return (outs[0] if steps == 1 else F.concat(outs, axis=0)), state

    def _project(self, flat, W_ih, b_ih, b_hh):
        """Every step's input contribution in one matmul; both biases folded in."""
        b = None if b_ih is None else b_ih + b_hh
        return F.gemm(flat, W_ih, b, trans_b=True)

    def extra_repr(self):
        return (f"{self.input_size}, {self.hidden_size}, num_layers={self.num_layers}, "
                f"bias={self.bias}, batch_first={self.batch_first}, dropout={self.dropout}, "
                f"bidirectional={self.bidirectional}")


class RNN(_Recurrent):
    """Elman RNN: h_t = act(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), act tanh or relu.
    ``RNN(hidden_size)`` or ``RNN(input_size, hidden_size)``; returns (output, h_n)."""

    def __init__(self, hidden_size, *args, nonlinearity=None, activation=None, **kwargs):
        """``nonlinearity`` is PyTorch's name ('tanh' or 'relu'), ``activation`` Keras's
        (any activation; SimpleRNN's); give at most one (default tanh)."""
        if nonlinearity is not None and activation is not None:
            raise errors.ValueError("RNN: give nonlinearity (PyTorch's name) or activation "
                                    "(Keras's), not both")
        if nonlinearity is not None and nonlinearity not in ("tanh", "relu"):
            raise errors.ValueError(f"RNN: nonlinearity must be 'tanh' or 'relu', got "
                                    f"{nonlinearity!r}")
        act = nonlinearity or activation or "tanh"
        super().__init__(hidden_size, *args, activation=act, **kwargs)

    @property
    def nonlinearity(self):
        return activations.name_of(self.activation)

    def _step(self, x_t, state, W_hh, b_hh):
        h = state[0]
        a = x_t if h is None else F.gemm(h, W_hh, x_t, trans_b=True)
        return [activations.apply(self.activation, a)]

    def extra_repr(self):
        return super().extra_repr() + f", nonlinearity={self.nonlinearity!r}"


class LSTM(_Recurrent):
    """Long short-term memory, PyTorch's equations and gate order (i, f, g, o):
    c_t = f * c_{t-1} + i * g,  h_t = o * tanh(c_t).
    ``layer(x, (h0, c0))`` returns (output, (h_n, c_n))."""

    GATES = 4

    def _initial_states(self, hx, batch, batched):
        if hx is None:
            hx = (None, None)
        if not isinstance(hx, (tuple, list)) or len(hx) != 2:
            raise errors.ValueError(f"{self.describe()}: the initial state is a pair (h0, c0), "
                                    f"received {type(hx).__name__}")
        return [self._initial(hx[0], "h0", batch, batched),
                self._initial(hx[1], "c0", batch, batched)]

    def _final_states(self, finals, batched):
        return (self._stack_final([f[0] for f in finals], batched),
                self._stack_final([f[1] for f in finals], batched))

    def _step(self, x_t, state, W_hh, b_hh):
        h, c = state
        gates = x_t if h is None else F.gemm(h, W_hh, x_t, trans_b=True)
        i, f, g, o = F.split(gates, 4, axis=1)
        act, gate = activations.get(self.activation), activations.get(self.recurrent_activation)
        i, f, g, o = gate(i), gate(f), act(g), gate(o)
        c = i * g if c is None else f * c + i * g
        return [o * act(c), c]


class GRU(_Recurrent):
    """Gated recurrent unit, PyTorch's equations and gate order (r, z, n):
    r, z = sigmoid(W_i{r,z} x + b_i{r,z} + W_h{r,z} h + b_h{r,z}),
    n = tanh(W_in x + b_in + r * (W_hn h + b_hn)),  h_t = (1 - z) * n + z * h_{t-1}."""

    GATES = 3

    def _project(self, flat, W_ih, b_ih, b_hh):
        # b_hn sits inside r * (...), so only b_ih is folded into the input projection
        return F.gemm(flat, W_ih, b_ih, trans_b=True)

    def _step(self, x_t, state, W_hh, b_hh):
        h = state[0]
        hsz = self.hidden_size
        act, gate = activations.get(self.activation), activations.get(self.recurrent_activation)
        x_rz, x_n = F.split(x_t, [2 * hsz, hsz], axis=1)
        if h is None:  # h @ W_hh^T is zero: only the bias is left
            if b_hh is None:
                r, z = F.split(gate(x_rz), 2, axis=1)
                n = act(x_n)
                return [n - z * n]
            h_all = b_hh
            h_rz, h_n = F.split(h_all, [2 * hsz, hsz], axis=0)
        else:
            h_all = F.gemm(h, W_hh, b_hh, trans_b=True)
            h_rz, h_n = F.split(h_all, [2 * hsz, hsz], axis=1)
        r, z = F.split(gate(x_rz + h_rz), 2, axis=1)
        n = act(x_n + r * h_n)
        # (1 - z) * n + z * h, with h = 0 on a zero start
        return [n - z * n if h is None else n + z * (h - n)]


__all__ = ["RNN", "LSTM", "GRU"]
