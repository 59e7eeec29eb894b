"""The standard tests of every registered OpCase (tests/opcases/case.py says what each checks
and with which tolerances). A new op adds its OpCase to a family's list; nothing here changes.
"""
import numpy as np
import pytest

import hl
from tests.autograd.harness import check_grad
from tests.ops.harness import LAYOUTS, assert_close, numeric_grad

from . import elementwise, families
from .case import (BACKEND_GRAD_ATOL, BACKEND_GRAD_RTOL, GRAD_ATOL, GRAD_RTOL, HALF_UNIT,
                   ONNX_ATOL, ONNX_RTOL, SPECIAL)

ALL = elementwise.CASES + families.CASES
CASES = [c for c in ALL if not c.backend_only]  # with a numpy reference
BY_DTYPE = [pytest.param(c, d, id=f"{c.name}-{np.dtype(d).name}") for c in CASES
            for d in c.dtypes]
GRAD = [pytest.param(c, s, id=f"{c.name}-{s}") for c in CASES if c.grad
        for s in c.grad_shapes]
ONNX = [pytest.param(c, id=c.name) for c in CASES if c.onnx is not None]
EXPORT = [pytest.param(c, id=c.name) for c in CASES if c.onnx is not None and c.onnx.export]
# other backends, each against the CPU (skipped, as gpu tests are, where none is built)
OTHER_BACKENDS = ("cuda",)
BACKENDS = [pytest.param(c, b, id=f"{c.name}-{b}", marks=pytest.mark.gpu) for c in ALL
            for b in OTHER_BACKENDS]
BACKEND_HALF = [pytest.param(c, b, h, id=f"{c.name}-{b}-{h}", marks=pytest.mark.gpu)
                for c in ALL if c.half_tol is not None for b in OTHER_BACKENDS
                for h in HALF_UNIT]
BACKEND_GRAD = [pytest.param(c, b, id=f"{c.name}-{b}", marks=pytest.mark.gpu) for c in ALL
                if c.grad and np.float64 in c.dtypes for b in OTHER_BACKENDS
                if not set(c.ops or (c.name,)) & families.NOT_ON.get(b, set())]


def _layout(arrays, name):
    return [LAYOUTS[name](a) for a in arrays]


@pytest.mark.parametrize("case,dtype", BY_DTYPE)
def test_kernel_matches_reference(case, dtype):
    rng = np.random.default_rng(0)
    rtol, atol = case.tolerance(dtype)
    for shape in case.shapes:
        arrays = case.inputs(rng, dtype, shape)
        want = case.expected(arrays)
        for layout in LAYOUTS:
            got = case.call(*_layout(arrays, layout))
            assert got.dtype.np == want.dtype, f"{layout}: dtype {got.dtype} != {want.dtype}"
            assert_close(got, want, rtol, atol, f"{case.name} {shape} {layout}")


@pytest.mark.parametrize("case,dtype", [p for p in BY_DTYPE if p.values[0].special])
def test_special_values(case, dtype):
    x = np.array(SPECIAL, dtype=dtype)
    got, want = case.run([x]), case.expected([x])
    rtol, atol = case.tolerance(dtype)
    np.testing.assert_allclose(got[5:], want[5:], rtol=rtol, atol=atol, err_msg=case.name)
    got, want = got[:5], want[:5]
    if case.numpy_defined:
        np.testing.assert_array_equal(got, want, err_msg=case.name)
        zero = want == 0
        np.testing.assert_array_equal(np.signbit(got[zero]), np.signbit(want[zero]),
                                      err_msg=f"{case.name}: sign of zero")
    else:
        # activations: where the float64 formula answers, hl agrees (hl may give the limit
        # where the formula gives nan, e.g. 0 * inf); nan stays nan
        ok = ~np.isnan(want)
        np.testing.assert_allclose(got[ok], want[ok], rtol=rtol, atol=atol, err_msg=case.name)
        assert np.isnan(got[4]), f"{case.name}(nan) must be nan"


@pytest.mark.parametrize("case,shape", GRAD)
def test_gradient_finite_differences(case, shape):
    arrays = case.grad_inputs(np.random.default_rng(1), shape)
    check_grad(case.call, arrays, rtol=GRAD_RTOL, atol=GRAD_ATOL)


def _inputs32(case):
    shape = case.grad_shapes[-1] if case.arity > 1 else (3, 4)
    return case.inputs(np.random.default_rng(2), np.float32, shape)


def _onnxruntime(model, arrays):
    ort = pytest.importorskip("onnxruntime")
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    return sess.run(None, dict(zip(names, arrays)))[0]


