"""Every write is atomic: a crash (SIGKILL) in the middle of a save leaves the previous file
loadable, and the next save removes what the killed writer left behind."""
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import hl
from hl.checkpoint import archive

from .models import Wide, built

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def temporaries(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.endswith(".hl-tmp"))


def wide(n, value):
    m = Wide(n)
    m(hl.zeros(1))
    with hl.no_grad():
        m.W.fill_(value)
    return m


CHILD = """
import sys
sys.path.insert(0, {root!r})
import hl
from tests.checkpoint.models import Wide
m = Wide({n})
m(hl.zeros(1))
with hl.no_grad():
    m.W.fill_(1.0)
print("ready", flush=True)
m.save_states({path!r})
print("done", flush=True)
"""


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_sigkill_in_the_middle_of_a_large_save(tmp_path):
    path = tmp_path / "ck.zip"
    wide(10, 7.0).save_states(path)           # the previous checkpoint
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD.format(root=ROOT, n=32_000_000, path=str(path))],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        deadline = time.monotonic() + 60
        while not temporaries(tmp_path):       # the 128 MB save has begun
            assert child.poll() is None, "the child finished before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.0005)
        os.kill(child.pid, signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    assert temporaries(tmp_path), "the killed save left its temporary file"
    prev = Wide(10)
    prev(hl.zeros(1))
    prev.load_states(path)                     # the previous file is intact and loads
    np.testing.assert_array_equal(prev.W.numpy(), np.full(10, 7.0, np.float32))
    wide(10, 8.0).save_states(path)            # the next save cleans up after the dead one
    assert temporaries(tmp_path) == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.zip"]


def test_an_exception_mid_save_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ck.zip"
    m = built()
    m.save_states(path)
    before = path.read_bytes()
    calls = []

    def failing(v):
        calls.append(v)
        if len(calls) == 3:
            raise RuntimeError("disk on fire")
        return real(v)

    real = archive.host_array
    monkeypatch.setattr(archive, "host_array", failing)
    with pytest.raises(RuntimeError, match="disk on fire"):
        m.save_states(path)
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ck.zip"]


def test_temporaries_of_running_writers_are_left_alone(tmp_path):
    path = tmp_path / "ck.zip"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    try:
        live = tmp_path / f".ck.zip.{sleeper.pid}.abc123.hl-tmp"
        dead = tmp_path / f".ck.zip.{done.pid}.abc123.hl-tmp"
        other = tmp_path / f".other.zip.{done.pid}.abc123.hl-tmp"
        for p in (live, dead, other):
            p.write_bytes(b"partial")
        built().save_states(path)
        assert live.exists() and not dead.exists() and other.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
