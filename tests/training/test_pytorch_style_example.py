"""examples/pytorch_style.py (PyTorch's loop: backward, step, zero_grad; state_dict round
trip) runs as written and learns the digits."""
import importlib.util
import os

EXAMPLE = os.path.join(os.path.dirname(__file__), "..", "..", "examples", "pytorch_style.py")


def test_pytorch_style_example(capsys):
    spec = importlib.util.spec_from_file_location("pytorch_style", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    acc = mod.main()
    out = capsys.readouterr().out
    assert acc > 0.9, acc
    losses = [float(line.split("loss ")[1]) for line in out.splitlines() if "loss " in line]
    assert len(losses) == 10 and losses[-1] < 0.5 * losses[0]
    assert "restored copy agrees: True" in out
