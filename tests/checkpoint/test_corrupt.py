"""Damaged and foreign files: each raises CheckpointError naming the file and the problem,
and the model is left exactly as it was."""
import json
import zipfile

import pytest

import hl
from hl.checkpoint import archive
from hl.errors import CheckpointError

from .models import built, same_states, snapshot


@pytest.fixture
def saved(tmp_path):
    m = built()
    m.train_one_batch(hl.randn(4, 1, 5, 5), hl.tensor([0, 1, 2, 1]))
    path = tmp_path / "ck.zip"
    m.save_states(path, {"epoch": 2})
    return path


def expect_error(path, match):
    model = built()
    snap = snapshot(model)
    with pytest.raises(CheckpointError, match=match) as e:
        model.load_states(path)
    assert str(path) in str(e.value)
    assert same_states(model, snap)


@pytest.mark.parametrize("keep", [0, 10, 100, 600, 0.5, -1])
def test_truncated(saved, keep):
    data = saved.read_bytes()
    n = int(len(data) * keep) if isinstance(keep, float) else keep % len(data)
    saved.write_bytes(data[:n])
    expect_error(saved, "not a zip archive, or truncated")


def test_a_flipped_bit_in_the_tensors(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        size = z.getinfo("tensors.h5").file_size
    data[512 + size // 2] ^= 0x10
    saved.write_bytes(bytes(data))
    expect_error(saved, "tensors.h5 is corrupted")


def test_a_flipped_bit_in_states_json(saved):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as z:
        info = z.getinfo("states.json")
    data[info.header_offset + 30 + len("states.json") + 5] ^= 0x01
    saved.write_bytes(bytes(data))
    expect_error(saved, "states.json is corrupted")


@pytest.mark.parametrize("content", [b"", b"hello world\n" * 10, bytes(range(256)) * 20])
def test_not_an_archive(tmp_path, content):
    path = tmp_path / "x.zip"
    path.write_bytes(content)
    expect_error(path, "not a zip archive")


def test_a_missing_file_and_a_folder(tmp_path):
    expect_error(tmp_path / "nope.zip", "no such file")
    expect_error(tmp_path, "is a folder")


def test_a_zip_of_something_else(tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("readme.txt", "hi")
    expect_error(path, r"missing")


def test_members_outside_the_archive_folder(saved, tmp_path):
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(evil, "w") as dst:
        for name in src.namelist():
            dst.writestr(name, src.read(name))
        dst.writestr("../../etc/evil", "x")
    expect_error(evil, "outside the archive's folder")


def test_a_missing_member(saved, tmp_path):
    path = tmp_path / "half.zip"
    with zipfile.ZipFile(saved) as src, zipfile.ZipFile(path, "w") as dst:
        dst.writestr("states.json", src.read("states.json"))
    expect_error(path, r"the member\(s\) \['tensors.h5'\] are missing")


def write_states_archive(path, doc, tensors):
    archive.write(path, {"states.json": json.dumps(doc).encode()}, tensors)


def test_dataset_shape_disagrees_with_states_json(saved, tmp_path):
    with archive.Reader(saved) as r:
        doc = r.json("states.json")
        tensors = [(e["dataset"], r.dataset(e["dataset"])[()]) for e in doc["states"].values()]
    doc["states"]["fc.b"]["shape"] = [4]
    write_states_archive(tmp_path / "a.zip", doc, tensors)
    expect_error(tmp_path / "a.zip", r"the dataset states/fc.b has shape \(3,\), but "
                                     r"states.json says \(4,\)")
    doc["states"]["fc.b"]["shape"] = [3]
    doc["states"]["fc.b"]["dtype"] = "int64"
    write_states_archive(tmp_path / "b.zip", doc, tensors)
    expect_error(tmp_path / "b.zip", "has dtype float32, but states.json says int64")
    del tensors[0]
    doc["states"]["fc.b"]["dtype"] = "float32"
    write_states_archive(tmp_path / "c.zip", doc, tensors)
    expect_error(tmp_path / "c.zip", "has no dataset")


def test_bad_states_json(saved, tmp_path):
    with archive.Reader(saved) as r:
        doc = r.json("states.json")
        tensors = [(e["dataset"], r.dataset(e["dataset"])[()]) for e in doc["states"].values()]
    write_states_archive(tmp_path / "newer.zip", dict(doc, version=99), tensors)
    expect_error(tmp_path / "newer.zip", "written by a newer hl")
    archive.write(tmp_path / "nojson.zip", {"states.json": b"{not json"}, tensors)
    expect_error(tmp_path / "nojson.zip", "not valid JSON")
    bad = json.loads(json.dumps(doc))
    bad["states"]["fc.b"] = {"shape": "x"}
    write_states_archive(tmp_path / "bad.zip", bad, tensors)
    expect_error(tmp_path / "bad.zip", "describes the state 'fc.b' badly")


def test_a_recompressed_archive_still_loads(saved, tmp_path):
    """Another zip tool's output (deflated, other offsets) loads through the slow path."""
    other = tmp_path / "re.zip"
    with zipfile.ZipFile(saved) as src, \
            zipfile.ZipFile(other, "w", zipfile.ZIP_DEFLATED) as dst:
        for name in reversed(src.namelist()):
            dst.writestr(name, src.read(name))
    a, b = built(), built()
    a.load_states(saved)
    assert b.load_states(other) == {"epoch": 2}
    assert same_states(b, snapshot(a))
    data = bytearray(other.read_bytes())
    with zipfile.ZipFile(other) as z:
        info = z.getinfo("tensors.h5")
    data[info.header_offset + 30 + len("tensors.h5") + info.compress_size // 2] ^= 0x40
    other.write_bytes(bytes(data))
    expect_error(other, "tensors.h5")



@pytest.mark.parametrize("fraction", [0.1, 0.3, 0.5, 0.7, 0.9])
def test_a_flipped_byte_anywhere_is_an_error_or_harmless(saved, fraction):
    """Sweeps flips over a stretch of the file: each either raises CheckpointError or hits a
    byte that does not matter (a timestamp, padding) and loads the right values."""
    raw = saved.read_bytes()
    good = built()
    good.load_states(saved)
    start = int(len(raw) * fraction)
    for pos in range(start, min(start + 40, len(raw))):
        data = bytearray(raw)
        data[pos] ^= 0x24
        saved.write_bytes(bytes(data))
        model = built()
        try:
            model.load_states(saved)
        except CheckpointError:
            continue
        assert same_states(model, snapshot(good)), pos
