"""Training on cuda: an MLP on the digits with fit/evaluate/predict gives the CPU's numbers;
models move with to(); checkpoints saved on cuda load on the CPU and back; SINGA's
create_cuda_gpu gives the cuda device."""
import numpy as np
import pytest

import hl
from hl import layers as L

from tests.digits import SmallCNN, digits

pytestmark = pytest.mark.gpu


def _train(device, epochs=3):
    hl.manual_seed(0)
    x, y, xt, yt = digits()
    model = hl.Sequential(L.Linear(32), L.ReLU(), L.Linear(10))
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.to(device)
    history = model.fit(x, y, epochs=epochs, batch_size=32, verbose=0, shuffle=False)
    return model, history.history, model.evaluate(xt, yt, verbose=0), model.predict(xt[:50])


def test_mlp_on_digits_trains_on_cuda_as_on_the_cpu():
    model, hist, (loss, acc), pred = _train("cuda")
    assert all(p.device == hl.cuda(0) for p in model.get_states().values())
    _, hist_cpu, (loss_cpu, acc_cpu), pred_cpu = _train("cpu")
    # float32 with double accumulators on both; only summation order differs (rtol 1e-5)
    np.testing.assert_allclose(hist["loss"], hist_cpu["loss"], rtol=1e-5)
    np.testing.assert_allclose(loss, loss_cpu, rtol=1e-5)
    assert abs(acc - acc_cpu) <= 1 / 360 and acc > 0.85  # at most one test digit flips
    np.testing.assert_allclose(pred, pred_cpu, rtol=1e-4, atol=1e-5)


def test_checkpoint_saved_on_cuda_loads_on_cpu_and_back(tmp_path):
    model, _, _, pred = _train("cuda", epochs=1)
    path = str(tmp_path / "mlp.hl")
    hl.save(model, path)
    on_cpu = hl.load(path, device="cpu")
    assert all(p.device == hl.cpu() for p in on_cpu.get_states().values())
    x = digits()[2][:50]
    np.testing.assert_allclose(on_cpu.predict(x), pred, rtol=1e-5, atol=1e-6)
    back = hl.load(path)  # where it was saved: cuda
    assert all(p.device == hl.cuda(0) for p in back.get_states().values())
    np.testing.assert_allclose(back.predict(x), pred, rtol=1e-6, atol=1e-7)
    on_cpu.to("cuda")
    np.testing.assert_allclose(on_cpu.predict(x), pred, rtol=1e-5, atol=1e-6)


def test_singa_create_cuda_gpu_is_the_cuda_device():
    from hl.singa import device, tensor
    dev = device.create_cuda_gpu()
    assert device.create_cuda_gpu_on(0) is dev and device.get_num_gpus() >= 1
    t = tensor.Tensor((2, 3), dev)
    t.set_value(1.5)
    assert float(tensor.to_numpy(t).sum()) == 9.0


def _train_cnn(device):
    hl.manual_seed(0)
    x, y, xt, yt = digits(flat=False)
    model = SmallCNN()
    model.compile(optimizer=hl.opt.SGD(lr=0.05, momentum=0.9),
                  loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    model.to(device)
    hist = model.fit(x[:640], y[:640], epochs=2, batch_size=64, verbose=0, shuffle=False)
    return model, hist.history["loss"], model.evaluate(xt, yt, verbose=0)


def test_cnn_with_batch_norm_trains_on_cuda_as_on_the_cpu():
    model, loss, (test_loss, acc) = _train_cnn("cuda")
    assert all(p.device == hl.cuda(0) for p in model.get_states().values())
    _, loss_cpu, (test_loss_cpu, acc_cpu) = _train_cnn("cpu")
    np.testing.assert_allclose(loss, loss_cpu, rtol=1e-5)
    np.testing.assert_allclose(test_loss, test_loss_cpu, rtol=1e-4)
    assert abs(acc - acc_cpu) <= 2 / 360 and acc > 0.8


def test_onnx_model_runs_on_cuda():
    """hl.onnx.prepare(model, device="cuda") against onnxruntime on the CPU."""
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 8, 3, 3)).astype(np.float32)
    fc = rng.standard_normal((8 * 3 * 3, 5)).astype(np.float32)  # 8 channels of 3 x 3
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"]),
             helper.make_node("MatMul", ["f", "fc"], ["m"]),
             helper.make_node("Softmax", ["m"], ["y"], axis=1)]
    graph = helper.make_graph(
        nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4, 6, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 5])],
        [numpy_helper.from_array(w.transpose(1, 0, 2, 3).copy(), "w"),
         numpy_helper.from_array(fc, "fc")])
    # IR 8, what opset 17 needs: onnx stamps its own newest IR version, which an older
    # onnxruntime beside it (a GPU machine's image: onnx 1.23 with onnxruntime 1.30) refuses
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
    onnx.checker.check_model(model)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    rep = hl.onnx.prepare(model, device="cuda")
    got = rep.run([x])[0]
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-6)


def test_every_optimiser_updates_on_cuda_as_on_the_cpu(rng):
    """hl.opt on cuda goes through cuda's one-pass optimiser kernel (optim_update, cuda/
    optim.cu), which does the CPU kernel's float operations in its order with every product
    rounded before its sum: the trajectories are the CPU's bit for bit. The element-wise
    sequence the kernel replaces is tests/cuda/test_fused.py's."""
    from tests.opt.common import CONFIGS
    values = [rng.standard_normal(s).astype(np.float32) for s in ((4, 3), (5,))]
    grads = [[rng.standard_normal(v.shape).astype(np.float32) for v in values]
             for _ in range(4)]
    for hl_name, _, kw in CONFIGS:
        out = {}
        for device in ("cpu", "cuda"):
            ps = [hl.Tensor(v.copy(), name=f"p{i}").to(device) for i, v in enumerate(values)]
            assert hl.ops.optim_update_available(ps[0])
            opt = getattr(hl.opt, hl_name)(**kw)
            for step in grads:
                for p, g in zip(ps, step):
                    opt.update(p, hl.tensor(g).to(device))
                opt.step()
            out[device] = [p.numpy() for p in ps]
        for a, b in zip(out["cuda"], out["cpu"]):
            np.testing.assert_array_equal(a, b, err_msg=f"{hl_name} {kw}")
