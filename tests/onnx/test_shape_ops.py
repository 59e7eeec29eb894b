"""Shape and indexing handlers (hl/onnx/ops/shape.py, index.py) beyond ONNX's conformance
cases: opset variants (attributes that became inputs), gradients through each handler in
training (against finite differences of a numpy reference), and crafted bad models, which
must fail with an hl error naming the node before any kernel runs on bad indices or sizes.

Tolerances: forward results of data-moving ops are exact (assert_array_equal); arithmetic
(Einsum, CumProd, Col2Im) and gradients are compared in float64 to rtol 1e-6 / atol 1e-8.
"""
import numpy as np
import pytest
from onnx import helper, numpy_helper

import hl
import hl.autograd.functional as F
import hl.onnx
from hl import errors

RNG = np.random.default_rng(0)


def build(op, feeds, consts=None, inputs=None, outs=None, opset=18, name="node", **attrs):
    """A one-node model. feeds: {name: array} graph inputs; consts: {name: array}
    initializers; inputs: the node's input names ('' for an omitted one; default: feeds then
    consts); outs: [(name, numpy dtype, rank)] (default: one output like the first feed)."""
    consts = consts or {}
    if inputs is None:
        inputs = list(feeds) + list(consts)
    if outs is None:
        first = next(iter(feeds.values()))
        outs = [("y", first.dtype, first.ndim)]
    elem = helper.np_dtype_to_tensor_dtype
    graph = helper.make_graph(
        [helper.make_node(op, inputs, [o[0] for o in outs], name=name, **attrs)], "g",
        [helper.make_tensor_value_info(k, elem(v.dtype), v.shape) for k, v in feeds.items()],
        [helper.make_tensor_value_info(o, elem(np.dtype(d)), [None] * r) for o, d, r in outs],
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in consts.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def run(model, *feeds):
    return hl.onnx.prepare(model).run(list(feeds))


def i64(*v):
    return np.array(v, dtype=np.int64)


def check_grad(model, x, ref):
    """The gradient of sum(y * g) with respect to x (a float64 graph input, run through
    ONNXModel in training) against central differences of ref (numpy) at x."""
    g = RNG.normal(size=np.shape(ref(x)))
    m = hl.onnx.ONNXModel(model)
    m.train()
    xt = hl.tensor(x, requires_grad=True)
    y = m(xt)[0]
    assert y.shape == g.shape
    F.sum(F.mul(y, hl.tensor(g))).backward()
    want = np.zeros_like(x)
    eps = 1e-6
    for i in np.ndindex(x.shape):
        xp, xm = x.copy(), x.copy()
        xp[i] += eps
        xm[i] -= eps
        want[i] = ((ref(xp) * g).sum() - (ref(xm) * g).sum()) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), want, rtol=1e-6, atol=1e-8)


# ---- opset variants ---------------------------------------------------------------------

@pytest.mark.parametrize("opset", [9, 13])
def test_slice_attrs_and_inputs_negative_steps_and_clamping(opset):
    x = np.arange(60.0).reshape(3, 4, 5)
    specs = [([-1, 100], [-100, 1], [1, 2], [-1, 1]), ([0, -2], [2, -100], [0, 2], [1, -2]),
             ([5], [-7], [2], [-3]), ([2], [2], [-1], [1])]
    for starts, ends, axes, steps in specs:
        key = [slice(None)] * 3
        for s, e, a, st in zip(starts, ends, axes, steps):
            key[a] = slice(s, e, st)  # Python's slice clamping is ONNX's
        want = x[tuple(key)]
        if opset < 10:
            if any(st != 1 for st in steps):
                continue
            m = build("Slice", {"x": x}, opset=opset, starts=starts, ends=ends, axes=axes)
        else:
            m = build("Slice", {"x": x}, {"s": i64(*starts), "e": i64(*ends),
                                          "a": i64(*axes), "st": i64(*steps)}, opset=opset)
        np.testing.assert_array_equal(run(m, x)[0], want)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_variants(opset):
    x = np.arange(14.0).reshape(2, 7)
    if opset < 13:
        m = build("Split", {"x": x}, opset=opset, axis=1, split=[2, 5],
                  outs=[("a", x.dtype, 2), ("b", x.dtype, 2)])
        want = [x[:, :2], x[:, 2:]]
    elif opset < 18:
        m = build("Split", {"x": x}, {"s": i64(3, 0, 4)}, opset=opset, axis=-1,
                  outs=[("a", x.dtype, 2), ("b", x.dtype, 2), ("c", x.dtype, 2)])
        want = [x[:, :3], x[:, 3:3], x[:, 3:]]
    else:  # num_outputs, uneven: ceil(7 / 3) = 3, 3, 1
        m = build("Split", {"x": x}, opset=opset, axis=1, num_outputs=3,
                  outs=[("a", x.dtype, 2), ("b", x.dtype, 2), ("c", x.dtype, 2)])
        want = [x[:, :3], x[:, 3:6], x[:, 6:]]
    for got, w in zip(run(m, x), want):
        np.testing.assert_array_equal(got, w)


