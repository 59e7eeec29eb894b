"""hl.save / hl.load: whole models as a pickle plus an HDF5 tensor archive, loaded through an
allow-list. The malicious files are crafted here the way an attacker would: pickles whose
globals are os.system, eval, subprocess, a module that runs code on import, hl internals."""
import fractions
import json
import os
import pickle
import sys
import zipfile

import numpy as np
import pytest

import hl
from hl import layers as L
from hl.checkpoint import archive
from hl.errors import CheckpointError, UnsafeCheckpointError

from .models import batches, built


def losses_of(model, data):
    return [model.train_one_batch(x, y)[1].numpy().tobytes() for x, y in data]


def test_a_loaded_model_predicts_and_trains_exactly_like_the_saved_one(tmp_path):
    m = built(optim=hl.opt.Adam(lr=0.01), dropout=0.0)
    losses_of(m, batches(2))
    hl.save(m, tmp_path / "m.hl")
    back = hl.load(tmp_path / "m.hl")
    assert type(back) is type(m) and back is not m
    assert back.fc.W.name == "fc.W" and back.fc.W.requires_grad
    x = batches(1, seed=9)[0][0]
    m.eval(), back.eval()
    np.testing.assert_array_equal(back(x).numpy(), m(x).numpy())
    m.train(), back.train()
    data = batches(3, seed=4)
    assert losses_of(back, data) == losses_of(m, data)  # Adam's moments came along


def test_archive_members_and_sharing(tmp_path):
    shared = L.Linear(4)
    net = L.Sequential(shared, L.ReLU(), shared)  # the same layer twice: one set of weights
    net(hl.randn(2, 4))
    obj = {"net": net, "table": np.arange(10.0), "note": "hi", "t": net.get_params()}
    hl.save(obj, tmp_path / "o.hl")
    with zipfile.ZipFile(tmp_path / "o.hl") as z:
        assert sorted(z.namelist()) == ["model.json", "model.pkl", "tensors.h5"]
        assert json.loads(z.read("model.json"))["format"] == "hl.model"
    back = hl.load(tmp_path / "o.hl")
    assert back["note"] == "hi"
    np.testing.assert_array_equal(back["table"], np.arange(10.0))
    params = back["net"].get_params()
    assert back["t"]["0.W"] is params["0.W"]  # one tensor, however often it is referenced
    assert back["net"]._layers[0] is back["net"]._layers[2]
    x = hl.randn(2, 4)
    np.testing.assert_array_equal(back["net"](x).numpy(), net(x).numpy())


def test_every_kind_of_layer_survives(tmp_path):
    x = hl.randn(2, 3, 6, 6)
    seq = hl.randn(2, 5, 8)
    models = [
        (L.Sequential(L.Conv2d(4, 3), L.BatchNorm2d(), L.ReLU(), L.MaxPool2d(2), L.Flatten(),
                      L.Dropout(0.5), L.Linear(2)), x),
        (L.Sequential(L.ConvTranspose2d(2, 3), L.AvgPool2d(2), L.GlobalAvgPool2d()), x),
        (L.LSTM(6), seq), (L.GRU(6), seq),
        (L.MultiHeadAttention(8, 2), seq),
        (L.Sequential(L.LayerNorm(), L.GELU(), L.Linear(3)), seq),
    ]
    for i, (model, inp) in enumerate(models):
        model(inp)
        model.eval()
        hl.save(model, tmp_path / f"{i}.hl")
        back = hl.load(tmp_path / f"{i}.hl")
        back.eval()
        a, b = model(inp), back(inp)
        a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=type(model).__name__)


def test_device_argument(tmp_path):
    m = built()
    hl.save(m, tmp_path / "m.hl")
    back = hl.load(tmp_path / "m.hl", device="cpu")
    assert all(t.device == hl.cpu() for t in back.get_states().values())


@pytest.mark.gpu
def test_load_onto_the_gpu(tmp_path):
    m = built()
    hl.save(m, tmp_path / "m.hl")
    back = hl.load(tmp_path / "m.hl", device="cuda")
    assert all(t.device.kind == "cuda" for t in back.get_states().values())
    x = batches(1)[0][0]
    m.eval(), back.eval()
    np.testing.assert_allclose(back(x.to("cuda")).numpy(), m(x).numpy(), rtol=1e-5,
                               atol=1e-6)


def test_unpicklable_attributes_get_a_clear_error(tmp_path):
    m = built()
    m.hook = lambda x: x
    with pytest.raises(CheckpointError, match="Lambdas"):
        hl.save(m, tmp_path / "m.hl")
    assert list(tmp_path.iterdir()) == []


# ---- malicious files ----------------------------------------------------------------------

