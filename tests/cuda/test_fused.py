"""The fused inference ops (conv_fused, matmul_fused), the packed weights (conv_pack,
gemm_pack_b) and the one-pass optimiser update (optim_update) on cuda, beyond the OpCase
registry's cases (tests/opcases/families.py runs each on cuda against the CPU):

- optim_update: hl.opt takes the kernel on cuda, and every configuration of tests/opt/common.py
  gives bit for bit the rule's element-wise sequence on cuda and the CPU kernel's numbers
  (NaN, infinities, huge and tiny gradients included); graph-mode training with the kernel in
  captured plans equals eager training bit for bit.
- the fused ops equal the unfused ops on cuda bit for bit where the epilogue is exact
  (conv/matmul, then add, then the activation: the same roundings in the same order);
- a pack made on one device is valid on the other (one layout everywhere);
- bad operands give the CPU's error, same class and message;
- ONNX prepare(device="cuda") fuses as on the CPU (without packing) and the zoo's ResNet-18
  matches onnxruntime; graph mode fuses Conv + ReLU into conv_fused on cuda.
Tolerances: float32 against onnxruntime rtol 1e-4 / atol 1e-5 (other summation orders through
19 layers); everything else is exact (assert_array_equal).
"""
import os

import numpy as np
import pytest

import hl
from hl import _core, ops

from tests.graph.models import CNN, assert_graph_trains_as_eager, image_batches
from tests.opt.common import (CONFIG_IDS, CONFIGS, assert_same_trajectory, hard_grads,
                               trajectory)

pytestmark = pytest.mark.gpu

# ---- optim_update ----------------------------------------------------------------------

SHAPES = [(3, 5), (), (40, 30)]
STEPS = 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_optim_kernel_on_cuda_equals_the_sequence_and_the_cpu_bitwise(rng, monkeypatch, hl_name,
                                                                      torch_name, kw, dtype):
    values = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = hard_grads(rng, dtype, SHAPES, STEPS)
    kernel = trajectory(hl_name, kw, values, grads, monkeypatch, devices=["cuda"])
    # the element-wise sequence hl.opt ran on cuda before the kernel, and the CPU's kernel
    sequence = trajectory(hl_name, kw, values, grads, monkeypatch, fused=False,
                          devices=["cuda"])
    cpu = trajectory(hl_name, kw, values, grads, monkeypatch)
    assert_same_trajectory(kernel, sequence)
    assert_same_trajectory(kernel, cpu)


# which steps are skipped (checked in tests/opt/common.py's trajectory); never the first: it
# creates the state (SGD's momentum buffer is made empty and written by its first update),
# and graph mode records a step only after the eager steps that made the slots, so a
# skipped step always finds its state written
SKIPS = [False, True, False, True]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("hl_name,torch_name,kw", CONFIGS, ids=CONFIG_IDS)
def test_optim_kernel_on_cuda_reads_the_skip_flag_as_the_cpu_does(rng, monkeypatch, hl_name,
                                                                  torch_name, kw, dtype):
    """hl.amp's skip flag on the device: a set flag writes nothing, a clear one is the plain
    update; cuda and the CPU kernel agree bit for bit."""
    values = [rng.standard_normal(s).astype(dtype) for s in SHAPES]
    grads = hard_grads(rng, dtype, SHAPES, len(SKIPS))
    cuda = trajectory(hl_name, kw, values, grads, monkeypatch, devices=["cuda"], skips=SKIPS)
    cpu = trajectory(hl_name, kw, values, grads, monkeypatch, skips=SKIPS)
    assert_same_trajectory(cuda, cpu)
    for a, v in zip(cuda[0], values):
        assert not np.array_equal(a, v)  # the clear steps did update


def test_v2_rules_on_cuda_equal_the_cpu_bitwise(rng):
    """PaddlePaddle v2's momentum and Adam (no hl.opt class of their own: hl.v2 runs them),
    with per-step values from 0-d device tensors, as a recorded plan passes them, and the
    skip flag (the second step is skipped: it writes nothing)."""
    for rule, n_states, steps, hyper in (("v2_momentum", 1, [-0.1], [0.01, 0.9]),
                                         ("v2_adam", 2, [-0.01], [0.9, 0.1, 0.999, 0.001, 1e-8])):
        arrays = [rng.standard_normal((7, 3)).astype(np.float32) for _ in range(2 + n_states)]
        out = {}
        for device in ("cpu", "cuda"):
            p, g, *states = [hl.tensor(a, device=device) for a in arrays]
            states = [s.abs() for s in states]
            scalars = [hl.tensor(np.float32(v), device=device) for v in steps]
            for skip in (None, True, False):
                before = [t.numpy().copy() for t in [p] + states]
                if skip is None:
                    ops.optim_update(rule, p, g, states, scalars, hyper)
                    continue
                with ops.skipping_when(hl.tensor(np.array(skip), device=device)):
                    ops.optim_update(rule, p, g, states, scalars, hyper)
                for a, t in zip(before, [p] + states):
                    assert np.array_equal(a, t.numpy()) == skip, (rule, device, skip)
            out[device] = [t.numpy() for t in [p] + states]
        for a, b in zip(out["cuda"], out["cpu"]):
            np.testing.assert_array_equal(a, b, err_msg=rule)