@pytest.mark.parametrize("opset", [11, 13])
def test_squeeze_unsqueeze_axes_attr_then_input(opset):
    x = np.arange(6.0).reshape(1, 2, 1, 3)
    if opset < 13:
        sq = build("Squeeze", {"x": x}, opset=opset, axes=[0, -2])
        un = build("Unsqueeze", {"x": x}, opset=opset, axes=[-1, 1])
    else:
        sq = build("Squeeze", {"x": x}, {"a": i64(0, -2)}, opset=opset)
        un = build("Unsqueeze", {"x": x}, {"a": i64(-1, 1)}, opset=opset)
    assert run(sq, x)[0].shape == (2, 3)
    assert run(un, x)[0].shape == (1, 1, 2, 1, 3, 1)
    np.testing.assert_array_equal(run(build("Squeeze", {"x": x}, opset=opset), x)[0],
                                  x.reshape(2, 3))


# "wrap" is a mode from opset 19 on
@pytest.mark.parametrize("opset, mode", [(o, m) for o in (2, 11, 19)
                                         for m in ("constant", "reflect", "edge", "wrap")
                                         if m != "wrap" or o >= 19])
def test_pad_modes_and_opsets(opset, mode):
    x = np.arange(12.0).reshape(3, 4)
    pads = [1, 2, 2, 3]
    width = [(1, 2), (2, 3)]
    kw = {"constant_values": 7.5} if mode == "constant" else {}
    want = np.pad(x, width, mode=mode, **kw)
    if opset < 11:
        m = build("Pad", {"x": x}, opset=opset, mode=mode, pads=pads, value=7.5)
    elif opset < 18:
        m = build("Pad", {"x": x}, {"p": i64(*pads), "v": np.array([7.5])}, opset=opset,
                  mode=mode)
    else:  # the axes input (opset 18 on), here listing axis 1 first
        m = build("Pad", {"x": x}, {"p": i64(2, 1, 3, 2), "v": np.array([7.5]),
                                    "a": i64(-1, 0)}, opset=opset, mode=mode)
    np.testing.assert_array_equal(run(m, x)[0], want)


def test_pad_negative_crops_and_wrap_wider_than_the_axis():
    x = np.arange(12.0).reshape(3, 4)
    m = build("Pad", {"x": x}, {"p": i64(-1, 1, 0, -2)}, opset=13)
    np.testing.assert_array_equal(run(m, x)[0], np.pad(x[1:, :2], [(0, 0), (1, 0)]))
    m = build("Pad", {"x": x}, {"p": i64(0, 5, 0, 6)}, opset=19, mode="wrap")
    np.testing.assert_array_equal(run(m, x)[0], np.pad(x, [(0, 0), (5, 6)], mode="wrap"))


