"""The ONNX model zoo (shared/onnx-zoo: 11 architectures exported from PyTorch at opsets 11 and
17) imported with hl.onnx.prepare and run for inference.

Each model must reproduce the outputs shipped beside it (onnxruntime's, at the shipped batch
size) within rtol 1e-3, atol 1e-4, and must do so again at other sizes: batch 1 and batch 3,
and for the text models a shorter and a longer sequence, against onnxruntime run here on the
same inputs. The other-size inputs are built from the shipped ones (rows repeated, tokens cut
or repeated), with the attention mask rebuilt so the padded row stays padded at its end.
The trainable import (hl.onnx.ONNXModel, weights as parameters, so nothing downstream of them
is folded) must give the shipped outputs too, in eval mode.

The zoo is found at ../shared/onnx-zoo beside the checkout, or at $HL_ONNX_ZOO; without it
the module is skipped. Runtime: about 10 s on 2 cores (prepare is cached per file).
"""
import functools
import json
import os

import numpy as np
import pytest

import hl.onnx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ZOO = os.environ.get("HL_ONNX_ZOO") or os.path.join(REPO, "..", "shared", "onnx-zoo")
RTOL, ATOL = 1e-3, 1e-4

if not os.path.isfile(os.path.join(ZOO, "manifest.json")):
    pytest.skip(f"no ONNX model zoo at {os.path.abspath(ZOO)} (set HL_ONNX_ZOO to its folder)",
                allow_module_level=True)

with open(os.path.join(ZOO, "manifest.json")) as fh:
    MANIFEST = json.load(fh)["models"]

CASES = [(name, opset) for name in sorted(MANIFEST) for opset in sorted(MANIFEST[name]["files"])]
IDS = [f"{name}-{opset}" for name, opset in CASES]


def path_of(name, opset):
    return os.path.join(ZOO, MANIFEST[name]["files"][opset]["file"])


@functools.lru_cache(maxsize=None)
def prepared(name, opset):
    return hl.onnx.prepare(path_of(name, opset))


@functools.lru_cache(maxsize=None)
def reference(name):
    """(inputs, outputs): {name: array} each, from NAME.npz."""
    with np.load(os.path.join(ZOO, MANIFEST[name]["reference"])) as z:
        ins = {k[3:]: z[k] for k in z.files if k.startswith("in_")}
        outs = {k[4:]: z[k] for k in z.files if k.startswith("out_")}
    return ins, outs


def compare(got, want, what):
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for name, g, w in zip(want, got, want.values()):
        g = np.asarray(g)
        assert g.dtype == w.dtype, f"{what}, {name}: dtype {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape, f"{what}, {name}: shape {g.shape}, expected {w.shape}"
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{what}, {name}")


@pytest.mark.parametrize("name,opset", CASES, ids=IDS)
def test_shipped_outputs(name, opset):
    ins, outs = reference(name)
    got = prepared(name, opset).run(ins)
    compare(got, outs, f"{name} {opset} at the shipped size")


@pytest.mark.parametrize("name,opset", CASES, ids=IDS)
def test_trainable_import_in_eval_mode(name, opset):
    ins, outs = reference(name)
    model = hl.onnx.ONNXModel(path_of(name, opset))
    model.eval()
    with hl.no_grad():
        got = [y.numpy() for y in model(ins)]
    compare(got, outs, f"{name} {opset} as ONNXModel")


def dynamic_axes(name, opset):
    """{input name: set of axes with a symbolic size} as the file declares them."""
    import onnx
    model = onnx.load(path_of(name, opset), load_external_data=False)
    return {i.name: {d for d, dim in enumerate(i.type.tensor_type.shape.dim) if dim.dim_param}
            for i in model.graph.input}


def resize(ins, axes, batch, length):
    """The shipped inputs at ``batch`` rows (repeating them in turn) and, where axis 1 is
    dynamic, ``length`` tokens (cut, or extended by repeating the sequence). An attention mask
    is rebuilt: ones, and zeros on the last quarter of each row that was padded."""
    out = {}
    for key, x in ins.items():
        rows = np.arange(batch) % x.shape[0]
        if key == "attention_mask":
            padded = (x == 0).any(axis=1)[rows]
            x = np.ones((batch, length), x.dtype)
            x[padded, length * 3 // 4:] = 0
        else:
            x = np.take(x, rows, axis=0)
            if 1 in axes[key]:
                x = np.take(x, np.arange(length) % x.shape[1], axis=1)
        out[key] = np.ascontiguousarray(x)
    return out


@pytest.mark.parametrize("name,opset", CASES, ids=IDS)
def test_other_sizes(name, opset):
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # as make_zoo.py
    sess = ort.InferenceSession(path_of(name, opset), so, providers=["CPUExecutionProvider"])
    ins, outs = reference(name)
    axes = dynamic_axes(name, opset)
    shipped = next(iter(ins.values())).shape
    sizes = [(1, None), (3, None)]
    if len(shipped) == 2 and any(1 in a for a in axes.values()):  # text: also the length
        sizes = [(1, shipped[1] * 2 // 3), (3, shipped[1] + 7)]
    for batch, length in sizes:
        feeds = resize(ins, axes, batch, length)
        want = dict(zip(outs, sess.run(list(outs), feeds)))
        got = prepared(name, opset).run(feeds)
        compare(got, want, f"{name} {opset} at batch {batch}" +
                (f", length {length}" if length else ""))


def test_zoo_is_complete():
    """Every model of the README is there, at both opsets (a partial copy would shrink the
    tests above silently)."""
    assert len(MANIFEST) == 11, sorted(MANIFEST)
    assert all(set(m["files"]) == {"op11", "op17"} for m in MANIFEST.values())
