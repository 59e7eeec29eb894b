"""Convolution ops against a direct numpy reference: conv1d/conv2d (stride, symmetric and
asymmetric pads, 'same', dilation, groups incl. depthwise, bias), the transposed convs, and
the two backward kernels (against PyTorch CPU where installed, and finite differences).

Tolerances: float32 rtol 1e-4 / atol 1e-4 (every output is a sum over C_in/groups * k taps,
computed in a different order from numpy's); float64 1e-10.
"""
import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hl
from hl import errors
from tests.ops.harness import LAYOUTS, assert_close, check_op, numeric_grad

TOL = {np.float32: dict(rtol=1e-4, atol=1e-4), np.float64: dict(rtol=1e-10, atol=1e-10)}


# ---- numpy references ------------------------------------------------------------------

def out_size(i, k, s, pb, pe, d):
    return (i + pb + pe - d * (k - 1) - 1) // s + 1


def ref_conv(x, w, b=None, stride=None, pads=None, dil=None, groups=1):
    """Direct convolution: for every kernel tap, a strided slice of the padded input times
    the tap's (C_out/g x C_in/g) weights."""
    S = x.ndim - 2
    stride = stride or [1] * S
    dil = dil or [1] * S
    pads = pads or [0] * (2 * S)
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0)] + [(pads[i], pads[S + i]) for i in range(S)])
    n, c = x.shape[:2]
    co, k = w.shape[0], w.shape[2:]
    outs = [out_size(x.shape[2 + i], k[i], stride[i], pads[i], pads[S + i], dil[i])
            for i in range(S)]
    if min(outs) < 1:
        raise ValueError("empty output")
    cgi, cgo = c // groups, co // groups
    y = np.zeros((n, co, *outs))
    for taps in itertools.product(*[range(kk) for kk in k]):
        sl = tuple(slice(t * d, t * d + (o - 1) * s + 1, s)
                   for t, d, o, s in zip(taps, dil, outs, stride))
        patch = xp[(slice(None), slice(None)) + sl]
        for g in range(groups):
            wg = w[(slice(g * cgo, (g + 1) * cgo), slice(None)) + taps].astype(np.float64)
            y[:, g * cgo:(g + 1) * cgo] += np.einsum("oc,nc...->no...", wg,
                                                     patch[:, g * cgi:(g + 1) * cgi])
    if b is not None:
        y += b.reshape((1, -1) + (1,) * S)
    return y.astype(x.dtype)


def ref_conv_transpose(x, w, b=None, stride=None, pads=None, dil=None, out_pad=None, groups=1):
    """Each input position scatters its weights into the output (then the pads are cropped)."""
    S = x.ndim - 2
    stride = stride or [1] * S
    dil = dil or [1] * S
    pads = pads or [0] * (2 * S)
    out_pad = out_pad or [0] * S
    n, ci = x.shape[:2]
    cgo, k = w.shape[1], w.shape[2:]
    cgi = ci // groups
    ins = x.shape[2:]
    full = [(ins[i] - 1) * stride[i] + dil[i] * (k[i] - 1) + 1 + out_pad[i] for i in range(S)]
    y = np.zeros((n, cgo * groups, *full))
    for taps in itertools.product(*[range(kk) for kk in k]):
        sl = tuple(slice(t * d, t * d + (i - 1) * s + 1, s)
                   for t, d, i, s in zip(taps, dil, ins, stride))
        for g in range(groups):
            wg = w[(slice(g * cgi, (g + 1) * cgi), slice(None)) + taps].astype(np.float64)
            y[(slice(None), slice(g * cgo, (g + 1) * cgo)) + sl] += np.einsum(
                "co,nc...->no...", wg, x[:, g * cgi:(g + 1) * cgi].astype(np.float64))
    crop = tuple(slice(pads[i], full[i] - pads[S + i]) for i in range(S))
    y = y[(slice(None), slice(None)) + crop]
    if b is not None:
        y = y + b.reshape((1, -1) + (1,) * S)
    return y.astype(x.dtype)