@pytest.mark.parametrize("opset", [1, 11])
def test_topk_k_attr_then_input_and_ties(opset):
    x = np.array([[3.0, 1.0, 3.0, 2.0, 1.0]])
    if opset < 10:
        m = build("TopK", {"x": x}, opset=opset, k=3, outs=[("v", x.dtype, 2), ("i", np.int64, 2)])
    else:
        m = build("TopK", {"x": x}, {"k": i64(3)}, opset=opset, largest=0,
                  outs=[("v", x.dtype, 2), ("i", np.int64, 2)])
    v, i = run(m, x)
    if opset < 10:
        np.testing.assert_array_equal(i, [[0, 2, 3]])  # equal values: lower index first
    else:
        np.testing.assert_array_equal(i, [[1, 4, 3]])
    np.testing.assert_array_equal(v, np.take_along_axis(x, i, 1))


def test_reshape_zero_copies_unless_allowzero_and_expand_is_two_way():
    x = np.arange(24.0).reshape(2, 3, 4)
    m = build("Reshape", {"x": x}, {"s": i64(0, -1, 2)})
    assert run(m, x)[0].shape == (2, 6, 2)
    z = np.zeros((0, 3))
    m = build("Reshape", {"x": z}, {"s": i64(3, 0)}, allowzero=1)
    assert run(m, z)[0].shape == (3, 0)
    x = np.arange(3.0).reshape(3, 1)
    m = build("Expand", {"x": x}, {"s": i64(2, 1, 4)}, outs=[("y", x.dtype, 3)])
    np.testing.assert_array_equal(run(m, x)[0], np.broadcast_to(x, (2, 3, 4)))


@pytest.mark.parametrize("eq,shapes", [
    ("ij,jk->ik", [(2, 3), (3, 4)]),
    ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("...ij,...jk", [(2, 1, 2, 3), (3, 3, 4)]),       # implicit output, broadcast ellipsis
    ("ii->i", [(3, 3)]),
    ("iij->j", [(2, 2, 3)]),
    ("i,i", [(4,), (4,)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)]),
    ("ab,cd->abcd", [(2, 1), (1, 3)]),
    ("ij->", [(2, 3)]),
    ("bi,bj->b", [(2, 3), (2, 4)]),
])
def test_einsum_against_numpy(eq, shapes):
    xs = {f"x{i}": RNG.normal(size=s) for i, s in enumerate(shapes)}
    want = np.einsum(eq, *xs.values())
    m = build("Einsum", xs, equation=eq, outs=[("y", np.float64, want.ndim)])
    np.testing.assert_allclose(run(m, *xs.values())[0], want, rtol=1e-6, atol=1e-8)


def test_einsum_integers_keep_their_dtype():
    a = np.arange(6, dtype=np.int32).reshape(2, 3)
    m = build("Einsum", {"a": a, "b": a}, equation="ij,kj->ik", outs=[("y", np.int32, 2)])
    got = run(m, a, a)[0]
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, a @ a.T)


def _gather_nd_ref(x, idx, b):
    out = np.empty(idx.shape[:-1] + x.shape[b + idx.shape[-1]:], x.dtype)
    for pos in np.ndindex(idx.shape[:-1]):
        out[pos] = x[pos[:b]][tuple(idx[pos])]
    return out


@pytest.mark.parametrize("b", [0, 1, 2])
def test_gather_nd_batch_dims(b):
    x = RNG.normal(size=(2, 3, 4, 5))
    k = 2 if b < 2 else 1
    idx = np.stack([RNG.integers(-x.shape[b + j], x.shape[b + j], size=(2, 3, 2)[:b] + (4,))
                    for j in range(k)], -1)
    want = _gather_nd_ref(x, idx, b)
    m = build("GatherND", {"x": x}, {"i": idx}, batch_dims=b, outs=[("y", x.dtype, want.ndim)])
    np.testing.assert_array_equal(run(m, x)[0], want)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd_reductions(reduction):
    x = RNG.normal(size=(4, 3, 2))
    idx = np.array([[1, 0], [3, -1], [1, 0]]) if reduction != "none" else \
        np.array([[1, 0], [3, -1], [0, 2]])
    upd = RNG.normal(size=(3, 2))
    want = x.copy()
    fn = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}
    for row, u in zip(idx, upd):
        t = tuple(row)
        want[t] = u if reduction == "none" else fn[reduction](want[t], u)
    m = build("ScatterND", {"x": x}, {"i": idx, "u": upd}, reduction=reduction)
    np.testing.assert_allclose(run(m, x)[0], want, rtol=1e-12)


