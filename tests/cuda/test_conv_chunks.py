"""Convolution on cuda over chunks of the batch (libcore/cuda/conv.cu, docs/cuda.md "Convolution
in chunks"): one im2col, one GEMM and one layout pass per chunk of samples, whatever the groups.
The emulation's hook hl_cuda_emu_conv_workspace shrinks the work buffer's budget so that small
tensors split into chunks, uneven ones included; each result is checked against PyTorch CPU in
float64 (1e-10 relative: only the summation order differs), the chunked result against the
unchunked one, the launches against the design's count, and repeated runs for equal bits."""
import ctypes
import os
import subprocess
import sys

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import hl
from hl import ops

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(not hl.cuda.is_emulated(),
                                 reason="needs the emulation's conv_workspace and count hooks")]


def _emu():
    from hl import _cuda_libs
    lib = ctypes.CDLL(_cuda_libs.library_path())
    lib.hl_cuda_emu_conv_workspace.argtypes = [ctypes.c_size_t]
    return lib


@pytest.fixture
def workspace():
    """Sets the conv work buffer's budget in bytes for the test; the default afterwards."""
    lib = _emu()
    yield lib.hl_cuda_emu_conv_workspace
    lib.hl_cuda_emu_conv_workspace(0)


def _per_sample_bytes(c_in, c_out, k, p, groups=1, esz=8):
    """conv.cu's chunking: columns (C_in/groups kh kw per group, groups of them) and the
    product, P positions each, per sample."""
    return (c_in * k + c_out) * p * esz


# (N, C_in, H, W), (C_out, C_in/groups, kh, kw), stride, padding, dilation, groups
GEOMETRIES = [
    ((5, 3, 7, 6), (4, 3, 3, 3), (1, 1), (1, 1), (1, 1), 1),
    ((7, 4, 6, 7), (6, 2, 3, 2), (2, 1), (1, 0), (1, 2), 2),
    ((5, 6, 5, 5), (6, 1, 3, 3), (1, 2), (2, 1), (2, 1), 6),   # depthwise
    ((3, 6, 8, 5), (9, 2, 1, 3), (3, 2), (0, 2), (1, 1), 3),
]


def _run(x, w, dy, geometry, device):
    _, _, stride, padding, dilation, groups = geometry
    X, W, DY = (hl.tensor(a, device=device) for a in (x, w, dy))
    y = ops.conv2d_forward(X, W, None, stride, padding, dilation, groups)
    dx = ops.conv2d_grad_input(DY, W, x.shape, stride, padding, dilation, groups)
    dw = ops.conv2d_grad_weight(DY, X, w.shape, stride, padding, dilation, groups)
    return [t.numpy() for t in (y, dx, dw)]


def _torch(x, w, dy, geometry):
    _, _, stride, padding, dilation, groups = geometry
    tx, tw, tdy = (torch.from_numpy(a) for a in (x, w, dy))
    y = F.conv2d(tx, tw, None, stride, padding, dilation, groups)
    dx = torch.nn.grad.conv2d_input(x.shape, tw, tdy, stride, padding, dilation, groups)
    dw = torch.nn.grad.conv2d_weight(tx, w.shape, tdy, stride, padding, dilation, groups)
    return [t.numpy() for t in (y, dx, dw)]


def _inputs(geometry, rng):
    xs, ws, stride, padding, dilation, groups = geometry
    x = rng.standard_normal(xs)
    w = rng.standard_normal(ws)
    y_shape = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), None, stride, padding,
                       dilation, groups).shape
    return x, w, rng.standard_normal(tuple(y_shape)), y_shape


@pytest.mark.parametrize("per_chunk", [1, 2, 3])
@pytest.mark.parametrize("geometry", GEOMETRIES, ids=["plain", "groups2-dilated", "depthwise",
                                                      "groups3-1x3"])
def test_chunks_match_pytorch_and_the_whole_batch(geometry, per_chunk, workspace):
    x, w, dy, y_shape = _inputs(geometry, np.random.default_rng(per_chunk))
    whole = _run(x, w, dy, geometry, "cuda")
    p = y_shape[2] * y_shape[3]
    kk = w.shape[2] * w.shape[3]
    workspace(_per_sample_bytes(x.shape[1], w.shape[0], kk, p) * per_chunk)
    chunked = _run(x, w, dy, geometry, "cuda")
    want = _torch(x, w, dy, geometry)
    for name, got, full, ref in zip(("y", "dx", "dw"), chunked, whole, want):
        np.testing.assert_allclose(got, ref, rtol=1e-10, atol=1e-10, err_msg=name)
        np.testing.assert_allclose(got, full, rtol=1e-12, atol=1e-12, err_msg=name)