def rand(rng, shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


# ---- forward ---------------------------------------------------------------------------

# (x shape, C_out, kernel, stride, pads (ONNX order), dilation, groups)
CASES_2D = [
    ((2, 3, 7, 6), 4, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 3, 7, 6), 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 1),
    ((1, 4, 9, 8), 6, (3, 2), (2, 1), (1, 2, 0, 1), (1, 2), 2),         # asymmetric pads
    ((3, 2, 10, 11), 5, (5, 5), (2, 3), (2, 0, 1, 2), (1, 1), 1),
    ((2, 6, 8, 8), 6, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1), 6),         # depthwise
    ((2, 4, 8, 8), 8, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), 4),         # depthwise x2
    ((2, 3, 11, 10), 3, (5, 3), (2, 1), (2, 0, 1, 2), (2, 1), 3),     # depthwise, dilated
    ((1, 2, 4, 4), 2, (3, 3), (3, 3), (3, 3, 3, 3), (1, 1), 2),         # depthwise, all padding
    ((2, 4, 9, 9), 3, (3, 3), (1, 1), (2, 2, 2, 2), (2, 2), 1),         # dilation
    ((2, 8, 5, 5), 4, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),         # pointwise
    ((1, 8, 20, 20), 4, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 2),       # pointwise, direct path
    ((2, 3, 6, 6), 2, (1, 1), (2, 2), (1, 0, 0, 1), (1, 1), 1),         # 1x1 strided, padded
    ((1, 1, 1, 1), 1, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 2, 4, 4), 3, (4, 4), (1, 1), (0, 0, 0, 0), (1, 1), 1),         # kernel == input
]