def test_scatter_elements_float16_max_and_deprecated_scatter():
    x = np.arange(6.0, dtype=np.float16).reshape(2, 3)
    idx = np.array([[2, 0]])
    u = np.array([[10.0, -1.0]], np.float16)
    m = build("Scatter", {"x": x}, {"i": idx, "u": u}, opset=10, axis=1)
    np.testing.assert_array_equal(run(m, x)[0], [[-1, 1, 10], [3, 4, 5]])
    m = build("ScatterElements", {"x": x}, {"i": idx, "u": u}, axis=1, reduction="max")
    got = run(m, x)[0]  # half types compute in float32 and come back as float16
    assert got.dtype == np.float16
    np.testing.assert_array_equal(got, [[0, 1, 10], [3, 4, 5]])


@pytest.mark.parametrize("exclusive,reverse", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumprod_and_cumsum_variants(exclusive, reverse):
    x = RNG.normal(size=(3, 7))

    def ref(a, op):
        a = np.flip(a, 1) if reverse else a
        y = op(a, axis=1)
        if exclusive:
            start = np.ones_like(a[:, :1]) if op is np.cumprod else np.zeros_like(a[:, :1])
            y = np.concatenate([start, y[:, :-1]], 1)
        return np.flip(y, 1) if reverse else y
    for op, fn in (("CumProd", np.cumprod), ("CumSum", np.cumsum)):
        m = build(op, {"x": x}, {"a": i64(1)}, opset=26, exclusive=exclusive, reverse=reverse)
        np.testing.assert_allclose(run(m, x)[0], ref(x, fn), rtol=1e-12)


@pytest.mark.parametrize("axis,sorted_", [(None, 1), (None, 0), (0, 1), (1, 0), (-1, 1)])
def test_unique_against_numpy(axis, sorted_):
    x = np.array([[2, 1, 2, 1], [0, 3, 0, 3], [2, 1, 2, 1]], np.int64)
    kw = {} if axis is None else {"axis": axis}
    y, idx, inv, cnt = np.unique(x, axis=axis, return_index=True, return_inverse=True,
                                 return_counts=True)
    if not sorted_:  # first-occurrence order
        order = np.argsort(idx, kind="stable")
        y = np.take(y, order, axis=0 if axis is None else axis)
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        idx, cnt, inv = idx[order], cnt[order], rank[inv.reshape(-1)]
    m = build("Unique", {"x": x}, sorted=sorted_, **kw,
              outs=[("y", x.dtype, y.ndim), ("i", np.int64, 1), ("v", np.int64, 1),
                    ("c", np.int64, 1)])
    for got, want in zip(run(m, x), (y, idx, inv.reshape(-1), cnt)):
        np.testing.assert_array_equal(got, want)


def test_col2im_against_torch_fold():
    torch = pytest.importorskip("torch")
    x = RNG.normal(size=(2, 3 * 2 * 3, 9))
    kw = dict(strides=[2, 1], dilations=[1, 2], pads=[1, 0, 1, 1])
    # ONNX's pads may differ at the two ends, torch's may not: fold into the padded image
    # (5 + 1 + 1, 6 + 0 + 1) and crop.
    want = torch.nn.functional.fold(torch.tensor(x), (7, 7), (2, 3), dilation=(1, 2),
                                    stride=(2, 1))[:, :, 1:6, 0:6]
    m = build("Col2Im", {"x": x}, {"im": i64(5, 6), "b": i64(2, 3)},
              outs=[("y", x.dtype, 4)], **kw)
    np.testing.assert_allclose(run(m, x)[0], want.numpy(), rtol=1e-10)


# ---- gradients in training --------------------------------------------------------------

def _grad_case(case):
    """(model, x, ref): a model whose first input x gets the gradient, and its numpy
    reference as a function of x."""
    x = RNG.normal(size=(4, 5))
    w = RNG.normal(size=(5, 3))
    lens = [2, 4, 1, 0, 3]
    cases = {
        "slice": (build("Slice", {"x": x}, {"s": i64(-1, 0), "e": i64(-100, 5),
                                            "a": i64(1, 0), "st": i64(-2, 2)}),
                  lambda a: a[::2, ::-2]),
        "pad_reflect": (build("Pad", {"x": x}, {"p": i64(1, 2, 2, 1)}, mode="reflect"),
                        lambda a: np.pad(a, [(1, 2), (2, 1)], mode="reflect")),
        "pad_edge": (build("Pad", {"x": x}, {"p": i64(2, 0, 0, 3)}, mode="edge"),
                     lambda a: np.pad(a, [(2, 0), (0, 3)], mode="edge")),
        "pad_wrap": (build("Pad", {"x": x}, {"p": i64(0, 4, 1, 5)}, mode="wrap"),
                     lambda a: np.pad(a, [(0, 1), (4, 5)], mode="wrap")),
        "expand": (build("Expand", {"x": x}, {"s": i64(2, 1, 1)}, outs=[("y", x.dtype, 3)]),
                   lambda a: np.broadcast_to(a, (2, 4, 5))),
        "tile": (build("Tile", {"x": x}, {"r": i64(2, 3)}), lambda a: np.tile(a, (2, 3))),
        "concat": (build("Concat", {"x": x}, {"c": w.T}, axis=0),
                   lambda a: np.concatenate([a, w.T])),
        "transpose": (build("Transpose", {"x": x}), lambda a: a.T),
        "gather": (build("Gather", {"x": x}, {"i": i64(3, -1, 3)}, axis=1),
                   lambda a: a[:, [3, -1, 3]]),
        "gather_elements": (build("GatherElements", {"x": x},
                                  {"i": np.array([[0, 0], [3, 1], [1, 1], [2, 0]])}, axis=1),
                            lambda a: np.take_along_axis(
                                a, np.array([[0, 0], [3, 1], [1, 1], [2, 0]]), 1)),
        "gather_nd": (build("GatherND", {"x": x}, {"i": np.array([[1], [1], [-1]])}),
                      lambda a: a[[1, 1, -1]]),
        "scatter_nd_add": (build("ScatterND", {"x": x}, {"i": np.array([[1, 2], [1, 2]]),
                                                         "u": np.ones(2)}, reduction="add"),
                           lambda a: a + 2 * (np.arange(a.size).reshape(a.shape) == 7)),
        "scatter_elements": (build("ScatterElements", {"x": x},
                                   {"i": np.array([[4, 0]]), "u": np.ones((1, 2))}, axis=1),
                             lambda a: np.where(np.isin(np.arange(20).reshape(4, 5), [0, 4]),
                                                1.0, a)),
        "cumprod": (build("CumProd", {"x": x}, {"a": i64(1)}, opset=26, exclusive=1),
                    lambda a: np.concatenate([np.ones((4, 1)), np.cumprod(a, 1)[:, :-1]], 1)),
        "cumsum": (build("CumSum", {"x": x}, {"a": i64(0)}, reverse=1),
                   lambda a: np.flip(np.cumsum(np.flip(a, 0), 0), 0)),
        "einsum": (build("Einsum", {"x": x}, {"w": w}, equation="ij,jk->ik"),
                   lambda a: a @ w),
        "einsum_sum_diagonal": (build("Einsum", {"x": x[:, :4]}, equation="ii->"),
                                lambda a: np.trace(a[:, :4])),
        "depth_to_space": (build("DepthToSpace", {"x": x.reshape(1, 4, 1, 5)}, blocksize=2,
                                 mode="CRD"),
                           lambda a: a.reshape(1, 1, 2, 2, 1, 5).transpose(0, 1, 4, 2, 5, 3)
                           .reshape(1, 1, 2, 10)),
        "reverse_sequence": (build("ReverseSequence", {"x": x}, {"l": i64(*lens)},
                                   batch_axis=1, time_axis=0),
                             lambda a: np.stack([np.concatenate([a[:n, b][::-1], a[n:, b]])
                                                 for b, n in enumerate(lens)], 1)),
        "topk": (build("TopK", {"x": x}, {"k": i64(2)},
                       outs=[("y", x.dtype, 2), ("i", np.int64, 2)]),
                 lambda a: -np.sort(-a, 1)[:, :2]),
        "trilu": (build("Trilu", {"x": x}, {"k": i64(1)}, upper=0), lambda a: np.tril(a, 1)),
        "center_crop_pad": (build("CenterCropPad", {"x": x}, {"s": i64(7, 3)}),
                            lambda a: np.pad(a[:, 1:4], [(1, 2), (0, 0)])),
        "split": (build("Split", {"x": x}, {"s": i64(1, 4)}, axis=1,
                        outs=[("a", x.dtype, 2), ("b", x.dtype, 2)]),
                  lambda a: a[:, :1]),
        "space_to_depth": (build("SpaceToDepth", {"x": x.reshape(1, 1, 4, 5)[..., :4]},
                                 blocksize=2),
                           lambda a: a.reshape(1, 1, 2, 2, 2, 2).transpose(0, 3, 5, 1, 2, 4)
                           .reshape(1, 4, 2, 2)),
        "compress": (build("Compress", {"x": x}, {"c": np.array([1, 0, 1, 1], bool)}, axis=0),
                     lambda a: a[[0, 2, 3]]),
    }
    model, ref = cases[case]
    shaped = {"depth_to_space": x.reshape(1, 4, 1, 5), "einsum_sum_diagonal": x[:, :4].copy(),
              "space_to_depth": x.reshape(1, 1, 4, 5)[..., :4].copy()}
    return model, shaped.get(case, x), ref


GRAD_CASES = ["slice", "pad_reflect", "pad_edge", "pad_wrap", "expand", "tile", "concat",
              "transpose", "gather", "gather_elements", "gather_nd", "scatter_nd_add",
              "scatter_elements", "cumprod", "cumsum", "einsum",
              "einsum_sum_diagonal", "depth_to_space", "space_to_depth", "reverse_sequence",
              "topk", "trilu", "center_crop_pad", "compress", "split"]


@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradients_flow_through_handlers(case):
    model, x, ref = _grad_case(case)
    check_grad(model, x, ref)


def test_col2im_and_unique_gradients():
    x = RNG.normal(size=(1, 4, 4))
    m = build("Col2Im", {"x": x}, {"im": i64(3, 3), "b": i64(2, 2)}, outs=[("y", x.dtype, 4)])

    def fold(a):
        y = np.zeros((1, 1, 3, 3))
        for k, (i, j) in enumerate(np.ndindex(2, 2)):
            for ll, (p, q) in enumerate(np.ndindex(2, 2)):
                y[0, 0, p + i, q + j] += a[0, k, ll]
        return y
    check_grad(m, x, fold)
    x = np.array([3.0, 1.0, 3.0, 2.0])
    m = build("Unique", {"x": x})
    check_grad(m, x, lambda a: np.array([a[1], a[3], a[0]]))


# ---- bad input --------------------------------------------------------------------------

def _raises(kind, model, *feeds, match=None):
    with pytest.raises(kind, match=match) as e:
        run(model, *feeds)
    assert "ONNX node 'bad'" in str(e.value)


X = np.arange(12.0, dtype=np.float32).reshape(3, 4)


@pytest.mark.parametrize("op,consts,attrs", [
    ("Gather", {"i": i64(1, 4)}, {"axis": 1}),
    ("Gather", {"i": i64(-4)}, {"axis": 0}),
    ("GatherElements", {"i": np.array([[0], [5], [0]])}, {"axis": 1}),
    ("GatherND", {"i": np.array([[2, 4]])}, {}),
    ("GatherND", {"i": np.array([[0, -5]])}, {}),
    ("ScatterElements", {"i": np.array([[9]]), "u": np.ones((1, 1), np.float32)}, {}),
    ("ScatterND", {"i": np.array([[3]]), "u": np.ones((1, 4), np.float32)}, {}),
    ("ScatterND", {"i": np.array([[0, 4]]), "u": np.ones(1, np.float32)}, {}),
])
def test_indices_out_of_range_raise_index_error(op, consts, attrs):
    m = build(op, {"x": X}, consts, name="bad", **attrs)
    _raises(errors.IndexError, m, X, match="out of range")


def test_scatter_opset10_out_of_range():
    m = build("Scatter", {"x": X}, {"i": np.array([[0, 7]]), "u": np.ones((1, 2), np.float32)},
              opset=10, axis=1, name="bad")
    _raises(errors.IndexError, m, X, match="out of range")


@pytest.mark.parametrize("op,consts,kind", [
    ("Reshape", {"s": i64(5, -1)}, errors.ShapeError),          # 12 elements are not 5 * k
    ("Reshape", {"s": i64(2, 7)}, errors.ShapeError),
    ("Reshape", {"s": i64(-2, 6)}, errors.ShapeError),
    ("Reshape", {"s": i64(-1, -1)}, errors.ShapeError),
    ("Expand", {"s": i64(3, -4)}, errors.ShapeError),
    ("Expand", {"s": i64(2**20, 2**12, 1, 1)}, errors.ShapeError),  # 2**32 * 12 elements
    ("Expand", {"s": i64(2, 5)}, errors.ShapeError),             # 4 does not broadcast to 5
    ("Tile", {"r": i64(2**30, 2**30)}, errors.ShapeError),
    ("Tile", {"r": i64(1, -1)}, errors.ShapeError),
])
def test_bad_sizes_raise_before_allocating(op, consts, kind):
    m = build(op, {"x": X}, consts, name="bad", outs=[("y", np.float32, 2)])
    _raises(kind, m, X)


def test_constant_of_shape_and_range_refuse_huge_or_negative():
    shape = i64(2**40, 2**10)
    m = build("ConstantOfShape", {"s": shape}, name="bad", outs=[("y", np.float32, 2)])
    _raises(errors.ShapeError, m, shape, match="MAX_ELEMENTS")
    m = build("ConstantOfShape", {"s": i64(3, -1)}, name="bad", outs=[("y", np.float32, 2)])
    _raises(errors.ShapeError, m, i64(3, -1), match="negative")
    one = np.array(1.0, np.float32)
    m = build("Range", {"a": one, "b": one, "c": one}, name="bad",
              outs=[("y", np.float32, 1)])
    _raises(errors.ShapeError, m, np.float32(0), np.float32(1e12), np.float32(1e-3))
    _raises(errors.ValueError, m, np.float32(0), np.float32(1), np.float32(0))


def test_pad_split_and_slice_bad_arguments():
    m = build("Pad", {"x": X}, {"p": i64(1, 2, 3)}, name="bad")
    _raises(errors.ValueError, m, X, match="2 values per padded axis")
    m = build("Pad", {"x": X}, {"p": i64(0, 4, 0, 0)}, mode="reflect", name="bad")
    _raises(errors.ValueError, m, X, match="smaller than axis")
    m = build("Split", {"x": X}, {"s": i64(1, 2)}, axis=1, name="bad",
              outs=[("a", np.float32, 2), ("b", np.float32, 2)])
    _raises(errors.ShapeError, m, X, match="adding up to 4")
    m = build("Slice", {"x": X}, {"s": i64(0), "e": i64(2), "a": i64(0), "st": i64(0)},
              name="bad")
    _raises(errors.ValueError, m, X, match="steps must not be 0")
    m = build("Squeeze", {"x": X}, {"a": i64(0)}, name="bad")
    _raises(errors.ShapeError, m, X, match="not of size 1")


def test_reshape_count_mismatch_names_shapes():
    m = build("Reshape", {"x": X}, {"s": i64(4, 4)}, name="bad")
    _raises(errors.ShapeError, m, X, match=r"\(3, 4\) \(12 elements\) to \(4, 4\)")
