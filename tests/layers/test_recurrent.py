"""RNN, LSTM and GRU against torch.nn.RNN/LSTM/GRU with the same weights: outputs, final
states, and gradients with respect to the input, the initial state and every parameter, in
float32 (rtol 1e-4, atol 2e-5). Dropout between layers: on in training only."""
import numpy as np
import pytest

import hl
from hl.layers import GRU, LSTM, RNN

from .torch_compare import compare, copy_weights

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 2e-5
KINDS = {
    "rnn_tanh": (lambda **kw: RNN(**kw), lambda **kw: torch.nn.RNN(**kw)),
    "rnn_relu": (lambda **kw: RNN(nonlinearity="relu", **kw),
                 lambda **kw: torch.nn.RNN(nonlinearity="relu", **kw)),
    "lstm": (lambda **kw: LSTM(**kw), lambda **kw: torch.nn.LSTM(**kw)),
    "gru": (lambda **kw: GRU(**kw), lambda **kw: torch.nn.GRU(**kw)),
}
# (num_layers, bidirectional, batch_first, initial state, bias, T, N)
CONFIGS = [
    (1, False, False, False, True, 5, 3),
    (1, False, False, True, True, 4, 2),
    (2, False, True, True, True, 4, 3),
    (1, True, False, False, True, 3, 2),
    (2, True, True, True, True, 4, 2),
    (2, True, False, False, False, 3, 2),
    (1, False, False, True, True, 1, 1),     # one step, batch of one
    (2, True, False, True, True, 4, None),   # unbatched (T, features)
]


def _rename(name):   # torch's weight_ih_l0_reverse -> hl's W_ih_l0_reverse
    return name.replace("weight", "W").replace("bias", "b")


def _pair(kind, layers, bidir, batch_first, bias, n_in=5, hidden=4):
    make_hl, make_torch = KINDS[kind]
    kw = dict(num_layers=layers, bidirectional=bidir, batch_first=batch_first, bias=bias)
    torch.manual_seed(0)
    t = make_torch(input_size=n_in, hidden_size=hidden, **kw)
    layer = make_hl(hidden_size=hidden, **kw)
    return layer, t


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "L{}{}{}{}{}_T{}N{}".format(
    c[0], "_bi" if c[1] else "", "_bf" if c[2] else "", "_h0" if c[3] else "",
    "" if c[4] else "_nobias", c[5], c[6]))
@pytest.mark.parametrize("kind", list(KINDS))
def test_against_torch(kind, config, rng):
    layers, bidir, batch_first, with_state, bias, T, N = config
    n_in, hidden = 5, 4
    layer, module = _pair(kind, layers, bidir, batch_first, bias, n_in, hidden)
    if N is None:
        x = rng.standard_normal((T, n_in))
    else:
        x = rng.standard_normal((N, T, n_in) if batch_first else (T, N, n_in))
    x = x.astype(np.float32)
    layer(hl.tensor(x))   # creates the parameters
    copy_weights(layer, module, _rename)
    params = layer.get_params()
    tparams = {_rename(k): v for k, v in module.named_parameters()}
    assert sorted(params) == sorted(tparams)

    state_shape = (layers * (2 if bidir else 1),) + ((N,) if N else ()) + (hidden,)
    states = [rng.standard_normal(state_shape).astype(np.float32) if with_state else None
              for _ in range(2 if kind == "lstm" else 1)]

    def run(f):
        def go(x, *s):
            if not with_state:
                return f(x)
            return f(x, tuple(s) if kind == "lstm" else s[0])
        return go

    compare(run(layer), run(module), [x] + states, params, tparams, RTOL, ATOL)


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_shapes_and_names(kind):
    layer = (LSTM if kind == "lstm" else GRU)(6, num_layers=2, bidirectional=True)
    x = hl.randn(7, 3, 4)
    out, state = layer(x)
    h = state[0] if kind == "lstm" else state
    assert out.shape == (7, 3, 12) and h.shape == (4, 3, 6)
    gates = 4 if kind == "lstm" else 3
    p = layer.get_params()
    assert p["W_ih_l0"].shape == (gates * 6, 4)
    assert p["W_ih_l1_reverse"].shape == (gates * 6, 12)
    assert p["W_hh_l1"].shape == (gates * 6, 6)
    assert p["b_hh_l0_reverse"].shape == (gates * 6,)
    assert len(p) == 2 * 2 * 4


