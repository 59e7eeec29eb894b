"""hl from several Python threads at once (docs/threads.md): cffi releases the GIL during core
calls, so kernels, the allocator, OpenBLAS (through the OpenMP threads callback) and the
thread-local error messages all run concurrently. Each thread must get, bit for bit, what the
same call gives on one thread, and each thread's errors must carry its own message.

Every kernel family runs here (element-wise, reductions, scans, GEMM, batched GEMM, im2col and
Winograd convolutions forward and backward, pooling, normalisation, softmax, indexing, resize,
random draws with a generator per thread, top-k, layout copies, linear algebra), and one prepared
ONNX model is served from two threads. Before the OpenBLAS buffer-slot fix in blas_threads.c, the
Winograd convolution here differed from the one-thread result in about a third of the runs."""
import os

import numpy as np
import pytest

import hl
from tests.concurrency import run_threads

ZOO = os.path.join(os.path.dirname(__file__), "..", "..", "shared", "onnx-zoo")
ZOO = ZOO if os.path.isdir(ZOO) else "/work/shared/onnx-zoo"


def _inputs(seed):
    rng = np.random.default_rng(seed)
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {"a": f(64, 48), "b": f(48, 32), "x": f(2, 3, 10, 10), "w": f(4, 3, 3, 3),
            "xw": f(2, 24, 12, 12), "ww": f(20, 24, 3, 3), "dyw": f(2, 20, 12, 12),
            "batch": f(16, 32, 24), "batch2": f(16, 24, 40), "v": f(4096),
            "img": f(2, 8, 17, 13), "idx": rng.integers(0, 64, 200), "seq": f(3, 50)}


def _kernels(d):
    """name -> numpy array: one call of every kernel family on the inputs d."""
    T = hl.tensor
    a, b, x, w = T(d["a"]), T(d["b"]), T(d["x"]), T(d["w"])
    xw, ww, dyw = T(d["xw"]), T(d["ww"]), T(d["dyw"])
    img, v = T(d["img"]), T(d["v"])
    g = hl.random.Generator(7)
    out = {
        "matmul": (a @ b).relu().sum(axis=0),
        "batched_matmul": T(d["batch"]) @ T(d["batch2"]),
        "gemm_big": T(np.tile(d["a"], (8, 8))) @ T(np.tile(d["b"], (8, 8))),
        "elementwise": (v.exp() * v.tanh() + v.sigmoid()) / (v.abs() + 1),
        "reduce": hl.stack([v.sum(), v.mean(), v.std(), v.max(), hl.norm(v)]),
        "cumsum": hl.cumsum(T(d["seq"]), axis=1),
        "conv_im2col": hl.conv2d(x, w, padding=1),
        "conv_strided": hl.conv2d(xw, ww, stride=2, padding=1),
        "conv_winograd": hl.conv2d(xw, ww, padding=1),
        "conv_winograd_grad_input": hl.ops.conv2d_grad_input(dyw, ww, xw.shape, padding=1),
        "conv_winograd_grad_weight": hl.ops.conv2d_grad_weight(dyw, xw, ww.shape, padding=1),
        "max_pool": hl.max_pool2d(img, 3, stride=2, padding=1),
        "avg_pool": hl.avg_pool2d(img, 2),
        "layer_norm": hl.layer_norm(T(d["batch"]), (24,)),
        "group_norm": hl.group_norm(img, 4),
        "softmax": hl.softmax(T(d["batch"]), axis=-1),
        "log_softmax": hl.log_softmax(a, axis=1),
        "gather": hl.take(v, T(d["idx"])),
        "getitem": img[:, ::2, 3:9, ::-1].contiguous(),
        "transpose": img.permute(0, 2, 3, 1).contiguous(),
        "resize": hl.interpolate(img, scale_factor=2, mode="bilinear"),
        "uniform": hl.uniform(1000, generator=g),
        "normal": hl.normal(1000, generator=g),
        "topk": hl.topk(v, 10)[0],
        "gemm_op": hl.gemm(a, b, T(d["a"][:, :32]), alpha=0.5, beta=2.0),
        "dot": hl.dot(v, v),
        "outer": hl.outer(v[:100], v[:50]),
    }
    return {k: t.numpy().copy() for k, t in out.items()}


def _assert_identical(got, want, where):
    for k in want:
        assert got[k].dtype == want[k].dtype and got[k].shape == want[k].shape, (where, k)
        bad = np.count_nonzero(np.atleast_1d(got[k]).view(np.uint8) !=
                              np.atleast_1d(want[k]).view(np.uint8))
        assert bad == 0, f"{where}: {k} differs from the one-thread result in {bad} bytes"


def test_every_kernel_family_bit_for_bit_from_threads():
    inputs = [_inputs(s) for s in range(4)]
    want = [_kernels(d) for d in inputs]  # one thread
    # numpy as an outside reference for a few, so the one-thread results are not just
    # self-consistent
    np.testing.assert_allclose(want[0]["matmul"],
                               np.maximum(inputs[0]["a"] @ inputs[0]["b"], 0).sum(axis=0),
                               rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(want[0]["batched_matmul"], inputs[0]["batch"] @ inputs[0]["batch2"],
                               rtol=1e-4, atol=1e-4)
    for rep in range(3):
        got = run_threads(lambda i: [_kernels(inputs[i]) for _ in range(2)], 4)
        for i in range(4):
            for r in got[i]:
                _assert_identical(r, want[i], f"thread {i}, round {rep}")


def test_winograd_convolution_under_two_threads():
    """The reported case: float32 3x3 stride-1 with >= 16 channels, two threads."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 32, 16, 16)).astype(np.float32)
    w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    want = hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy().copy()

    def serve(_):
        return [hl.conv2d(hl.tensor(x), hl.tensor(w), padding=1).numpy().copy()
                for _ in range(40)]

    for outs in run_threads(serve, 2):
        for y in outs:
            assert np.array_equal(y, want)


def test_errors_carry_their_own_threads_message():
    def fail(seed):
        seen = []
        for _ in range(20):
            try:
                hl.ones(seed + 1, 2) + hl.ones(3, 5)
            except hl.errors.ShapeError as e:
                seen.append(str(e))
        return seen

    for seed, messages in enumerate(run_threads(fail, 4)):
        assert len(messages) == 20
        for m in messages:
            assert f"({seed + 1}, 2)" in m, m


@pytest.mark.parametrize("name", ["resnet18", "bert_squad"])
def test_prepared_onnx_model_served_from_two_threads(name):
    path = os.path.join(ZOO, f"{name}-op17.onnx")
    if not os.path.exists(path):
        pytest.fail(f"the ONNX zoo is missing: {path}")
    from hl.onnx import prepare
    stored = np.load(os.path.join(ZOO, f"{name}.npz"))
    rep = prepare(path)
    feeds = {k[3:]: stored[k] for k in stored.files if k.startswith("in_")}
    want = [o.copy() for o in rep.run(feeds)]
    ref = [stored[k] for k in stored.files if k.startswith("out_")]
    np.testing.assert_allclose(want[0], ref[0], rtol=1e-3, atol=1e-4)  # onnxruntime's

    def serve(_):
        return [[o.copy() for o in rep.run(feeds)] for _ in range(6)]

    for outs in run_threads(serve, 2):
        for o in outs:
            for got, w in zip(o, want):
                assert np.array_equal(got, w)