CASES_1D = [
    ((2, 3, 10), 4, (3,), (1,), (0, 0), (1,), 1),
    ((2, 4, 11), 6, (4,), (2,), (1, 2), (2,), 2),
    ((3, 5, 7), 5, (3,), (1,), (1, 1), (1,), 5),
    ((1, 2, 9), 3, (1,), (1,), (0, 0), (1,), 1),
]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("case", CASES_2D + CASES_1D)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_forward(rng, case, dtype, bias):
    xs, co, k, s, p, d, g = case
    x = rand(rng, xs, dtype)
    w = rand(rng, (co, xs[1] // g) + k, dtype)
    b = rand(rng, (co,), dtype) if bias else None
    fn = hl.conv2d if len(xs) == 4 else hl.conv1d
    inputs = [x, w] + ([b] if bias else [])
    check_op(lambda x_, w_, *b_: fn(x_, w_, b_[0] if b_ else None, stride=s, padding=p,
                                    dilation=d, groups=g),
             lambda x_, w_, *b_: ref_conv(x_, w_, b_[0] if b_ else None, s, p, d, g),
             inputs, **TOL[dtype])


def test_conv_batch_larger_than_chunk(rng):
    # enough samples that the column buffer is filled more than once
    x = rand(rng, (40, 3, 30, 30))
    w = rand(rng, (5, 3, 3, 3))
    b = rand(rng, (5,))
    assert_close(hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=1),
                 ref_conv(x, w, b, pads=[1] * 4), **TOL[np.float32])


@pytest.mark.parametrize("shape,k,s,d", [((1, 2, 7, 7), (3, 3), (1, 1), (1, 1)),
                                         ((2, 3, 8, 9), (2, 3), (2, 2), (1, 1)),
                                         ((1, 2, 10, 10), (3, 3), (3, 1), (2, 1)),
                                         ((2, 2, 9), (4,), (2,), (1,))])
def test_conv_padding_same_and_valid(rng, shape, k, s, d):
    S = len(shape) - 2
    x = rand(rng, shape)
    w = rand(rng, (3, shape[1]) + k)
    fn = hl.conv2d if S == 2 else hl.conv1d
    got = fn(hl.tensor(x), hl.tensor(w), stride=s, padding="same", dilation=d)
    # SAME_UPPER: ceil(in / stride) outputs, the odd pad at the end
    pads_b, pads_e = [], []
    for i in range(S):
        total = max((-(-shape[2 + i] // s[i]) - 1) * s[i] + d[i] * (k[i] - 1) + 1 - shape[2 + i], 0)
        pads_b.append(total // 2)
        pads_e.append(total - total // 2)
    want = ref_conv(x, w, None, list(s), pads_b + pads_e, list(d))
    assert got.shape[2:] == tuple(-(-n // st_) for n, st_ in zip(shape[2:], s))
    assert_close(got, want, **TOL[np.float32])
    assert_close(fn(hl.tensor(x), hl.tensor(w), stride=s, padding="valid", dilation=d),
                 ref_conv(x, w, None, list(s), None, list(d)), **TOL[np.float32])


@pytest.mark.parametrize("shape,k,pads", [((2, 32, 40, 40), 3, 1), ((1, 48, 30, 30), 5, 0),
                                          ((1, 40, 3000), 9, 4)])
def test_conv_row_bands(rng, shape, k, pads):
    # one sample's columns exceed the ~1 MB work buffer: the kernels go by bands of rows
    S = len(shape) - 2
    x = rand(rng, shape, np.float64)
    w = rand(rng, (8, shape[1]) + (k,) * S, np.float64)
    b = rand(rng, (8,), np.float64)
    fwd = hl.conv2d if S == 2 else hl.conv1d
    y = fwd(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=pads)
    assert_close(y, ref_conv(x, w, b, pads=[pads] * (2 * S)), **TOL[np.float64])
    dy = rand(rng, y.shape, np.float64)
    # the adjoint identities <conv(x), dy> = <x, grad_input(dy)> = <w, grad_weight(dy)>
    gi = (hl.ops.conv2d_grad_input if S == 2 else hl.ops.conv1d_grad_input)(
        hl.tensor(dy), hl.tensor(w), shape, padding=pads).numpy()
    gw = (hl.ops.conv2d_grad_weight if S == 2 else hl.ops.conv1d_grad_weight)(
        hl.tensor(dy), hl.tensor(x), w.shape, padding=pads).numpy()
    lhs = float(((y.numpy() - b.reshape((1, -1) + (1,) * S)) * dy).sum())
    assert np.isclose(lhs, float((x * gi).sum()), rtol=1e-10)
    assert np.isclose(lhs, float((w * gw).sum()), rtol=1e-10)
    try:
        import torch
    except ImportError:
        return
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = torch.from_numpy(w).requires_grad_(True)
    conv = torch.nn.functional.conv2d if S == 2 else torch.nn.functional.conv1d
    conv(tx, tw, padding=pads).backward(torch.from_numpy(dy))
    assert_close(gi, tx.grad.numpy(), **TOL[np.float64])
    assert_close(gw, tw.grad.numpy(), **TOL[np.float64])


def test_conv_size_zero_batch_and_channels(rng):
    x = np.zeros((0, 3, 5, 5), np.float32)
    w = rand(rng, (4, 3, 3, 3))
    assert hl.conv2d(hl.tensor(x), hl.tensor(w)).shape == (0, 4, 3, 3)
    # no output channels
    assert hl.conv2d(hl.tensor(rand(rng, (2, 3, 5, 5))), hl.tensor(np.zeros((0, 3, 3, 3),
                                                                           np.float32))).shape \
        == (2, 0, 3, 3)
    # no input channels: the output is the bias
    b = rand(rng, (2,))
    y = hl.conv2d(hl.tensor(np.zeros((2, 0, 5, 5), np.float32)),
                  hl.tensor(np.zeros((2, 0, 3, 3), np.float32)), hl.tensor(b))
    assert_close(y, np.broadcast_to(b.reshape(1, 2, 1, 1), (2, 2, 3, 3)))


def test_conv_into_out_and_guard(rng):
    from tests.ops.harness import check_guard
    x, w = rand(rng, (2, 3, 6, 6)), rand(rng, (4, 3, 3, 3))

    def write(out):
        hl.ops.conv._core.call("conv", hl.tensor(x)._h, hl.tensor(w)._h, None, [1, 1],
                               [0, 0, 0, 0], [1, 1], 1, hl.ops.conv._core.out(out._h))
    out = check_guard(write, (2, 4, 4, 4))
    assert_close(out, ref_conv(x, w), **TOL[np.float32])


# ---- transposed ------------------------------------------------------------------------

# (x shape, C_out, kernel, stride, pads, dilation, output_padding, groups)
TCASES = [
    ((2, 3, 5, 4), 4, (3, 3), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0), 1),
    ((2, 4, 5, 5), 6, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1), (1, 1), 2),
    ((1, 2, 4, 6), 3, (2, 3), (2, 3), (0, 1, 1, 0), (1, 1), (1, 2), 1),
    ((2, 3, 4, 4), 2, (3, 3), (1, 1), (1, 1, 1, 1), (2, 2), (1, 0), 1),   # op < dilation
    ((2, 4, 6, 6), 4, (4, 4), (2, 2), (1, 1, 1, 1), (1, 1), (0, 0), 4),   # depthwise
    ((2, 3, 7), 5, (3,), (2,), (1, 0), (1,), (1,), 1),
    ((1, 4, 5), 2, (2,), (1,), (0, 0), (3,), (0,), 2),
    ((2, 4, 16, 17), 6, (1, 1), (1, 1), (0, 0, 0, 0), (1, 1), (0, 0), 2),  # pointwise, direct
]


@pytest.mark.parametrize("case", TCASES)
@pytest.mark.parametrize("bias", [True, False])
def test_conv_transpose(rng, case, bias):
    xs, co, k, s, p, d, op, g = case
    x = rand(rng, xs)
    w = rand(rng, (xs[1], co // g) + k)
    b = rand(rng, (co,)) if bias else None
    fn = hl.conv_transpose2d if len(xs) == 4 else hl.conv_transpose1d
    inputs = [x, w] + ([b] if bias else [])
    check_op(lambda x_, w_, *b_: fn(x_, w_, b_[0] if b_ else None, stride=s, padding=p,
                                    output_padding=op, groups=g, dilation=d),
             lambda x_, w_, *b_: ref_conv_transpose(x_, w_, b_[0] if b_ else None, s, p, d, op,
                                                    g),
             inputs, **TOL[np.float32])


@pytest.mark.parametrize("case", [c for c in TCASES if len(c[0]) == 4 and c[4][:2] == c[4][2:]])
def test_conv_transpose_matches_torch(rng, case):
    torch = pytest.importorskip("torch")
    xs, co, k, s, p, d, op, g = case
    x, w, b = rand(rng, xs), rand(rng, (xs[1], co // g) + k), rand(rng, (co,))
    want = torch.nn.functional.conv_transpose2d(
        torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), stride=s, padding=p[:2],
        output_padding=op, groups=g, dilation=d).numpy()
    got = hl.conv_transpose2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), stride=s,
                              padding=p[:2], output_padding=op, groups=g, dilation=d)
    assert_close(got, want, **TOL[np.float32])


# ---- backward ----------------------------------------------------------------------------

GRAD_CASES = [c for c in CASES_2D + CASES_1D if c[0][0] > 0]


@pytest.mark.parametrize("case", GRAD_CASES)
def test_conv_grads_match_torch(rng, case):
    torch = pytest.importorskip("torch")
    xs, co, k, s, p, d, g = case
    S = len(xs) - 2
    x = rand(rng, xs, np.float64)
    w = rand(rng, (co, xs[1] // g) + k, np.float64)
    tx = torch.from_numpy(x).requires_grad_(True)
    tw = torch.from_numpy(w).requires_grad_(True)
    tpad = torch.nn.functional.pad(tx, [v for i in reversed(range(S)) for v in (p[i], p[S + i])])
    conv = torch.nn.functional.conv2d if S == 2 else torch.nn.functional.conv1d
    ty = conv(tpad, tw, stride=s, dilation=d, groups=g)
    dy = rand(rng, tuple(ty.shape), np.float64)
    ty.backward(torch.from_numpy(dy))
    gi_fn = hl.ops.conv2d_grad_input if S == 2 else hl.ops.conv1d_grad_input
    gw_fn = hl.ops.conv2d_grad_weight if S == 2 else hl.ops.conv1d_grad_weight
    for dt in (np.float64, np.float32):
        for layout in ("contiguous", "transposed"):
            mk = LAYOUTS[layout]
            dyt, wt, xt = mk(dy.astype(dt)), mk(w.astype(dt)), mk(x.astype(dt))
            gi = gi_fn(dyt, wt, xs, stride=s, padding=p, dilation=d, groups=g)
            gw = gw_fn(dyt, xt, w.shape, stride=s, padding=p, dilation=d, groups=g)
            assert gi.dtype.np == dt and gw.dtype.np == dt
            assert_close(gi, tx.grad.numpy(), **TOL[dt], what=f"grad input {dt} {layout}")
            assert_close(gw, tw.grad.numpy(), **TOL[dt], what=f"grad weight {dt} {layout}")


@pytest.mark.parametrize("case", [
    ((1, 2, 4, 5), 2, (2, 3), (2, 1), (1, 0, 0, 1), (1, 2), 1),
    ((2, 2, 5), 4, (3,), (2,), (1, 2), (1,), 2),
])
def test_conv_grads_finite_differences(rng, case):
    xs, co, k, s, p, d, g = case
    S = len(xs) - 2
    x = rand(rng, xs, np.float64)
    w = rand(rng, (co, xs[1] // g) + k, np.float64)
    fwd = hl.conv2d if S == 2 else hl.conv1d
    y = fwd(hl.tensor(x), hl.tensor(w), stride=s, padding=p, dilation=d, groups=g).numpy()
    dy = rand(rng, y.shape, np.float64)

    def loss_x(xv):
        return float((fwd(hl.tensor(xv), hl.tensor(w), stride=s, padding=p, dilation=d,
                          groups=g).numpy() * dy).sum())

    def loss_w(wv):
        return float((fwd(hl.tensor(x), hl.tensor(wv), stride=s, padding=p, dilation=d,
                          groups=g).numpy() * dy).sum())

    gi_fn = hl.ops.conv2d_grad_input if S == 2 else hl.ops.conv1d_grad_input
    gw_fn = hl.ops.conv2d_grad_weight if S == 2 else hl.ops.conv1d_grad_weight
    gi = gi_fn(hl.tensor(dy), hl.tensor(w), xs, stride=s, padding=p, dilation=d, groups=g)
    gw = gw_fn(hl.tensor(dy), hl.tensor(x), w.shape, stride=s, padding=p, dilation=d, groups=g)
    assert_close(gi, numeric_grad(loss_x, x), rtol=1e-6, atol=1e-7)
    assert_close(gw, numeric_grad(loss_w, w), rtol=1e-6, atol=1e-7)


def test_conv_grads_zero_batch(rng):
    w = rand(rng, (4, 3, 3, 3))
    dy = np.zeros((0, 4, 3, 3), np.float32)
    assert hl.ops.conv2d_grad_input(hl.tensor(dy), hl.tensor(w), (0, 3, 5, 5)).shape == (0, 3, 5, 5)
    gw = hl.ops.conv2d_grad_weight(hl.tensor(dy), hl.tensor(np.zeros((0, 3, 5, 5), np.float32)),
                               (4, 3, 3, 3))
    assert_close(gw, np.zeros((4, 3, 3, 3), np.float32))


# ---- the Winograd path (3x3, stride 1, groups 1, float32, >= 16 channels) ----------------

def ref_conv_grad_weight(dy, x, k, pads):
    """dW[o, c, ky, kx] = sum over samples and positions of dy * the shifted, padded input."""
    oh, ow = dy.shape[2:]
    xp = np.pad(x.astype(np.float64), [(0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])])
    dw = np.zeros((dy.shape[1], x.shape[1], k, k))
    for ky, kx in itertools.product(range(k), range(k)):
        dw[:, :, ky, kx] = np.einsum("nohw,nchw->oc", dy.astype(np.float64),
                                     xp[:, :, ky:ky + oh, kx:kx + ow])
    return dw


# (x shape, C_out, pads (top, left, bottom, right)): odd and even sizes, pads 0 to 3, planes
# smaller than a tile, wide rows, and more tiles than one block holds (4 * 35 * 33 = 4620)
WINOGRAD_CASES = [
    ((2, 16, 7, 6), 16, (1, 1, 1, 1)),
    ((1, 32, 5, 9), 16, (0, 0, 0, 0)),
    ((3, 16, 1, 1), 24, (1, 1, 1, 1)),
    ((2, 16, 2, 3), 16, (2, 2, 2, 2)),
    ((1, 17, 11, 13), 19, (2, 0, 1, 3)),
    ((2, 16, 3, 300), 16, (1, 1, 1, 1)),
    ((4, 16, 70, 66), 16, (1, 1, 1, 1)),
]


def winograd_tol(want):
    """rtol 1e-4 and an atol of 1e-5 times the largest |reference| value: the transforms add
    and subtract inputs before the products, so rounding errors scale with the output's
    magnitude rather than each element's (a value near zero in a sum of large terms)."""
    return dict(rtol=1e-4, atol=1e-5 * float(np.abs(want).max()))


@pytest.mark.parametrize("case", WINOGRAD_CASES, ids=str)
def test_winograd_forward_and_grads(rng, case, monkeypatch):
    monkeypatch.setenv("HL_WINOGRAD", "1")  # forward calls with few tiles take it too
    xs, co, p = case
    x, w, b = rand(rng, xs), rand(rng, (co, xs[1], 3, 3)), rand(rng, (co,))
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), None, p)
    y = hl.conv2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=p)
    assert_close(y, want, **winograd_tol(want), what="forward")
    dy = rand(rng, want.shape)
    want_gi = ref_conv_transpose(dy.astype(np.float64), w.astype(np.float64), None, None, p)
    gi = hl.ops.conv2d_grad_input(hl.tensor(dy), hl.tensor(w), xs, padding=p)
    assert_close(gi, want_gi, **winograd_tol(want_gi), what="grad input")
    want_gw = ref_conv_grad_weight(dy, x, 3, p)
    gw = hl.ops.conv2d_grad_weight(hl.tensor(dy), hl.tensor(x), w.shape, padding=p)
    assert_close(gw, want_gw, **winograd_tol(want_gw), what="grad weight")


def test_winograd_transposed_conv_with_bias(rng):
    """A stride-1 transposed convolution is grad_input plus a bias: the same path."""
    x, w, b = rand(rng, (2, 16, 9, 8)), rand(rng, (16, 20, 3, 3)), rand(rng, (20,))
    want = ref_conv_transpose(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64),
                              None, (1, 0, 1, 2))
    got = hl.conv_transpose2d(hl.tensor(x), hl.tensor(w), hl.tensor(b), padding=(1, 0, 1, 2))
    assert_close(got, want, **winograd_tol(want))


def test_winograd_agrees_with_im2col(rng, monkeypatch):
    """HL_WINOGRAD=0 sends the same call through im2col: the two agree to rounding, and differ
    somewhere (so the Winograd path really ran)."""
    x, w, dy = rand(rng, (2, 32, 12, 10)), rand(rng, (24, 32, 3, 3)), rand(rng, (2, 24, 12, 10))
    X, W, DY = hl.tensor(x), hl.tensor(w), hl.tensor(dy)

    def three():
        return [hl.conv2d(X, W, padding=1).numpy(),
                hl.ops.conv2d_grad_input(DY, W, x.shape, padding=1).numpy(),
                hl.ops.conv2d_grad_weight(DY, X, w.shape, padding=1).numpy()]

    fast = three()
    monkeypatch.setenv("HL_WINOGRAD", "0")
    direct = three()
    for a, d, what in zip(fast, direct, ["forward", "grad input", "grad weight"]):
        assert_close(a, d, **winograd_tol(d), what=what)
        assert not np.array_equal(a, d), f"{what}: the Winograd path did not run"


# ---- bad inputs ----------------------------------------------------------------------------

def _t(shape, dtype=np.float32):
    return hl.tensor(np.ones(shape, dtype))


@pytest.mark.parametrize("call,exc,match", [
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 2, 3, 3))), errors.ShapeError, "3 channels"),
    (lambda: hl.conv2d(_t((1, 4, 5, 5)), _t((3, 2, 3, 3)), groups=2), errors.ShapeError,
     "not divisible by groups"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 1, 3, 3)), groups=2), errors.ShapeError,
     "groups=2"),
    (lambda: hl.conv2d(_t((1, 3, 4, 4)), _t((4, 3, 5, 5))), errors.ShapeError,
     "output size would be 0"),
    (lambda: hl.conv2d(_t((1, 3, 4, 4)), _t((4, 3, 3, 3)), dilation=3), errors.ShapeError,
     "kernel spans 7"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), stride=0), errors.ValueError,
     "stride must be positive"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), dilation=(1, -1)), errors.ValueError,
     "dilation must be positive"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), padding=-1), errors.ValueError,
     "pads must be non-negative"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), groups=0), errors.ValueError,
     "groups must be a positive"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3), np.float64)), errors.DTypeError,
     "float64"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5), np.int32), _t((4, 3, 3, 3), np.int32)),
     errors.DTypeError, "float32 or float64"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), _t((3,))), errors.ShapeError,
     "bias of shape \\(4,\\)"),
    (lambda: hl.conv2d(_t((3, 5, 5)), _t((4, 3, 3, 3))), errors.ShapeError, "4-D input"),
    (lambda: hl.ops.conv._core.call("conv", _t((1, 3, 5, 5))._h, _t((4, 3, 3))._h, None, None,
                                    None, None, 1, hl.ops.conv._core.OUT),
     errors.ShapeError, "weight must be"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), padding="full"), errors.ValueError,
     "'same' or 'valid'"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 3, 3)), padding=(1, 2, 3)),
     errors.ValueError, "padding must be"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5)), _t((4, 3, 0, 3))), errors.ShapeError,
     "must be positive"),
    (lambda: hl.ops.conv2d_grad_input(_t((1, 4, 3, 3)), _t((4, 3, 3, 3)), (1, 3, 6, 6)),
     errors.ShapeError, "gives spatial size \\(4, 4\\)"),
    (lambda: hl.ops.conv2d_grad_input(_t((1, 4, 3, 3)), _t((4, 3, 3, 3)), (2, 3, 5, 5)),
     errors.ShapeError, "expected N = 1"),
    (lambda: hl.ops.conv2d_grad_input(_t((1, 4, 3, 3)), _t((4, 3, 3, 3)), (1, 3, -5, 5)),
     errors.ValueError, "negative size"),
    (lambda: hl.ops.conv2d_grad_input(_t((1, 5, 3, 3)), _t((4, 3, 3, 3)), (1, 3, 5, 5)),
     errors.ShapeError, "5 channels"),
    (lambda: hl.ops.conv2d_grad_weight(_t((1, 4, 3, 3)), _t((1, 3, 5, 5)), (4, 3, 2, 2)),
     errors.ShapeError, "gives spatial size \\(4, 4\\)"),
    (lambda: hl.ops.conv2d_grad_weight(_t((1, 4, 3, 3)), _t((1, 3, 5, 5)), (4, 2, 3, 3)),
     errors.ShapeError, "does not fit"),
    (lambda: hl.ops.conv2d_grad_weight(_t((1, 4, 3, 3)), _t((1, 3, 5, 5), np.float64),
                                   (4, 3, 3, 3)), errors.DTypeError, "one dtype"),
    (lambda: hl.conv_transpose2d(_t((1, 3, 4, 4)), _t((3, 2, 3, 3)), stride=2,
                                 output_padding=2), errors.ValueError, "output_padding"),
    (lambda: hl.conv_transpose2d(_t((1, 3, 4, 4)), _t((2, 2, 3, 3))), errors.ShapeError,
     "expects 2"),
    (lambda: hl.conv_transpose2d(_t((1, 3, 1, 1)), _t((3, 2, 1, 1)), padding=1),
     errors.ShapeError, "must be positive"),
    (lambda: hl.conv2d(_t((1, 3, 5, 5), np.float16), _t((4, 3, 3, 3), np.float16)),
     errors.DTypeError, "float16"),
])
def test_conv_bad_inputs(call, exc, match):
    with pytest.raises(exc, match=match):
        call()