def test_names_nest_under_a_model():
    class M(hl.Module):
        def __init__(self):
            super().__init__()
            self.lstm = LSTM(3)

        def forward(self, x):
            return self.lstm(x)[0]

    m = M()
    m(hl.randn(2, 1, 4))
    assert "lstm.W_ih_l0" in m.get_params()
    assert m.lstm.W_ih_l0.name == "lstm.W_ih_l0"


def test_input_size_checked():
    layer = RNN(5, 3)       # (input_size, hidden_size), PyTorch's order
    with pytest.raises(hl.errors.ShapeError, match=r"5 features.*\(2, 1, 4\)"):
        layer(hl.randn(2, 1, 4))
    layer(hl.randn(2, 1, 5))
    with pytest.raises(hl.errors.ShapeError, match="h0 of shape"):
        layer(hl.randn(2, 1, 5), hl.randn(1, 2, 3))
    with pytest.raises(hl.errors.ShapeError, match="sequence length is 0"):
        layer(hl.randn(0, 1, 5))
    with pytest.raises(hl.errors.ValueError, match="keyword"):
        LSTM(3, 4, 2)


def test_dropout_only_between_layers_and_only_in_training(rng):
    x = hl.tensor(rng.standard_normal((6, 4, 3)).astype(np.float32))
    layer = LSTM(8, num_layers=2, dropout=0.5)
    layer(x)
    layer.eval()
    a, _ = layer(x)
    b, _ = layer(x)
    np.testing.assert_array_equal(a.numpy(), b.numpy())   # eval: deterministic
    module = torch.nn.LSTM(3, 8, num_layers=2, dropout=0.5).eval()
    module.load_state_dict({k: torch.tensor(layer.get_params()[_rename(k)].numpy())
                            for k in module.state_dict()})
    np.testing.assert_allclose(a.numpy(), module(torch.tensor(x.numpy()))[0].detach().numpy(),
                               rtol=RTOL, atol=ATOL)
    layer.train()
    c, _ = layer(x)
    d, _ = layer(x)
    assert not np.allclose(c.numpy(), a.numpy())          # train: dropped units change it
    assert not np.allclose(c.numpy(), d.numpy())          # ... differently on every call

    single = GRU(8, dropout=0.5)   # one layer: nothing to drop between, as in PyTorch
    e, _ = single(x)
    single.eval()
    np.testing.assert_array_equal(e.numpy(), single(x)[0].numpy())


def test_dropout_gradient_flows():
    layer = RNN(4, num_layers=2, dropout=0.3).train()
    x = hl.tensor(np.ones((3, 2, 2), np.float32), requires_grad=True)
    out, h = layer(x)
    (out.sum() + h.sum()).backward()
    assert x.grad is not None and all(p.grad is not None for p in layer.parameters())


@pytest.mark.parametrize("kind", list(KINDS))
def test_compile_with_placeholders(kind):
    class M(hl.Module):
        def __init__(self):
            super().__init__()
            self.rnn = KINDS[kind][0](hidden_size=6, num_layers=2, bidirectional=True,
                                      batch_first=True)

        def forward(self, x):
            return self.rnn(x)

    m = M().compile([hl.Placeholder((4, 7, 3))])
    out, state = m(hl.Placeholder((4, 7, 3)))
    h = state[0] if kind == "lstm" else state
    assert isinstance(out, hl.Placeholder) and out.shape == (4, 7, 12) and h.shape == (4, 4, 6)
    assert len(m.get_params()) == 16 and m.get_params()["rnn.W_ih_l1"].shape[1] == 12