def test_graph_mode_on_cuda_fuses_conv_relu_and_updates_with_the_kernel_bitwise(rng):
    """Conv -> ReLU twice (graph mode fuses each pair into conv_fused) trained by Adam (the
    optimiser kernel reads its step values from tensors at each replay)."""
    L = hl.layers

    def model():
        return CNN(hl.opt.Adam(lr=0.01), L.Conv2d(4, 3, padding=1), L.ReLU(),
                   L.MaxPool2d(2, 2), L.Conv2d(6, 3), L.ReLU(), L.Flatten(), L.Linear(5))
    _, stats = assert_graph_trains_as_eager(model, image_batches(rng, 8, (4, 2, 10, 10)),
                                            device="cuda")
    assert stats["conv_epilogues"] == 2
    assert stats["graph_calls"] > 0


# ---- fused ops: equal to the unfused ops on cuda --------------------------------------

@pytest.mark.parametrize("act,alpha,beta,op", [
    ("relu", 0, 0, lambda y: hl.relu(y)), ("clip", -0.5, 0.7, lambda y: hl.clip(y, -0.5, 0.7)),
    ("leaky_relu", 0.1, 0, lambda y: hl.leaky_relu(y, 0.1)), ("none", 0, 0, lambda y: y)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv_fused_equals_conv_add_activation_on_cuda_bitwise(rng, act, alpha, beta, op, dtype):
    x = rng.standard_normal((2, 3, 7, 7)).astype(dtype)
    x[0, 0, 0, :3] = np.nan  # NaN passes through every activation
    w, b = rng.standard_normal((5, 3, 3, 3)).astype(dtype), rng.standard_normal(5).astype(dtype)
    r = rng.standard_normal((2, 5, 7, 7)).astype(dtype)
    x, w, b, r = (hl.tensor(a, device="cuda") for a in (x, w, b, r))
    fused = ops.conv_fused_forward(x, w, b, r, padding=1, act=act, alpha=alpha, beta=beta)
    unfused = op(hl.conv2d(x, w, b, padding=1) + r)
    np.testing.assert_array_equal(fused.numpy(), unfused.numpy())


@pytest.mark.parametrize("act,op", [("relu", hl.relu), ("gelu", hl.gelu),
                                    ("gelu_tanh", hl.gelu_tanh)])
def test_matmul_fused_equals_matmul_add_activation_on_cuda(rng, act, op):
    """float64 (the activation's own float64 expression on both sides): bit for bit for the
    exact ReLU; GELU to 1e-15 (the element-wise op's expression is the ops.h one, the
    epilogue's the same formula in the dtype)."""
    a, b = rng.standard_normal((2, 3, 6)), rng.standard_normal((6, 5))
    bias, r = rng.standard_normal(5), rng.standard_normal((2, 3, 5))
    a, b, bias, r = (hl.tensor(v, device="cuda") for v in (a, b, bias, r))
    fused = ops.matmul_fused_forward(a, b, bias, r, act=act).numpy()
    unfused = op(hl.matmul(a, b) + bias + r).numpy()
    if act == "relu":
        np.testing.assert_array_equal(fused, unfused)
    else:
        np.testing.assert_allclose(fused, unfused, rtol=1e-15, atol=1e-15)


def test_a_pack_made_on_one_device_serves_the_other(rng):
    """One packed layout on every device: packed on the CPU, moved to cuda (and back), the
    product is the one with the plain weight; the packs are the same bytes."""
    a, b = rng.standard_normal((9, 300)).astype(np.float32), \
        rng.standard_normal((300, 37)).astype(np.float32)
    want = ops.matmul_fused_forward(hl.tensor(a, device="cuda"), hl.tensor(b, device="cuda"),
                                    act="relu").numpy()
    cpu_pack = ops.gemm_pack_b(hl.tensor(b))
    cuda_pack = ops.gemm_pack_b(hl.tensor(b, device="cuda"))
    np.testing.assert_array_equal(cpu_pack.data.numpy(), cuda_pack.data.numpy())
    moved = ops.linalg.PackedMatrix(cpu_pack.data.to("cuda"), cpu_pack.shape)
    got = ops.matmul_fused_forward(hl.tensor(a, device="cuda"), moved, act="relu").numpy()
    np.testing.assert_array_equal(got, want)
    back = ops.linalg.PackedMatrix(cuda_pack.data.to("cpu"), cuda_pack.shape)
    np.testing.assert_allclose(ops.matmul_fused_forward(hl.tensor(a), back, act="relu").numpy(),
                               want, rtol=1e-5, atol=1e-5)
    w = rng.standard_normal((13, 8, 3, 3)).astype(np.float32)  # a short last panel
    outlier = w.copy()
    outlier[2, 3, 1, 1] = 1e6  # Winograd's precision guard refuses it: packed as NaN
    near = w.copy()
    near[2, 3, 1, 1] = 16 * np.sqrt((w.astype(np.float64) ** 2).mean())  # F(4x4, 3x3) only
    for layout in ("panels", "winograd", "winograd43"):
        for weights in (w, outlier, near):
            np.testing.assert_array_equal(ops.conv_pack(hl.tensor(weights), 1, layout).numpy(),
                                          ops.conv_pack(hl.tensor(weights, device="cuda"), 1,
                                                        layout).numpy(), err_msg=layout)
    assert np.isnan(ops.conv_pack(hl.tensor(outlier, device="cuda"), 1, "winograd").numpy()).all()
    assert np.isnan(ops.conv_pack(hl.tensor(near, device="cuda"), 1, "winograd43").numpy()).all()
    assert np.isfinite(ops.conv_pack(hl.tensor(near, device="cuda"), 1, "winograd").numpy()).all()


# ---- errors: the CPU's, on cuda --------------------------------------------------------

def _bad_calls(device):
    def t(*shape, dtype=np.float32):
        return hl.tensor(np.ones(shape, dtype), device=device)
    return {
        "matmul_fused b": lambda: ops.matmul_fused_forward(t(2, 3), t(4, 5)),
        "matmul_fused bias": lambda: ops.matmul_fused_forward(t(2, 3), t(3, 5), t(4)),
        "matmul_fused residual": lambda: ops.matmul_fused_forward(t(2, 3), t(3, 5), None,
                                                                  t(5, 2)),
        "matmul_fused packed": lambda: ops.matmul_fused_forward(
            t(2, 4), ops.linalg.PackedMatrix(ops.gemm_pack_b(t(3, 5)).data, (4, 5))),
        "gemm_pack_b dtype": lambda: ops.gemm_pack_b(t(3, 5, dtype=np.float64)),
        "conv_fused residual": lambda: ops.conv_fused_forward(t(1, 2, 5, 5), t(3, 2, 3, 3),
                                                              None, t(1, 3, 5, 5)),
        "conv_fused packed": lambda: ops.conv_fused_forward(
            t(1, 2, 5, 5), t(3, 2, 1, 1), packed=ops.conv_pack(t(7, 2, 1, 1))),
        "conv_pack groups": lambda: ops.conv_pack(t(6, 1, 1, 1), 4),
        "optim_update state": lambda: ops.optim_update("adam", t(3, 2), t(3, 2),
                                                       [t(3, 2), t(2, 3)], [-0.1, 1.0],
                                                       [0.0, 0.1, 0.999, 0.001, 1e-8]),
        "optim_update grad": lambda: ops.optim_update("sgd", t(3, 2), t(3, 2, dtype=np.float64),
                                                      [], [-0.1], [0.0, 0.0, 1.0]),
    }


@pytest.mark.parametrize("what", sorted(_bad_calls("cpu")))
def test_bad_operands_give_the_cpus_error_on_cuda(what):
    errors = {}
    for device in ("cpu", "cuda"):
        with pytest.raises(hl.errors.HLError) as info:
            _bad_calls(device)[what]()
        errors[device] = (type(info.value), str(info.value).replace("cuda:0", "cpu"))
    assert errors["cuda"] == errors["cpu"]


# ---- ONNX -------------------------------------------------------------------------------

ZOO = os.environ.get("HL_ONNX_ZOO") or os.path.join(os.path.dirname(__file__), "..", "..",
                                                     "..", "shared", "onnx-zoo")


def test_onnx_resnet18_on_cuda_fuses_and_matches_onnxruntime():
    """The zoo's ResNet-18 (the topology at base width 8, 64x64 images) prepared on cuda: its
    Conv + BN (+ Add) + Relu chains run as conv_fused and its Gemm as matmul_fused with the
    plain weight (nothing packed on cuda), against onnxruntime on the CPU."""
    ort = pytest.importorskip("onnxruntime")
    import hl.onnx
    path = os.path.join(ZOO, "resnet18-op17.onnx")
    if not os.path.exists(path):
        pytest.skip(f"the ONNX model zoo is not at {ZOO} (set HL_ONNX_ZOO)")
    with np.load(os.path.join(ZOO, "resnet18.npz")) as z:
        x = z[[k for k in z.files if k.startswith("in_")][0]]
    rep = hl.onnx.prepare(path, device="cuda")
    nodes = rep.model.program.fused_nodes
    convs = [n for n in nodes if n.op_type == "FusedConv"]
    mms = [n for n in nodes if n.op_type == "FusedMatMul"]
    assert len(convs) >= 8 and any(n.inputs[3] for n in convs) and len(mms) == 1
    assert all(n.packed_weight is None for n in convs)
    assert isinstance(mms[0].packed, hl.Tensor) and mms[0].packed.device == hl.cuda(0)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    for batch in (x, x[:1]):
        got = rep.run([batch])[0]
        want = sess.run(None, {sess.get_inputs()[0].name: batch})[0]
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-4, atol=1e-5)


@pytest.mark.skipif(not hl.cuda.is_emulated(), reason="counts launches with the emulation's hook")
@pytest.mark.parametrize("hl_name,kw", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                        ("Adam", dict(lr=0.01, amsgrad=True)),
                                        ("RMSProp", dict(lr=0.01, centered=True, momentum=0.5))])