def test_conv_output_overlapping_input_is_refused(rng):
    x = hl.tensor(rand(rng, (1, 2, 4, 4)))
    w = hl.tensor(rand(rng, (2, 2, 1, 1)))
    with pytest.raises(errors.ValueError, match="overlaps"):
        hl.ops.conv._core.call("conv", x._h, w._h, None, None, None, None, 1,
                               hl.ops.conv._core.out(x._h))


# ---- properties ------------------------------------------------------------------------------

def _valid(xs, co, cg, k, s, p, d, g):
    S = len(xs) - 2
    if g < 1 or min(s) < 1 or min(d) < 1 or min(p) < 0 or min(k) < 1:
        return False
    if cg * g != xs[1] or co % g:
        return False
    return all(out_size(xs[2 + i], k[i], s[i], p[i], p[S + i], d[i]) >= 1 for i in range(S))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(S=st.sampled_from([1, 2]), n=st.integers(0, 2), cg=st.integers(0, 3),
       g=st.integers(1, 3), cog=st.integers(0, 3), size=st.integers(1, 7),
       k=st.integers(1, 4), s=st.integers(1, 3), p=st.integers(0, 3), d=st.integers(1, 3),
       pe=st.integers(0, 2), extra_c=st.integers(0, 1),
       broken=st.sampled_from([None] * 6 + ["g", "k", "s", "p", "d", "size"]), data=st.data())
