"""The ONNX walk-throughs in examples/onnx run and do what they say."""
import importlib.util
import os

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.join(HERE, "..", "..", "examples", "onnx")
ZOO = os.environ.get("HL_ONNX_ZOO", os.path.join(HERE, "..", "..", "..", "shared", "onnx-zoo"))


def _load(name):
    spec = importlib.util.spec_from_file_location(name, os.path.join(EXAMPLES, name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_transfer_learning_lowers_the_loss():
    path = os.path.join(ZOO, "resnet18-op17.onnx")
    if not os.path.exists(path):
        pytest.skip(f"the ONNX model zoo is not at {ZOO} (set HL_ONNX_ZOO)")
    example = _load("transfer_learning")
    history, acc = example.main(path, epochs=2, verbose=0)
    losses = history.history["loss"]
    assert losses[-1] < 0.8 * losses[0]
    assert acc > 0.6  # 10 classes: chance is 0.1; the full 3 epochs reach about 0.87
