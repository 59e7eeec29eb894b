"""MultiHeadAttention against torch.nn.MultiheadAttention with the same weights: outputs,
attention weights, and gradients with respect to query, key, value and every parameter, in
float32 (rtol 1e-4, atol 2e-5); masks (bool and float, 2-D and 3-D attn_mask,
key_padding_mask), kdim/vdim, batch_first, unbatched input; dropout in training only."""
import numpy as np
import pytest

import hl
from hl.layers import MultiHeadAttention

from .torch_compare import compare, copy_weights

torch = pytest.importorskip("torch")

RTOL, ATOL = 1e-4, 2e-5
E, H = 8, 2
TORCH_NAMES = {"in_proj_weight": "W_in", "in_proj_bias": "b_in", "q_proj_weight": "W_q",
               "k_proj_weight": "W_k", "v_proj_weight": "W_v", "out_proj.weight": "W_out",
               "out_proj.bias": "b_out"}


def _pair(batch_first=False, bias=True, kdim=None, vdim=None, heads=H, dropout=0.0):
    torch.manual_seed(0)
    module = torch.nn.MultiheadAttention(E, heads, dropout=dropout, bias=bias,
                                         batch_first=batch_first, kdim=kdim, vdim=vdim)
    layer = MultiHeadAttention(E, heads, dropout=dropout, bias=bias, batch_first=batch_first,
                               kdim=kdim, vdim=vdim)
    return layer, module


def _build(layer, module, q, k, v):
    layer(hl.tensor(q), hl.tensor(k), hl.tensor(v))
    copy_weights(layer, module, TORCH_NAMES.__getitem__)
    params = layer.get_params()
    tparams = {TORCH_NAMES[k]: p for k, p in module.named_parameters()}
    assert sorted(params) == sorted(tparams)
    return params, tparams


def _seq(rng, L, N, dim, batch_first):
    shape = (L, dim) if N is None else ((N, L, dim) if batch_first else (L, N, dim))
    return rng.standard_normal(shape).astype(np.float32)


# (batch_first, bias, kdim, vdim, L, S, N, heads)
CONFIGS = [
    (False, True, None, None, 4, 5, 3, 2),
    (True, True, None, None, 3, 6, 2, 4),
    (False, False, None, None, 4, 4, 2, 1),
    (True, True, 5, 3, 3, 4, 2, 2),          # separate q/k/v weights
    (False, True, 6, None, 2, 3, 2, 2),
    (False, True, None, None, 4, 5, None, 2),  # unbatched
]


@pytest.mark.parametrize("average", [True, False])
@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "bf{}_bias{}_k{}_v{}_L{}S{}N{}H{}"
                         .format(*[int(v) if isinstance(v, bool) else v for v in c]))
def test_against_torch(config, average, rng):
    batch_first, bias, kdim, vdim, L, S, N, heads = config
    layer, module = _pair(batch_first, bias, kdim, vdim, heads)
    q = _seq(rng, L, N, E, batch_first)
    k = _seq(rng, S, N, kdim or E, batch_first)
    v = _seq(rng, S, N, vdim or E, batch_first)
    params, tparams = _build(layer, module, q, k, v)
    compare(lambda q, k, v: layer(q, k, v, average_attn_weights=average),
            lambda q, k, v: module(q, k, v, average_attn_weights=average),
            [q, k, v], params, tparams, RTOL, ATOL)


@pytest.mark.parametrize("batch_first", [False, True])
def test_self_attention_one_input(batch_first, rng):
    layer, module = _pair(batch_first)
    x = _seq(rng, 5, 3, E, batch_first)
    params, tparams = _build(layer, module, x, x, x)
    compare(lambda x: layer(x, x, x), lambda x: module(x, x, x), [x], params, tparams,
            RTOL, ATOL)


def _masks(kind, rng, L, S, N, heads):
    """(attn_mask, key_padding_mask) as numpy arrays; no row is masked entirely."""
    causal = np.triu(np.ones((L, S), bool), k=1 + S - L)
    pad = np.zeros((N, S), bool)
    pad[0, -2:] = True
    pad[-1, -1] = True
    if kind == "bool_causal":
        return causal, None
    if kind == "bool_padding":
        return None, pad
    if kind == "bool_both":
        return causal, pad
    if kind == "float_3d":
        return rng.standard_normal((N * heads, L, S)).astype(np.float32), None
    if kind == "float_padding":
        return None, np.where(pad, -1e4, 0.5).astype(np.float32)
    if kind == "bool_3d_and_float_2d_padding":
        m = np.zeros((N * heads, L, S), bool)
        m[:, :, 0] = True
        return m, rng.standard_normal((N, S)).astype(np.float32)
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["bool_causal", "bool_padding", "bool_both", "float_3d",
                                  "float_padding", "bool_3d_and_float_2d_padding"])