def test_an_update_on_cuda_is_one_launch_per_parameter(monkeypatch, hl_name, kw):
    """What the kernel saves on a GPU: one launch (one pass over memory) per parameter and
    step instead of the sequence's one per element-wise op."""
    import ctypes
    from hl import _cuda_libs
    count = ctypes.CDLL(_cuda_libs.library_path()).hl_cuda_emu_launch_count
    count.restype = ctypes.c_int64

    def launches(fused):
        with monkeypatch.context() as m:
            if not fused:
                m.setattr(hl.ops, "optim_update_available", lambda param, grad=None: False)
            p = hl.tensor(np.ones((8, 4), np.float32), device="cuda")
            g = hl.tensor(np.full((8, 4), 0.5, np.float32), device="cuda")
            opt = getattr(hl.opt, hl_name)(**kw)
            opt.update(p, g)  # the first step creates the states
            opt.step()
            hl.cuda.synchronize()
            before = count()
            opt.update(p, g)
            hl.cuda.synchronize()
            return count() - before

    fused, sequence = launches(True), launches(False)
    assert fused == 1 and sequence >= 5, (fused, sequence)


# which fused nodes each zoo model must get on cuda: FusedConv epilogues (activation, whether
# a residual) present, and FusedMatMul activations present
ZOO_FUSIONS = {"mobilenet_v2": ({("clip", False), ("none", True)}, set()),
               "bert_squad": (set(), {"gelu"}),
               "gpt2": (set(), {"gelu_tanh"})}