@pytest.mark.parametrize("dtype,tol", [("float32", 2e-5), ("float16", 2e-2)])
def test_chunks_in_float32_and_float16(dtype, tol, workspace):
    geometry = GEOMETRIES[1]
    x, w, dy, y_shape = _inputs(geometry, np.random.default_rng(5))
    want = _torch(x, w, dy, geometry)
    workspace(100)  # less than one sample: a chunk per sample
    _, _, stride, padding, dilation, groups = geometry
    X, W, DY = (hl.tensor(a.astype(np.float32), device="cuda").astype(dtype)
                for a in (x, w, dy))
    got = [ops.conv2d_forward(X, W, None, stride, padding, dilation, groups),
           ops.conv2d_grad_input(DY, W, x.shape, stride, padding, dilation, groups),
           ops.conv2d_grad_weight(DY, X, w.shape, stride, padding, dilation, groups)]
    for name, g, ref in zip(("y", "dx", "dw"), got, want):
        assert g.dtype == hl.dtype(dtype)
        scale = np.abs(ref).max()
        np.testing.assert_allclose(g.astype("float32").numpy(), ref, rtol=tol,
                                   atol=tol * scale, err_msg=name)


def test_conv_transpose_with_bias_over_chunks(workspace):
    """conv_transpose2d is conv_grad_input plus the bias, added by the gather of each chunk."""
    rng = np.random.default_rng(3)
    x, w, b = rng.standard_normal((5, 4, 4, 3)), rng.standard_normal((4, 3, 3, 3)), \
        rng.standard_normal(6)
    want = F.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                              stride=2, padding=1, output_padding=1, groups=2).numpy()
    workspace(1)
    got = hl.conv_transpose2d(hl.tensor(x, device="cuda"), hl.tensor(w, device="cuda"),
                              hl.tensor(b, device="cuda"), stride=2, padding=1,
                              output_padding=1, groups=2).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


def test_fused_conv_with_residual_over_chunks(workspace):
    """conv_fused's epilogue runs in each chunk's layout pass: the residual is read at the
    chunk's own samples."""
    rng = np.random.default_rng(4)
    x, w = rng.standard_normal((5, 3, 5, 5)), rng.standard_normal((4, 3, 3, 3))
    b, r = rng.standard_normal(4), rng.standard_normal((5, 4, 5, 5))
    want = np.maximum(F.conv2d(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b),
                               padding=1).numpy() + r, 0)
    workspace(_per_sample_bytes(3, 4, 9, 25) * 2)
    got = ops.conv_fused_forward(*(hl.tensor(a, device="cuda") for a in (x, w, b, r)),
                                 act="relu", padding=1).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("groups", [1, 4])