def model_file(path, pickle_bytes):
    """A file laid out exactly as hl.save lays it out, around a pickle of our choosing."""
    meta = {"format": "hl.model", "version": 1, "class": "x", "tensors": 0}
    archive.write(path, {"model.json": json.dumps(meta).encode(), "model.pkl": pickle_bytes},
                  [])


def global_call(module, name, *args):
    """A protocol-0 pickle that calls module.name(*args) (args: strings)."""
    body = b"".join(b"V" + a.encode() + b"\n" for a in args)
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n(" + body + b"tR."


class Reducer:
    def __init__(self, fn, *args):
        self.fn, self.args = fn, args

    def __reduce__(self):
        return self.fn, self.args


@pytest.mark.parametrize("module, name", [
    ("os", "system"), ("posix", "system"), ("builtins", "eval"), ("builtins", "exec"),
    ("builtins", "getattr"), ("builtins", "__import__"), ("subprocess", "Popen"),
    ("hl._core", "call"),                       # the raw C binding
    ("hl._tensor", "np"),                       # a module reached through hl
    ("hl.model", "Module.save_states"),         # a method that writes files
    ("hl.checkpoint.pickling", "save"),         # hl's own file writers
    ("hl.data.idx", "read_idx"),
])
def test_dangerous_globals_are_refused(tmp_path, module, name):
    marker = tmp_path / "pwned"
    model_file(tmp_path / "evil.hl", global_call(module, name, f"touch {marker}"))
    with pytest.raises(UnsafeCheckpointError) as e:
        hl.load(tmp_path / "evil.hl")
    assert e.value.global_name == f"{module}.{name}"
    assert f"'{module}.{name}'" in str(e.value) and "trusted=True" in str(e.value)
    assert not marker.exists()


def test_a_real_exploit_pickle_is_refused(tmp_path):
    marker = tmp_path / "pwned"
    payload = pickle.dumps(Reducer(os.system, f"touch {marker}"), protocol=5)
    model_file(tmp_path / "evil.hl", payload)
    with pytest.raises(UnsafeCheckpointError, match="system"):
        hl.load(tmp_path / "evil.hl")
    assert not marker.exists()


def test_loading_never_imports_a_module(tmp_path, monkeypatch):
    marker = tmp_path / "imported"
    (tmp_path / "hl_test_evilmod.py").write_text(
        f"open({str(marker)!r}, 'w').close()\n"
        "import hl\n"
        "class Payload(hl.layers.Layer):\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    model_file(tmp_path / "evil.hl", global_call("hl_test_evilmod", "Payload"))
    with pytest.raises(UnsafeCheckpointError, match="not imported"):
        hl.load(tmp_path / "evil.hl")
    assert not marker.exists() and "hl_test_evilmod" not in sys.modules


def test_trusted_and_allowed(tmp_path):
    payload = pickle.dumps({"f": fractions.Fraction(1, 3)}, protocol=5)
    model_file(tmp_path / "f.hl", payload)
    with pytest.raises(UnsafeCheckpointError, match="fractions.Fraction"):
        hl.load(tmp_path / "f.hl")
    assert hl.load(tmp_path / "f.hl", allowed=[fractions.Fraction]) == \
        {"f": fractions.Fraction(1, 3)}
    assert hl.load(tmp_path / "f.hl", trusted=True) == {"f": fractions.Fraction(1, 3)}


class Plain:
    """Not a Layer: refused unless named in allowed=."""

    def __init__(self, v):
        self.v = v


def test_user_classes(tmp_path):
    m = built()
    m.extra = Plain(3)
    hl.save(m, tmp_path / "m.hl")
    with pytest.raises(UnsafeCheckpointError, match="Plain"):
        hl.load(tmp_path / "m.hl")
    assert hl.load(tmp_path / "m.hl", allowed=[Plain]).extra.v == 3
    del m.extra
    hl.save(m, tmp_path / "m.hl")            # a Layer subclass from an imported module: allowed
    assert type(hl.load(tmp_path / "m.hl")).__name__ == "Net"


def test_wrong_kind_of_file(tmp_path):
    m = built()
    m.save_states(tmp_path / "states.zip")
    with pytest.raises(CheckpointError, match="load_states"):
        hl.load(tmp_path / "states.zip")
    hl.save(m, tmp_path / "m.hl")
    with pytest.raises(CheckpointError, match="hl.load"):
        built().load_states(tmp_path / "m.hl")



# ---- functions, methods and object internals (issue 17) ----------------------------------

def _proto2(*ops):
    return b"\x80\x02" + b"".join(ops) + b"."


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


@pytest.mark.parametrize("module, name", [
    ("hl", "save"), ("hl", "load"), ("hl.v2.param_file", "save"), ("hl.onnx.export", "save"),
    ("hl.onnx", "export"), ("hl.ops", "relu"), ("hl.layers.initializers", "he_uniform"),
])
def test_no_function_is_ever_called(tmp_path, module, name):
    """hl.save / hl.load / file writers reached as module-level functions: refused by name."""
    marker = tmp_path / "written"
    model_file(tmp_path / "evil.hl", global_call(module, name, str(marker)))
    with pytest.raises(UnsafeCheckpointError):
        hl.load(tmp_path / "evil.hl")
    assert not marker.exists()


def test_classes_are_called_only_on_known_reconstruction_paths(tmp_path):
    """A class admitted as a global still may not be called with a file's arguments."""
    import hl.callbacks  # noqa: F401 - imported, so their classes are admitted as globals
    import hl.onnx.model  # noqa: F401
    for module, name in [("hl.onnx.model", "ONNXModel"), ("hl.callbacks", "ModelCheckpoint"),
                         ("hl.layers.linear", "Linear")]:
        model_file(tmp_path / "evil.hl", global_call(module, name, "/etc/passwd"))
        with pytest.raises(UnsafeCheckpointError, match="REDUCE"):
            hl.load(tmp_path / "evil.hl")


def test_build_cannot_set_a_tensors_fields(tmp_path):
    """The reported crash: a BUILD setting Tensor._dtype to float64 on a float32 tensor made
    numpy() a view twice the size of the storage."""
    m = built()
    hl.save(m, tmp_path / "m.hl")
    with zipfile.ZipFile(tmp_path / "m.hl") as z:
        pkl = z.read("model.pkl")
    # after the first tensor reference (BINPERSID 'Q'), BUILD it with {'_dtype': float64}
    at = pkl.index(b"Q") + 1
    evil = pkl[:at] + b"}" + b"X\x06\x00\x00\x00_dtype" + _global("hl.dtypes", "float64") + \
        b"s" + b"b" + pkl[at:]
    meta = {"format": "hl.model", "version": 1, "class": "x", "tensors": 0}
    with archive.Reader(tmp_path / "m.hl") as r:
        tensors = [(f"t/{k}", r.dataset(f"t/{k}")[()]) for k in r.tensors()["t"]]
    archive.write(tmp_path / "evil.hl", {"model.json": json.dumps(meta).encode(),
                                         "model.pkl": evil}, tensors)
    with pytest.raises(UnsafeCheckpointError, match="BUILD"):
        hl.load(tmp_path / "evil.hl")
    t = hl.ones(3)
    with pytest.raises(UnsafeCheckpointError):
        t.__setstate__({"_dtype": hl.float64})
    assert t.dtype is hl.float32


@pytest.mark.parametrize("payload, match", [
    # NEWOBJ of a Tensor: an object without a storage
    (_proto2(_global("hl._tensor", "Tensor"), b")\x81"), "Tensor"),
    # BUILD on a shared dtype singleton (would change float32's itemsize for everyone)
    (_proto2(_global("hl.dtypes", "float32"), b"}X\x08\x00\x00\x00itemsizeK\x08sb"), "BUILD"),
    (_proto2(_global("hl.dtypes", "float32"), b"N}X\x08\x00\x00\x00itemsizeK\x08s\x86b"),
     "BUILD"),
    # SETITEM on a non-container: would call its Python __setitem__
    (_proto2(_global("hl.layers.linear", "Linear"), b")\x81K\x00K\x01s"), "SETITEM"),
    # a defaultdict whose factory is a class that would be called later
    (_proto2(_global("collections", "defaultdict"), _global("hl.layers.linear", "Linear"),
             b"\x85R"), "REDUCE"),
    # an extension code
    (b"\x80\x02\x82\x01.", "EXT"),
    # an instance's own __setstate__, planted by a first BUILD
    (_proto2(_global("hl.layers.core", "Flatten"), b")\x81}X\x0c\x00\x00\x00__setstate__",
             _global("builtins", "print"), b"sb}b"), "print"),
])
def test_opcode_level_attacks_are_refused(tmp_path, payload, match):
    model_file(tmp_path / "evil.hl", payload)
    with pytest.raises(UnsafeCheckpointError, match=match):
        hl.load(tmp_path / "evil.hl")
    assert hl.float32.itemsize == 4


@pytest.mark.parametrize("payload", [
    b"\x80\x05\x8e" + (2 ** 62).to_bytes(8, "little") + b".",    # BINBYTES8 claiming 2**62
    b"\x80\x05\x96" + (2 ** 62).to_bytes(8, "little") + b".",    # BYTEARRAY8
    b"\x80\x05\x8d" + (2 ** 62).to_bytes(8, "little") + b".",    # BINUNICODE8
    b"I" + b"9" * 5000 + b"\n.",                                  # a 5,000-digit integer
    b"\x80\x02(" * 100000 + b".",
])
def test_resource_claims_give_a_checkpoint_error(tmp_path, payload):
    model_file(tmp_path / "evil.hl", payload)
    with pytest.raises(CheckpointError):
        hl.load(tmp_path / "evil.hl")