def _one_node_model(case, arrays):
    from onnx import helper, numpy_helper
    node = case.onnx
    names = [f"x{i}" for i in range(len(arrays))]
    consts = [f"c{i}" for i in range(len(node.consts))]
    rank = max(a.ndim for a in arrays)
    graph = helper.make_graph(
        [helper.make_node(node.op_type, names + consts, ["y"], **node.attrs)], case.name,
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
         for n, a in zip(names, arrays)],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(arrays[0].dtype),
                                       [f"d{i}" for i in range(rank)])],
        [numpy_helper.from_array(np.asarray(v, dtype=arrays[0].dtype), n)
         for n, v in zip(consts, node.consts)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", node.opset)])


@pytest.mark.parametrize("case", ONNX)
def test_onnx_import_matches_onnxruntime(case):
    import hl.onnx
    arrays = _inputs32(case)
    model = _one_node_model(case, arrays)
    got = hl.onnx.prepare(model).run(arrays)[0]
    got = got.numpy() if isinstance(got, hl.Tensor) else np.asarray(got)
    np.testing.assert_allclose(got, _onnxruntime(model, arrays), rtol=ONNX_RTOL, atol=ONNX_ATOL)


@pytest.mark.parametrize("case", [p for p in ONNX if p.values[0].grad])
def test_onnx_import_gradient_finite_differences(case):
    # the imported node trains: its gradient (through hl.onnx's handler) in float64
    import hl.onnx
    arrays = case.grad_inputs(np.random.default_rng(4), case.grad_shapes[-1])
    model = hl.onnx.ONNXModel(_one_node_model(case, arrays))
    names = [f"x{i}" for i in range(len(arrays))]
    check_grad(lambda *ts: model.forward(dict(zip(names, ts)))[0], arrays,
               rtol=GRAD_RTOL, atol=GRAD_ATOL)


class _OneOp(hl.Module):
    def __init__(self, case):
        super().__init__()
        self.case = case

    def forward(self, *xs):
        return self.case.call(*xs)


@pytest.mark.parametrize("case", EXPORT)
def test_onnx_export_round_trip(case):
    import hl.onnx
    arrays = _inputs32(case)
    want = case.run(arrays)
    proto = hl.onnx.to_onnx(_OneOp(case), [hl.tensor(a) for a in arrays])
    np.testing.assert_allclose(_onnxruntime(proto, arrays), want, rtol=ONNX_RTOL,
                               atol=ONNX_ATOL)


def _missing_on(case, device):
    return [op for op in case.ops or (case.name,) if op in families.NOT_ON.get(device, ())]


@pytest.mark.parametrize("case,device", BACKENDS)
def test_backend_matches_cpu(case, device):
    missing = _missing_on(case, device)
    if missing:  # the registry's answer for a kernel the backend lacks
        arrays = case.inputs(np.random.default_rng(3), case.dtypes[0], case.shapes[0])
        with pytest.raises(hl.errors.UnsupportedError,
                           match=f"{missing[0]} is not implemented on {device}"):
            case.run_all(arrays, device)
        return
    for dtype in case.dtypes:
        rtol, atol = case.tolerance(dtype)
        for shape in case.shapes:
            arrays = case.inputs(np.random.default_rng(3), dtype, shape)
            _, want = case.run_all(arrays, "cpu")
            _, got = case.run_all(arrays, device)
            for g, w in zip(got, want):
                assert g.device == hl.device(device) and g.dtype == w.dtype and \
                    g.shape == w.shape, f"{case.name} on {device}: {g!r} vs {w!r}"
                np.testing.assert_allclose(g.numpy(), w.numpy(), rtol=rtol, atol=atol,
                                           equal_nan=True, err_msg=f"{case.name} on {device}")


def _half_run(case, arrays, device, half):
    """The case on device with its float inputs in `half` (cuda) or in float32 holding the
    half-rounded values (the CPU); the outputs and the gradients of grad_args for dy = cos(k)
    rounded to `half` (on the CPU: the same values in float32)."""
    which = case.grad_indices(len(arrays)) if case.grad else ()
    xs = []
    for i, a in enumerate(arrays):
        t = hl.tensor(a)
        if t.dtype.is_floating:
            t = t.astype(half)
            t = t.to(device) if device != "cpu" else t.astype("float32")
        else:
            t = t.to(device)
        if i in which:
            t.requires_grad = True
        xs.append(t)
    ys = case.call(*xs)
    ys = list(ys) if isinstance(ys, (tuple, list)) else [ys]
    if which:
        total = None
        for y in ys:
            if not y.dtype.is_floating:
                continue
            dy = hl.tensor(np.cos(np.arange(y.size, dtype=np.float32)).reshape(y.shape))
            dy = dy.astype(half)
            dy = dy.to(device) if device != "cpu" else dy.astype("float32")
            term = (y * dy).sum()
            total = term if total is None else total + term
        total.backward()
    return ys, [xs[i].grad for i in which]


@pytest.mark.parametrize("case,device,half", BACKEND_HALF)
def test_backend_half_matches_cpu(case, device, half):
    """float16/bfloat16 on the backend against the CPU's float32 on the same half-rounded
    values (and dy): float results within half_tol rounding units of the largest magnitude
    (case.py), integer results (positions) equal, NaN where the CPU has NaN."""
    arrays = case.inputs(np.random.default_rng(5), np.float32, case.shapes[0])
    got, got_grads = _half_run(case, arrays, device, half)
    want, want_grads = _half_run(case, arrays, "cpu", half)
    for g, w in list(zip(got, want)) + list(zip(got_grads, want_grads)):
        assert g.device == hl.device(device) and g.shape == w.shape, (case.name, g, w)
        if not w.dtype.is_floating:
            assert g.dtype == w.dtype, (case.name, g.dtype, w.dtype)
            np.testing.assert_array_equal(g.numpy(), w.numpy(), err_msg=case.name)
            continue
        assert g.dtype == hl.dtype(half), (case.name, g.dtype)
        gv, wv = g.astype("float32").numpy().astype(np.float64), w.numpy().astype(np.float64)
        np.testing.assert_array_equal(np.isnan(gv), np.isnan(wv), err_msg=case.name)
        ok = ~np.isnan(wv)
        scale = np.abs(wv[ok]).max() if ok.any() else 0.0
        tol = case.half_tol * HALF_UNIT[half] * max(scale, 1e-30)
        assert np.abs(gv[ok] - wv[ok]).max(initial=0.0) <= tol, \
            (case.name, half, np.abs(gv[ok] - wv[ok]).max(), tol)


def _gradient_inputs(case):
    """float64 inputs for a backend's gradient check: the element-wise cases' (away from
    kinks), the backend cases' drawing."""
    if case.backend_only:
        return case.inputs(np.random.default_rng(0), np.float64, None)
    return case.grad_inputs(np.random.default_rng(1), case.grad_shapes[-1])


@pytest.mark.parametrize("case,device", BACKEND_GRAD)
def test_backend_gradients_float64(case, device):
    """The backend's backward kernels against central differences of its own forward, and
    against the CPU's gradient."""
    arrays = _gradient_inputs(case)
    which = case.grad_indices(len(arrays))
    rng = np.random.default_rng(1)
    xs, ys = case.run_all(arrays, device, requires_grad=which)
    dys = [rng.standard_normal(y.shape) for y in ys]
    sum((y * hl.tensor(d, device=device)).sum() for y, d in zip(ys, dys)).backward()
    cx, cys = case.run_all(arrays, "cpu", requires_grad=which)
    sum((y * hl.tensor(d)).sum() for y, d in zip(cys, dys)).backward()
    for i in which:
        def f(v, i=i):
            args = [hl.tensor(v if j == i else a, device=device) for j, a in enumerate(arrays)]
            with hl.no_grad():
                outs = case.call(*args)
                outs = outs if isinstance(outs, (tuple, list)) else [outs]
                return sum(float((o.numpy() * d).sum()) for o, d in zip(outs, dys))
        got = xs[i].grad.numpy()
        np.testing.assert_allclose(got, numeric_grad(f, arrays[i]), rtol=GRAD_RTOL,
                                   atol=GRAD_ATOL, err_msg=f"{case.name}: gradient of input {i} vs differences")
        np.testing.assert_allclose(got, cx[i].grad.numpy(), rtol=BACKEND_GRAD_RTOL,
                                   atol=BACKEND_GRAD_ATOL,
                                   err_msg=f"{case.name}: gradient of input {i} vs the CPU's")


def test_every_op_has_a_case():
    """Every libcore op is reached by a case (so every backend runs it), is a gradient kernel
    a case's gradient check reaches, or is random (the Philox stream has its own tests)."""
    reached = {op for c in ALL for op in (c.ops or (c.name,))}
    covered = reached | set(families.GRADIENT_OPS) | families.RANDOM_OPS
    assert set(hl._core.OPS) - covered == set()
    assert set(families.GRADIENT_OPS.values()) <= reached