def test_launches_per_chunk_not_per_sample(groups, workspace):
    """Per chunk: conv 2 kernels and 1 GEMM; conv_grad_input 2 and 1; conv_grad_weight 2 and
    1 - whatever the number of samples and groups (it was 2 launches per sample and group)."""
    lib = _emu()
    rng = np.random.default_rng(6)
    geometry = ((8, 4, 6, 6), (8, 4 // groups, 3, 3), (1, 1), (1, 1), (1, 1), groups)
    x, w, dy, _ = _inputs(geometry, rng)
    X, W, DY = (hl.tensor(a, device="cuda") for a in (x, w, dy))
    _, _, stride, padding, dilation, g = geometry
    calls = [lambda: ops.conv2d_forward(X, W, None, stride, padding, dilation, g),
             lambda: ops.conv2d_grad_input(DY, W, x.shape, stride, padding, dilation, g),
             lambda: ops.conv2d_grad_weight(DY, X, w.shape, stride, padding, dilation, g)]
    for chunks, budget in ((1, 0), (4, _per_sample_bytes(4, 8, 9, 36) * 2)):
        workspace(budget)
        for call in calls:
            k0, g0 = lib.hl_cuda_emu_launch_count(), lib.hl_cuda_emu_gemm_count()
            call()
            hl.cuda.synchronize()
            assert lib.hl_cuda_emu_gemm_count() - g0 == chunks
            assert lib.hl_cuda_emu_launch_count() - k0 == 2 * chunks


def test_repeated_runs_give_the_same_bits(workspace):
    geometry = GEOMETRIES[1]
    x, w, dy, _ = _inputs(geometry, np.random.default_rng(8))
    workspace(3000)
    first = _run(x.astype(np.float32), w.astype(np.float32), dy.astype(np.float32), geometry,
                 "cuda")
    again = _run(x.astype(np.float32), w.astype(np.float32), dy.astype(np.float32), geometry,
                 "cuda")
    for a, b in zip(first, again):
        assert a.tobytes() == b.tobytes()


_TIGHT_MEMORY = r"""
import ctypes, sys
import numpy as np, torch, torch.nn.functional as F
import hl
from hl import ops, _cuda_libs
lib = ctypes.CDLL(_cuda_libs.library_path())
rng = np.random.default_rng(9)
x, w, dy = (rng.standard_normal(s) for s in ((16, 8, 32, 32), (16, 8, 3, 3), (16, 16, 32, 32)))
X, W, DY = (hl.tensor(a, device="cuda") for a in (x, w, dy))
calls = {"conv": lambda: ops.conv2d_forward(X, W, None, (1, 1), (1, 1), (1, 1), 1),
         "grad_input": lambda: ops.conv2d_grad_input(DY, W, x.shape, (1, 1), (1, 1), (1, 1), 1),
         "grad_weight": lambda: ops.conv2d_grad_weight(DY, X, w.shape, (1, 1), (1, 1), (1, 1), 1)}
t = [torch.tensor(a, requires_grad=True) for a in (x, w)]
y = F.conv2d(t[0], t[1], padding=1)
y.backward(torch.tensor(dy))
want = {"conv": y.detach().numpy(), "grad_input": t[0].grad.numpy(),
        "grad_weight": t[1].grad.numpy()}
for name, call in calls.items():
    g0 = lib.hl_cuda_emu_gemm_count()
    got = call().numpy()
    err = np.abs(got - want[name]).max() / np.abs(want[name]).max()
    print(name, lib.hl_cuda_emu_gemm_count() - g0, err)
"""


def _run_fresh(code, **env):
    return subprocess.run([sys.executable, "-c", code], env=dict(os.environ, **env),
                          capture_output=True, text=True, timeout=120)


def test_a_batch_whose_columns_do_not_fit_runs_in_smaller_chunks():
    """Columns for the whole batch (16 samples, 11.5 MB in float64) on a device holding 8 MB:
    each op halves its chunk until the buffer fits and gives PyTorch's answer (float64,
    1e-10 relative), in several GEMMs; with room for no single sample it is a MemoryError
    naming the op (a fresh process each: the device's work buffer starts empty)."""
    r = _run_fresh(_TIGHT_MEMORY, HL_CUDA_EMULATE="1", HL_CUDA_EMU_MEMORY_MB="8")
    assert r.returncode == 0, r.stderr[-3000:]
    rows = [line.split() for line in r.stdout.splitlines()]
    assert [row[0] for row in rows] == ["conv", "grad_input", "grad_weight"]
    for name, gemms, err in rows:
        assert int(gemms) >= 2, (name, gemms)  # chunks, not the whole batch at once
        assert float(err) < 1e-10, (name, err)
    one = ("import numpy as np, hl\n"
           "x = hl.tensor(np.ones((1, 16, 128, 128)), device='cuda')\n"  # 2 MB
           "w = hl.tensor(np.ones((16, 16, 3, 3)), device='cuda')\n"
           "hl.ops.conv2d_forward(x, w, None, (1, 1), (1, 1), (1, 1), 1)\n")  # 21 MB of columns
    r = _run_fresh(one, HL_CUDA_EMULATE="1", HL_CUDA_EMU_MEMORY_MB="8")
    assert r.returncode != 0
    assert "hl.errors.MemoryError: conv: out of cuda memory for a 20971520-byte work buffer " \
           "(im2col columns of 1 samples)" in r.stderr, r.stderr[-2000:]
