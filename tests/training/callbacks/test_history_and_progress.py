import builtins
import sys

import pytest

import hl

from ..models import blobs, mlp


def test_history_is_returned_and_kept():
    x, y = blobs(40)
    m = mlp()
    h = m.fit(x, y, epochs=2, verbose=0)
    assert m.history is h and h.epoch == [0, 1] and len(h.history["accuracy"]) == 2


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib")
    x, y = blobs(40)
    h = mlp().fit(x, y, epochs=3, verbose=0, validation_split=0.25)
    path = tmp_path / "history.png"
    h.plot(path)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
    with pytest.raises(hl.errors.ValueError, match="no values named 'mae'"):
        h.plot(tmp_path / "x.png", keys=["mae"])


def test_plot_without_matplotlib_says_what_to_install(tmp_path, monkeypatch):
    h = mlp().fit(*blobs(16), verbose=0)
    real = builtins.__import__

    def no_matplotlib(name, *a, **kw):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real(name, *a, **kw)
    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    with pytest.raises(ImportError, match=r"pip install 'hl\[plot\]'"):
        h.plot(tmp_path / "h.png")
    assert not (tmp_path / "h.png").exists()


def test_verbose_two_prints_a_line_per_epoch(capsys):
    mlp().fit(*blobs(40), epochs=3, verbose=2, validation_split=0.25)
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3 and lines[0].startswith("Epoch 1/3 - ")
    assert "loss: " in lines[2] and "val_accuracy: " in lines[2]


def test_verbose_one_draws_a_bar(capsys):
    mlp().fit(*blobs(40), epochs=2, batch_size=10, verbose=1)
    out = capsys.readouterr().out
    assert "Epoch 1/2" in out and "Epoch 2/2" in out and "4/4" in out and "loss: " in out


def test_verbose_zero_and_auto(capsys, monkeypatch):
    mlp().fit(*blobs(40), epochs=2, verbose=0)
    assert capsys.readouterr().out == ""
    monkeypatch.setattr(sys.stdout, "isatty", lambda: False, raising=False)
    mlp().fit(*blobs(40), epochs=2)  # 'auto' off a terminal: one line per epoch
    assert len(capsys.readouterr().out.strip().splitlines()) == 2