@pytest.mark.parametrize("name", sorted(ZOO_FUSIONS))
def test_onnx_zoo_models_on_cuda_fuse_and_give_the_shipped_outputs(name):
    """MobileNetV2 (Clip epilogues, residual adds without activation), BERT (GELU) and GPT-2
    (GELU's tanh form between Reshapes) prepared on cuda against onnxruntime's shipped
    outputs, with the zoo's tolerance (rtol 1e-3, atol 1e-4: tests/onnx/test_zoo.py)."""
    import hl.onnx
    path = os.path.join(ZOO, f"{name}-op17.onnx")
    if not os.path.exists(path):
        pytest.skip(f"the ONNX model zoo is not at {ZOO} (set HL_ONNX_ZOO)")
    with np.load(os.path.join(ZOO, f"{name}.npz")) as z:
        ins = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
        outs = [z[k] for k in z.files if k.startswith("out_")]
    rep = hl.onnx.prepare(path, device="cuda")
    nodes = rep.model.program.fused_nodes
    convs = {(n.epilogue[0], bool(n.inputs[3])) for n in nodes if n.op_type == "FusedConv"}
    mms = {n.epilogue[0] for n in nodes if n.op_type == "FusedMatMul"}
    want_convs, want_mms = ZOO_FUSIONS[name]
    assert want_convs <= convs and want_mms <= mms, (convs, mms)
    got = rep.run(ins)
    assert len(got) == len(outs)
    for g, w in zip(got, outs):
        np.testing.assert_allclose(np.asarray(g), w, rtol=1e-3, atol=1e-4)
