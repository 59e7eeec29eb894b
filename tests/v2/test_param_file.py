"""hl.v2.param_file against bytes made independently: configs by the real protobuf library
(a ParameterConfig class built at run time from the fields of Paddle's ParameterConfig.proto),
value members by struct.pack("IIQ", ...), tars by Python's tarfile as v2 wrote them."""
import gzip
import io
import struct
import tarfile

import numpy as np
import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from hl.errors import CheckpointError
from hl.v2 import param_file
from hl.v2.param_file import ParamConfig

F = descriptor_pb2.FieldDescriptorProto

# Paddle's proto/ParameterConfig.proto (proto2), enough of it to carry the fields real files
# hold besides the ones ParamConfig keeps: (name, number, type, label, default).
_CONFIG_FIELDS = [
    ("name", 1, F.TYPE_STRING, F.LABEL_REQUIRED, None),
    ("size", 2, F.TYPE_UINT64, F.LABEL_REQUIRED, None),
    ("learning_rate", 3, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "1.0"),
    ("momentum", 4, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.0"),
    ("initial_mean", 5, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.0"),
    ("initial_std", 6, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.01"),
    ("decay_rate", 7, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.0"),
    ("decay_rate_l1", 8, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.0"),
    ("dims", 9, F.TYPE_UINT64, F.LABEL_REPEATED, None),
    ("device", 10, F.TYPE_INT32, F.LABEL_OPTIONAL, "-1"),
    ("initial_strategy", 11, F.TYPE_INT32, F.LABEL_OPTIONAL, "0"),
    ("initial_smart", 12, F.TYPE_BOOL, F.LABEL_OPTIONAL, "false"),
    ("num_batches_regularization", 13, F.TYPE_INT32, F.LABEL_OPTIONAL, "1"),
    ("format", 15, F.TYPE_STRING, F.LABEL_OPTIONAL, ""),
    ("gradient_clipping_threshold", 17, F.TYPE_DOUBLE, F.LABEL_OPTIONAL, "0.0"),
    ("is_static", 18, F.TYPE_BOOL, F.LABEL_OPTIONAL, "false"),
    ("para_id", 19, F.TYPE_UINT64, F.LABEL_OPTIONAL, None),
    ("parameter_block_size", 24, F.TYPE_UINT64, F.LABEL_OPTIONAL, "0"),
]


def _message_classes():
    """(ParameterConfig, the same with packed dims), from a descriptor built here."""
    fdp = descriptor_pb2.FileDescriptorProto(
        name="hl_tests_v2_parameter_config.proto", package="hl_tests_v2", syntax="proto2")
    hook = fdp.message_type.add(name="ParameterUpdaterHookConfig")
    hook.field.add(name="type", number=1, type=F.TYPE_STRING, label=F.LABEL_REQUIRED)
    hook.field.add(name="sparsity_ratio", number=2, type=F.TYPE_DOUBLE, label=F.LABEL_OPTIONAL,
                   default_value="0.8")
    for message_name, packed in (("ParameterConfig", False), ("PackedParameterConfig", True)):
        message = fdp.message_type.add(name=message_name)
        for name, number, type_, label, default in _CONFIG_FIELDS:
            field = message.field.add(name=name, number=number, type=type_, label=label)
            if default is not None:
                field.default_value = default
            if name == "dims" and packed:
                field.options.packed = True
        message.field.add(name="update_hooks", number=20, type=F.TYPE_MESSAGE,
                          label=F.LABEL_REPEATED,
                          type_name=".hl_tests_v2.ParameterUpdaterHookConfig")
    pool = descriptor_pool.DescriptorPool()
    pool.AddSerializedFile(fdp.SerializeToString())

    def message_class(name):
        descriptor = pool.FindMessageTypeByName(f"hl_tests_v2.{name}")
        if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.21
            return message_factory.GetMessageClass(descriptor)
        return message_factory.MessageFactory(pool).GetPrototype(descriptor)

    return message_class("ParameterConfig"), message_class("PackedParameterConfig")


PB, PACKED_PB = _message_classes()
KEPT = ("name", "size", "learning_rate", "initial_mean", "initial_std", "decay_rate",
        "is_static")


def pb_config(cls=PB, dims=(), **fields):
    message = cls(**fields)
    message.dims.extend(dims)
    return message


def values_member(values, version=0, width=4, count=None):
    values = np.asarray(values, dtype=np.float32)
    return struct.pack("IIQ", version, width, values.size if count is None else count) + \
        values.tobytes()


def tar_of(members, close=False):
    """A tar made as v2's to_tar made it: GNU format, TarInfo defaults, not closed (no end
    blocks) unless `close`."""
    buf = io.BytesIO()
    tar = tarfile.TarFile(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT)
    for name, data in members:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    if close:
        tar.close()
    return buf.getvalue()


W = np.arange(6, dtype=np.float32).reshape(2, 3) / 7
B = np.array([1.5, -2.0, 3.25], dtype=np.float32)


def v2_members(w=W, b=B):
    return [("w", values_member(w)),
            ("w.protobuf", pb_config(name="w", size=6, dims=(2, 3), learning_rate=0.5,
                                     momentum=0.9, initial_std=0.1).SerializeToString()),
            ("b", values_member(b)),
            ("b.protobuf", pb_config(name="b", size=3, dims=(1, 3), is_static=True,
                                     initial_strategy=1).SerializeToString())]


def tag(field, wire):
    """A field's key as protobuf's varint."""
    n, out = field << 3 | wire, b""
    while n >= 0x80:
        out, n = out + bytes([n & 0x7F | 0x80]), n >> 7
    return out + bytes([n])


def read_bytes(data):
    return param_file.read(io.BytesIO(data))


# --- the config message -------------------------------------------------------------------------

CONFIGS = [
    ParamConfig("w", 6, (2, 3)),
    ParamConfig("___fc_layer_0__.w0", 784 * 200, (784, 200), learning_rate=0.1 / 3,
                initial_mean=-0.25, initial_std=0.0125, decay_rate=8e-4, is_static=True),
    ParamConfig("bias", 10),
    ParamConfig("big", 2**40 + 3, (2**40 + 3,), learning_rate=float("inf")),
    ParamConfig("nom_ünïcode", 1, (1, 1, 1)),
]


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: c.name)
def test_encode_equals_protobufs_serialization(config):
    message = pb_config(dims=config.dims, **{k: getattr(config, k) for k in KEPT})
    assert config.encode() == message.SerializeToString()
    assert ParamConfig.decode(config.encode()) == config


def test_defaults_are_the_protos():
    ours = ParamConfig.decode(pb_config(name="x", size=4).SerializeToString())
    theirs = PB()
    assert ours == ParamConfig("x", 4)
    for k in KEPT[2:]:
        assert getattr(ours, k) == getattr(theirs, k), k
    assert ours.shape == (1, 4)


def test_decode_skips_unknown_fields_of_every_wire_type():
    message = pb_config(name="conv.w", size=12, dims=(3, 4), learning_rate=2.0, momentum=4.0,
                        initial_strategy=11, initial_smart=True, device=-1, decay_rate_l1=0.5,
                        format="csr", para_id=2**63 + 5, initial_mean=0.5, is_static=True)
    message.update_hooks.add(type="pruning", sparsity_ratio=0.6)
    data = message.SerializeToString()
    # A group (wire types 3 and 4, holding a varint and a 64-bit value) and a 32-bit field:
    # nothing in ParameterConfig uses them, but a reader must step over them.
    group = tag(30, 3) + tag(1, 0) + b"\x96\x01" + tag(2, 1) + b"\x01" * 8 + tag(30, 4)
    fixed32 = tag(31, 5) + b"\x01\x02\x03\x04"
    data = group + data + fixed32
    check = PB()
    check.ParseFromString(data)  # protobuf itself accepts these bytes
    assert check.name == "conv.w"
    assert ParamConfig.decode(data) == ParamConfig(
        "conv.w", 12, (3, 4), learning_rate=2.0, initial_mean=0.5, is_static=True)


def test_decode_packed_dims():
    data = pb_config(PACKED_PB, name="p", size=2 * 300 * 70000, dims=(2, 300, 70000)) \
        .SerializeToString()
    assert data.count(bytes([9 << 3 | 2])) == 1  # really packed
    config = ParamConfig.decode(data)
    assert config.dims == (2, 300, 70000)
    assert config.shape == (2, 300, 70000)


def test_decode_last_value_wins_and_unpacked_and_packed_dims_mix():
    data = (pb_config(name="a", size=6, dims=(2,)).SerializeToString()
            + pb_config(PACKED_PB, name="b", size=6, dims=(3,)).SerializeToString())
    config = ParamConfig.decode(data)
    assert (config.name, config.dims) == ("b", (2, 3))
    message = PB()
    message.ParseFromString(data)
    assert (message.name, list(message.dims)) == ("b", [2, 3])


BAD_CONFIGS = [
    ("truncated varint", bytes([1 << 3 | 2, 1]) + b"w" + bytes([2 << 3, 0x80]), "varint"),
    ("ten-byte varint overflow", bytes([2 << 3]) + b"\xff" * 11, "10 bytes"),
    ("length past the end", bytes([1 << 3 | 2, 50]) + b"abc", "needs 50 bytes"),
    ("no name", bytes([2 << 3, 5]), "no name"),
    ("no size", bytes([1 << 3 | 2, 1]) + b"w", "no size"),
    ("wire type 7", bytes([1 << 3 | 2, 1]) + b"w" + bytes([2 << 3 | 7]), "field tag"),
    ("field 0", bytes([0, 1]), "field tag"),
    ("wrong wire type", bytes([1 << 3 | 2, 1]) + b"w" + bytes([3 << 3, 1]), "wire type"),
    ("bad utf-8", bytes([1 << 3 | 2, 2]) + b"\xff\xfe" + bytes([2 << 3, 1]), "UTF-8"),
    ("open group", tag(30, 3) + tag(1, 0) + b"\x01", "no end tag"),
    ("group closed by another field", tag(30, 3) + tag(29, 4), "closed by an end tag"),
    ("stray end group", tag(30, 4), "closes no group"),
    ("truncated double", bytes([3 << 3 | 1]) + b"\0\0\0", "needs 8 bytes"),
    ("truncated packed dims", bytes([9 << 3 | 2, 2, 0x80, 0x80]), "varint"),
]


@pytest.mark.parametrize("data,needle", [c[1:] for c in BAD_CONFIGS],
                         ids=[c[0] for c in BAD_CONFIGS])
def test_decode_errors(data, needle):
    with pytest.raises(CheckpointError, match=needle) as e:
        ParamConfig.decode(data, "here")
    assert str(e.value).startswith("here: ")


@pytest.mark.parametrize("kwargs,needle", [
    (dict(name="", size=1), "name"),
    (dict(name=3, size=1), "name"),
    (dict(name="w", size=-1), "uint64"),
    (dict(name="w", size=2**64), "uint64"),
    (dict(name="w", size=1.5), "integer"),
    (dict(name="w", size=1, dims=(1.0,)), "integer"),
    (dict(name="w", size=1, dims=5), "sequence"),
    (dict(name="w", size=1, learning_rate="fast"), "learning_rate"),
    (dict(name="\ud800", size=1), "UTF-8"),
])
def test_param_config_checks_its_fields(kwargs, needle):
    with pytest.raises(CheckpointError, match=needle):
        ParamConfig(**kwargs)


def test_param_config_normalises_numpy_values():
    config = ParamConfig("w", np.int64(6), [np.int32(2), 3], learning_rate=np.float32(0.5),
                         is_static=np.bool_(True))
    assert config == ParamConfig("w", 6, (2, 3), learning_rate=0.5, is_static=True)
    assert type(config.size) is int and type(config.is_static) is bool


def test_shape_follows_v2s_get_shape():
    assert ParamConfig("w", 6, (2, 3)).shape == (2, 3)
    assert ParamConfig("w", 6).shape == (1, 6)
    assert ParamConfig("w", 6, (4, 4)).shape == (1, 6)  # dims that do not fit: v2's fallback


# --- reading tars made the v2 way -------------------------------------------------------------

@pytest.mark.parametrize("close", [False, True], ids=["as-v2-wrote-it", "with-end-blocks"])
def test_reads_a_tar_made_the_v2_way(close):
    params = read_bytes(tar_of(v2_members(), close))
    assert list(params) == ["w", "b"]
    w_config, w = params["w"]
    assert w_config == ParamConfig("w", 6, (2, 3), learning_rate=0.5, initial_std=0.1)
    np.testing.assert_array_equal(w, W)
    assert w.dtype == np.float32 and w.flags.c_contiguous and w.flags.writeable
    b_config, b = params["b"]
    assert b_config.is_static and b.shape == (1, 3)
    np.testing.assert_array_equal(b[0], B)


def test_order_is_that_of_the_config_members():
    m = v2_members()
    params = read_bytes(tar_of([m[2], m[0], m[3], m[1]]))
    assert list(params) == ["b", "w"]


def test_values_without_dims_or_with_unfitting_dims_are_one_row():
    members = [("a", values_member(np.arange(4))),
               ("a.protobuf", pb_config(name="a", size=4).SerializeToString()),
               ("c", values_member(np.arange(4))),
               ("c.protobuf", pb_config(name="c", size=4, dims=(3, 3)).SerializeToString())]
    params = read_bytes(tar_of(members))
    assert params["a"][1].shape == (1, 4) and params["c"][1].shape == (1, 4)


def test_reads_paths_gzip_and_streams(tmp_path):
    data = tar_of(v2_members())
    plain = tmp_path / "params.tar"
    plain.write_bytes(data)
    zipped = tmp_path / "params.tar.gz"
    zipped.write_bytes(gzip.compress(data))

    class Stream:  # a pipe: read only
        def __init__(self, data):
            self._f = io.BytesIO(data)

        def read(self, n=-1):
            return self._f.read(n)

    with gzip.open(zipped, "rb") as gz:  # what v2 scripts passed to from_tar
        from_gzip_file = param_file.read(gz)
    for params in (param_file.read(plain), param_file.read(str(plain)), param_file.read(zipped),
                   param_file.read(Stream(data)), from_gzip_file):
        np.testing.assert_array_equal(params["w"][1], W)
        np.testing.assert_array_equal(params["b"][1][0], B)


def test_reads_a_tar_that_starts_mid_file():
    data = tar_of(v2_members())
    f = io.BytesIO(b"x" * 1000 + data)
    f.seek(1000)
    np.testing.assert_array_equal(param_file.read(f)["w"][1], W)


# --- writing ----------------------------------------------------------------------------------

def entries():
    return [(ParamConfig("w", 6, (2, 3), learning_rate=0.5, initial_std=0.1), W),
            (ParamConfig("b", 3, (1, 3), is_static=True), B)]


def test_write_is_byte_for_byte_pythons_tarfile_in_gnu_format():
    ours = io.BytesIO()
    param_file.write(ours, entries())
    members = [("w", values_member(W)),
               ("w.protobuf", pb_config(name="w", size=6, dims=(2, 3), learning_rate=0.5,
                                        initial_mean=0.0, initial_std=0.1, decay_rate=0.0,
                                        is_static=False).SerializeToString()),
               ("b", values_member(B)),
               ("b.protobuf", pb_config(name="b", size=3, dims=(1, 3), learning_rate=1.0,
                                        initial_mean=0.0, initial_std=0.01, decay_rate=0.0,
                                        is_static=True).SerializeToString())]
    assert ours.getvalue() == tar_of(members, close=True)


def test_write_is_read_back_by_tarfile_struct_and_protobuf():
    buf = io.BytesIO()
    param_file.write(buf, entries())
    buf.seek(0)
    with tarfile.open(fileobj=buf, mode="r:") as tar:
        infos = tar.getmembers()
        assert [i.name for i in infos] == ["w", "w.protobuf", "b", "b.protobuf"]
        assert all(i.mtime == 0 and i.mode == 0o644 and i.isfile() for i in infos)
        data = tar.extractfile("w").read()
        assert struct.unpack("IIQ", data[:16]) == (0, 4, 6)
        np.testing.assert_array_equal(np.frombuffer(data[16:], np.float32), W.ravel())
        config = PB()
        config.ParseFromString(tar.extractfile("b.protobuf").read())
        assert (config.name, config.size, list(config.dims)) == ("b", 3, [1, 3])
        assert config.is_static and config.learning_rate == 1.0 and config.initial_std == 0.01


def test_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    long_name = "___fc_layer_" + "x" * 120 + "__.w0"  # over tar's 100 bytes: a GNU long name
    wanted = [
        (ParamConfig(long_name, 12, (3, 4), decay_rate=1e-3), rng.standard_normal((3, 4))),
        (ParamConfig("ünï.bias", 4), np.arange(4, dtype=np.int64)),
        (ParamConfig("strided", 5, (5,)), np.arange(10.0)[::2]),
        (ParamConfig("fortran", 6, (2, 3)), np.asfortranarray(np.arange(6.0).reshape(2, 3))),
        (ParamConfig("empty", 0, (0, 3)), np.zeros((0, 3))),
        (ParamConfig("odd", 3), np.array([np.nan, np.inf, -0.0])),
    ]
    path = tmp_path / "params.tar"
    param_file.save(path, wanted)
    params = param_file.read(path)
    assert list(params) == [c.name for c, _ in wanted]
    for config, values in wanted:
        got_config, got = params[config.name]
        assert got_config == config
        assert got.shape == config.shape and got.dtype == np.float32
        np.testing.assert_array_equal(got.ravel(), np.asarray(values, np.float32).ravel())
    buf = io.BytesIO()
    param_file.save(buf, wanted)
    assert buf.getvalue() == path.read_bytes()


def test_write_takes_a_generator():
    buf = io.BytesIO()
    param_file.write(buf, (e for e in entries()))
    assert list(read_bytes(buf.getvalue())) == ["w", "b"]


@pytest.mark.parametrize("bad,needle", [
    ([(ParamConfig("w", 6), np.zeros(5))], "5 values given"),
    ([(ParamConfig("w", 2), [1, 2]), (ParamConfig("w", 2), [1, 2])], "appears twice"),
    ([(ParamConfig("w.protobuf", 1), [1])], "'.protobuf'"),
    ([(ParamConfig("w", 6, (4, 2)), np.zeros(6))], r"dims \(4, 2\) hold 8"),
    ([(ParamConfig("w", 2), ["a", "b"])], "cannot be converted"),
    ([("w", [1])], "must start with a ParamConfig"),
    ([ParamConfig("w", 1)], "pair"),
])
def test_write_errors(bad, needle):
    with pytest.raises(CheckpointError, match=needle):
        param_file.write(io.BytesIO(), bad)


class Unconvertible:
    def __array__(self, dtype=None, copy=None):
        raise ValueError("the device is gone")


def test_a_failed_save_leaves_the_old_file(tmp_path):
    path = tmp_path / "params.tar"
    param_file.save(path, entries())
    before = path.read_bytes()

    def failing():
        yield ParamConfig("w", 6, (2, 3)), np.ones((2, 3))   # written, then...
        yield ParamConfig("b", 3), Unconvertible()

    with pytest.raises(CheckpointError, match="'b'.*the device is gone"):
        param_file.save(path, failing())
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["params.tar"]  # no temporary left
    np.testing.assert_array_equal(param_file.read(path)["w"][1], W)


# --- damaged files ----------------------------------------------------------------------------

def _pair_boundaries(data):
    """Offsets where a member ends (padded), i.e. where a cut leaves a well-formed tar."""
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tar:
        return [-(-(i.offset_data + i.size) // 512) * 512 for i in tar.getmembers()]


@pytest.mark.parametrize("close", [False, True], ids=["as-v2-wrote-it", "with-end-blocks"])
def test_every_cut_is_caught_but_one_between_parameters(close):
    data = tar_of(v2_members(), close)
    ends = _pair_boundaries(data)
    between, last = ends[1], ends[3]  # after w.protobuf; after b.protobuf
    for cut in range(len(data)):
        if cut == between:
            # Indistinguishable from a v2 file holding only w: no format can tell.
            assert list(read_bytes(data[:cut])) == ["w"]
        elif cut >= last:
            assert list(read_bytes(data[:cut])) == ["w", "b"]  # only end blocks were cut
        else:
            with pytest.raises(CheckpointError) as e:
                read_bytes(data[:cut])
            message = str(e.value)
            assert message.startswith("v2 parameters: <file object>: "), message
            if cut >= 512:  # the first header is whole: the message names a parameter
                assert "'w'" in message or "'b'" in message, (cut, message)


def test_a_cut_file_on_disk_is_named(tmp_path):
    path = tmp_path / "cut.tar"
    path.write_bytes(tar_of(v2_members())[:700])
    with pytest.raises(CheckpointError, match=f"{path}: .*'w'"):
        param_file.read(path)


def _with(index, member):
    members = v2_members()
    members[index] = member
    return members


DAMAGED = [
    ("version 1", _with(0, ("w", values_member(W, version=1))), "version 1"),
    ("8-byte values", _with(0, ("w", values_member(W, width=8))), "8 bytes per value"),
    ("big-endian header", _with(0, ("w", struct.pack(">IIQ", 0, 4, 6) + W.tobytes())),
     "big-endian"),
    ("values cut short", _with(0, ("w", values_member(W.ravel()[:5], count=6))),
     "truncated"),
    ("huge count", _with(0, ("w", values_member(W, count=2**62))), "truncated"),
    ("bytes left over", _with(0, ("w", values_member(W, count=5))), "left over"),
    ("count is not the config's size",
     _with(0, ("w", values_member(W.ravel()[:5]))), "5 values but its config says size 6"),
    ("short header", _with(0, ("w", b"\0" * 10)), "fewer than its 16-byte header"),
    ("no .protobuf", v2_members()[:1] + v2_members()[2:], "no 'w.protobuf'"),
    ("no values", v2_members()[1:], "no 'w' member"),
    ("twice", v2_members() + v2_members()[:2], "appears twice"),
    ("config names another", _with(1, ("w.protobuf", pb_config(name="v", size=6)
                                       .SerializeToString())), "names it 'v'"),
    ("varint cut", _with(1, ("w.protobuf", bytes([1 << 3 | 2, 1]) + b"w" + bytes([2 << 3, 0x86]))),
     "varint"),
    ("length past the end", _with(1, ("w.protobuf", bytes([1 << 3 | 2, 9]) + b"w")),
     "needs 9 bytes"),
    ("empty config", _with(1, ("w.protobuf", b"")), "no name and no size"),
]


@pytest.mark.parametrize("members,needle", [d[1:] for d in DAMAGED], ids=[d[0] for d in DAMAGED])
def test_damaged_parameters_are_named(members, needle):
    with pytest.raises(CheckpointError, match=needle) as e:
        read_bytes(tar_of(members))
    assert "parameter 'w'" in str(e.value)


def test_a_directory_member_is_refused():
    buf = io.BytesIO()
    with tarfile.TarFile(fileobj=buf, mode="w", format=tarfile.GNU_FORMAT) as tar:
        info = tarfile.TarInfo("d")
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    with pytest.raises(CheckpointError, match="'d' is not a plain file"):
        read_bytes(buf.getvalue())


@pytest.mark.parametrize("data,needle", [
    (b"", "empty"),
    (b"this is not a tar file\n" * 40, "not a tar"),
    (tar_of(v2_members()) + b"garbage", "after parameter 'b'"),
    (gzip.compress(tar_of(v2_members()))[:-20], "gzip"),
])
def test_files_that_are_not_parameter_tars(data, needle):
    with pytest.raises(CheckpointError, match=needle):
        read_bytes(data)


def test_missing_file_and_text_mode(tmp_path):
    with pytest.raises(CheckpointError, match="no such file"):
        param_file.read(tmp_path / "nothing.tar")
    path = tmp_path / "params.tar"
    path.write_bytes(tar_of(v2_members()))
    with open(path, encoding="latin-1") as text:
        with pytest.raises(CheckpointError, match="'rb'"):
            param_file.read(text)


def test_random_damage_raises_only_checkpoint_error():
    data = tar_of(v2_members(), close=True)[:4096 + 1024]
    rng = np.random.default_rng(7)
    outcomes = set()
    for _ in range(400):
        damaged = bytearray(data)
        for at in rng.integers(0, len(data), size=int(rng.integers(1, 4))):
            damaged[at] = int(rng.integers(0, 256))
        try:
            read_bytes(bytes(damaged))
            outcomes.add("read")
        except CheckpointError:
            outcomes.add("refused")
    assert outcomes == {"read", "refused"}  # damaged values still read: the format has no sums
