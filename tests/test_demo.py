"""`python -m hl.demo`'s command line: the --mnist path on small IDX files written here (the
digits path is the real-data test in test_real_data.py)."""
import subprocess
import sys

import numpy as np

from hl import demo
from tests.data.test_mnist import make_mnist


def test_demo_trains_on_mnist_files(tmp_path, capsys):
    make_mnist(tmp_path, np.random.default_rng(0), gz=True, n_train=70, n_test=20)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    assert demo.main(["--mnist", str(tmp_path), "--epochs", "2", "--batch-size", "32",
                      "--out", str(out_dir), "--verbose", "2"]) == 0
    out = capsys.readouterr().out
    assert f"MNIST from {tmp_path}: 70 training and 20 test images" in out
    assert "Epoch 2/2 - " in out and "val_loss: " in out
    assert f"saved to {out_dir / 'mnist-cnn.hl'} and loaded back" in out
    acc = float(out.split("test accuracy: ")[1].split()[0])
    assert 0.0 <= acc <= 1.0


def test_demo_module_runs_and_reports_help():
    r = subprocess.run([sys.executable, "-m", "hl.demo", "--help"], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and "--mnist DIR" in r.stdout
