"""The ONNX mutation fuzzer (onnx_mutate.py) as tests: every mutated zoo model, imported and
run in a forked child with a 2 GiB address-space cap, must run or raise an hl error (no other
exception, no crash, no hang). A fast subset runs in the suite, a longer one is marked `slow`
(and `python tests/fuzz/onnx_mutate.py --cases N --seed S` runs any other)."""
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


def _campaign(cases, seed, timeout):
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run([sys.executable, os.path.join(HERE, "onnx_mutate.py"), "--cases",
                          str(cases), "--seed", str(seed), "--models",
                          "resnet18,lstm_classifier,emotion_ferplus,bert_squad,shufflenet_v2"],
                         capture_output=True, text=True, timeout=timeout, env=env)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert '"bugs": 0' in out.stdout


def test_onnx_mutations_fast_subset():
    _campaign(12, 7, 600)


@pytest.mark.slow
def test_onnx_mutations_campaign():
    _campaign(60, 11, 1800)