def test_conv_property_matches_reference_or_raises(S, n, cg, g, cog, size, k, s, p, d, pe,
                                                   extra_c, broken, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31)))
    bad = data.draw(st.integers(-2, 0))   # a value to break one parameter with
    if broken == "g":
        g = bad
    elif broken == "k":
        k = bad
    elif broken == "s":
        s = bad
    elif broken == "p":
        p = bad
    elif broken == "d":
        d = bad
    elif broken == "size":
        size = 0
    gg = max(g, 1)
    c_in = cg * gg + (extra_c if data.draw(st.booleans()) else 0)  # sometimes not divisible
    co = cog * gg
    xs = (n, c_in) + (size,) * S
    ks = (max(k, 0),) * S
    x = rand(rng, xs)
    w = rand(rng, (co, cg) + ks)
    pads = [p] * S + [pe] * S
    args = dict(stride=(s,) * S, padding=pads, dilation=(d,) * S, groups=g)
    fn = hl.conv2d if S == 2 else hl.conv1d
    try:
        got = fn(hl.tensor(x), hl.tensor(w), **args)
    except errors.HLError:
        assert not _valid(xs, co, cg, ks, (s,) * S, pads, (d,) * S, g)
        return
    assert _valid(xs, co, cg, ks, (s,) * S, pads, (d,) * S, g)
    assert_close(got, ref_conv(x, w, None, [s] * S, pads, [d] * S, g), **TOL[np.float32])


def test_conv_suggests_channels_first_for_channels_last_input():
    nhwc = hl.randn(2, 8, 8, 3)
    with pytest.raises(errors.ShapeError, match=r"channels-last.*x\.permute\(0, 3, 1, 2\)"):
        hl.conv2d(nhwc, hl.randn(4, 3, 3, 3))
    # following the advice works, and gives what the NCHW input gives
    y = hl.conv2d(nhwc.permute(0, 3, 1, 2), hl.ones(4, 3, 3, 3))
    assert y.shape == (2, 4, 6, 6)
    with pytest.raises(errors.ShapeError, match=r"channels-last \(N, L, C\)"):
        hl.conv1d(hl.randn(2, 10, 3), hl.randn(4, 3, 3))