def test_masks(kind, rng):
    L, S, N = 4, 5, 3
    layer, module = _pair()
    q, k, v = (_seq(rng, n, N, E, False) for n in (L, S, S))
    params, tparams = _build(layer, module, q, k, v)
    attn, pad = _masks(kind, rng, L, S, N, H)
    h_attn = None if attn is None else hl.tensor(attn)
    h_pad = None if pad is None else hl.tensor(pad)
    if kind == "bool_3d_and_float_2d_padding":   # torch wants both masks of one kind
        attn = np.where(attn, -np.inf, 0).astype(np.float32)
    t_attn = None if attn is None else torch.tensor(attn)
    t_pad = None if pad is None else torch.tensor(pad)
    compare(lambda q, k, v: layer(q, k, v, key_padding_mask=h_pad, attn_mask=h_attn),
            lambda q, k, v: module(q, k, v, key_padding_mask=t_pad, attn_mask=t_attn),
            [q, k, v], params, tparams, RTOL, ATOL)


def test_need_weights_false(rng):
    layer, module = _pair(batch_first=True)
    q = _seq(rng, 3, 2, E, True)
    params, tparams = _build(layer, module, q, q, q)
    out, w = layer(hl.tensor(q), hl.tensor(q), hl.tensor(q), need_weights=False)
    assert w is None
    want, _ = module(*(torch.tensor(q),) * 3, need_weights=False)
    np.testing.assert_allclose(out.numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)


def test_dropout_only_in_training(rng):
    layer, module = _pair(dropout=0.5)
    q, k, v = (_seq(rng, n, 2, E, False) for n in (3, 6, 6))
    _build(layer, module, q, k, v)
    args = [hl.tensor(a) for a in (q, k, v)]
    layer.eval()
    module.eval()
    a, wa = layer(*args)
    want, want_w = module(*(torch.tensor(t) for t in (q, k, v)))
    np.testing.assert_allclose(a.numpy(), want.detach().numpy(), rtol=RTOL, atol=ATOL)
    np.testing.assert_allclose(wa.numpy(), want_w.detach().numpy(), rtol=RTOL, atol=ATOL)
    _, w_eval = layer(*args, average_attn_weights=False)
    layer.train()
    b, wb = layer(*args, average_attn_weights=False)
    c, _ = layer(*args)
    assert not np.allclose(b.numpy(), a.numpy()) and not np.allclose(b.numpy(), c.numpy())
    # the weights come back after dropout: each is 0 or the eval weight over (1 - p)
    w, w0 = wb.numpy(), w_eval.numpy()
    dropped = w == 0
    assert dropped.any() and not dropped.all()
    np.testing.assert_allclose(w[~dropped], w0[~dropped] * 2.0, rtol=1e-5)


def test_shapes_and_errors():
    layer = MultiHeadAttention(8, 2, kdim=4)
    with pytest.raises(hl.errors.ValueError, match="multiple of num_heads"):
        MultiHeadAttention(8, 3)
    q, k = hl.randn(3, 2, 8), hl.randn(5, 2, 4)
    out, w = layer(q, k, k)
    assert out.shape == (3, 2, 8) and w.shape == (2, 3, 5)
    assert layer.W_k.shape == (8, 4) and layer.W_v.shape == (8, 4) and layer.b_in.shape == (24,)
    with pytest.raises(hl.errors.ShapeError, match="embed_dim=8"):
        layer(hl.randn(3, 2, 7), k, k)
    with pytest.raises(hl.errors.ShapeError, match="sequence length"):
        layer(q, k, hl.randn(4, 2, 4))
    with pytest.raises(hl.errors.ShapeError, match="attn_mask of shape"):
        layer(q, k, k, attn_mask=hl.zeros(3, 4))
    with pytest.raises(hl.errors.ShapeError, match="key_padding_mask of shape"):
        layer(q, k, k, key_padding_mask=hl.zeros(2, 4))
    with pytest.raises(hl.errors.DTypeError, match="bool"):
        layer(q, k, k, key_padding_mask=hl.zeros(2, 5, dtype="int32"))


def test_compile_with_placeholders():
    class M(hl.Module):
        def __init__(self):
            super().__init__()
            self.attn = MultiHeadAttention(8, 2, batch_first=True, vdim=4)

        def forward(self, q, kv, v):
            return self.attn(q, kv, v, key_padding_mask=hl.zeros(2, 5, dtype="bool"))

    shapes = [(2, 3, 8), (2, 5, 8), (2, 5, 4)]
    m = M().compile([hl.Placeholder(s) for s in shapes])
    out, w = m(*(hl.Placeholder(s) for s in shapes))
    assert isinstance(out, hl.Placeholder) and out.shape == (2, 3, 8) and w.shape == (2, 3, 5)
    assert sorted(m.get_params()) == ["attn.W_k", "attn.W_out", "attn.W_q", "attn.W_v",
                                      "attn.b_in", "attn.b_out"]
