"""examples/keras_style.py runs as written and its model learns the digits."""
import importlib.util
import os

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "keras_style.py")


def test_keras_style_example(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("keras_style", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    acc = mod.main(str(tmp_path))
    out = capsys.readouterr().out
    assert acc > 0.93, acc
    assert {"best.zip", "log.csv"} <= set(os.listdir(tmp_path))
    reloaded = float(out.split("test accuracy ")[1].split()[0])
    assert abs(reloaded - acc) < 0.02  # the best checkpoint, close to the restored weights
