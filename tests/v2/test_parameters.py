"""paddle.parameters: v2's names and shapes, get/set, and v2's tar files both ways."""
import io
import struct
import tarfile

import numpy as np
import pytest

import hl
import hl.v2 as paddle
from .nets import classifier, classifier_samples
from .test_param_file import PB, pb_config, tar_of, values_member


def conv_net():
    img = paddle.layer.data(name="pixel", type=paddle.data_type.dense_vector(64), height=8,
                            width=8)
    label = paddle.layer.data(name="label", type=paddle.data_type.integer_value(10))
    conv = paddle.networks.simple_img_conv_pool(input=img, filter_size=3, num_filters=4,
                                                num_channel=1, pool_size=2, pool_stride=2,
                                                name="cp")
    bn = paddle.layer.batch_norm(input=conv, name="bn")
    prob = paddle.layer.fc(input=bn, size=10, act=paddle.activation.Softmax(), name="out")
    return prob, paddle.layer.classification_cost(input=prob, label=label)


def test_names_shapes_and_starting_values_are_v2s():
    prob, cost = conv_net()
    params = paddle.parameters.create(cost)
    assert params.names() == ["_cp_conv.w0", "_cp_conv.wbias", "_bn.w0", "_bn.wbias",
                              "_bn.w1", "_bn.w2", "_out.w0", "_out.wbias"]
    shapes = {n: params.get_shape(n) for n in params}
    assert shapes == {"_cp_conv.w0": (1, 36), "_cp_conv.wbias": (4, 1), "_bn.w0": (1, 4),
                      "_bn.wbias": (1, 4), "_bn.w1": (1, 4), "_bn.w2": (1, 4),
                      "_out.w0": (36, 10), "_out.wbias": (1, 10)}
    assert np.all(params.get("_bn.w0") == 1) and np.all(params.get("_out.wbias") == 0)


def test_smart_initialisation_std():
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(400))
    h = paddle.layer.fc(input=x, size=300)
    params = paddle.parameters.create(h)
    w = params.get(params.names()[0])
    assert abs(w.std() - 1 / np.sqrt(400)) < 0.002 and abs(w.mean()) < 0.002
    x = paddle.layer.data(name="x", type=paddle.data_type.dense_vector(400))
    a = paddle.attr.Param(initial_std=0.5, initial_mean=2.0, name="custom")
    h = paddle.layer.fc(input=x, size=300, param_attr=a)
    w = paddle.parameters.create(h).get("custom")
    assert abs(w.std() - 0.5) < 0.01 and abs(w.mean() - 2.0) < 0.01


def test_get_returns_a_copy_and_set_writes_in_place_with_its_shape_checked():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    name = params.names()[0]
    w = params.get(name)
    w[...] = 7
    assert not np.all(params.get(name) == 7)
    params[name] = np.full(params.get_shape(name), 0.25)
    assert np.all(params[name] == 0.25) and params[name].dtype == np.float32
    with pytest.raises(hl.errors.ShapeError, match=name):
        params.set(name, np.zeros((1, params[name].size)))
    with pytest.raises(hl.errors.ValueError, match="no parameter"):
        params.get("nope")
    assert params.has_key(name) and name in params and set(params.keys()) == set(params)


def test_tar_round_trip_and_infer_from_the_loaded_parameters(tmp_path):
    prob, cost = conv_net()
    params = paddle.parameters.create(cost)
    path = tmp_path / "p.tar"
    with open(path, "wb") as f:
        params.to_tar(f)
    with open(path, "rb") as f:
        loaded = paddle.parameters.Parameters.from_tar(f)
    assert loaded.names() == params.names()
    for n in params:
        np.testing.assert_array_equal(loaded.get(n), params.get(n))
    samples = [(np.random.default_rng(0).normal(size=64).astype(np.float32),)] * 3
    np.testing.assert_array_equal(paddle.infer(output_layer=prob, parameters=loaded,
                                               input=samples),
                                  paddle.infer(output_layer=prob, parameters=params,
                                               input=samples))


def test_what_we_write_is_v2s_layout():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    buf = io.BytesIO()
    params.to_tar(buf)
    tar = tarfile.open(fileobj=io.BytesIO(buf.getvalue()))
    names = tar.getnames()
    assert names == [m for n in params.names() for m in (n, n + ".protobuf")]
    for n in params.names():
        data = tar.extractfile(n).read()
        version, width, count = struct.unpack("IIQ", data[:16])
        assert (version, width, count) == (0, 4, params.get(n).size)
        np.testing.assert_array_equal(np.frombuffer(data[16:], np.float32),
                                      params.get(n).reshape(-1))
        config = PB.FromString(tar.extractfile(n + ".protobuf").read())
        assert config.name == n and config.size == params.get(n).size
        assert tuple(config.dims) == params.get_shape(n)


def test_a_tar_built_the_v2_way_loads_into_a_network_and_init_from_tar_excludes():
    _, _, prob, cost = classifier(dim=6, classes=4, hidden=8)
    params = paddle.parameters.create(cost)
    names = params.names()
    rng = np.random.default_rng(5)
    members, values = [], {}
    for n in names:
        v = rng.normal(size=params.get_shape(n)).astype(np.float32)
        values[n] = v
        members += [(n, values_member(v)),
                    (n + ".protobuf", pb_config(name=n, size=v.size, dims=v.shape,
                                                momentum=0.9).SerializeToString())]
    blob = tar_of(members)  # not closed, as v2 left its files
    target = paddle.parameters.create(cost)
    keep = target.get(names[0])
    target.init_from_tar(io.BytesIO(blob), exclude_params=[names[0]])
    np.testing.assert_array_equal(target.get(names[0]), keep)
    for n in names[1:]:
        np.testing.assert_array_equal(target.get(n), values[n])
    loaded = paddle.parameters.Parameters.from_tar(io.BytesIO(blob))
    samples = classifier_samples(4)
    out = paddle.infer(output_layer=prob, parameters=loaded, input=samples)
    xs = np.stack([s[0] for s in samples])
    h = np.tanh(xs @ values[names[0]] + values[names[1]])
    z = h @ values[names[2]] + values[names[3]]
    np.testing.assert_allclose(out, np.exp(z) / np.exp(z).sum(1, keepdims=True), rtol=1e-5)


def test_a_truncated_tar_or_a_missing_parameter_is_a_clear_error():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    buf = io.BytesIO()
    params.to_tar(buf)
    blob = buf.getvalue()
    with pytest.raises(hl.errors.CheckpointError):
        paddle.parameters.Parameters.from_tar(io.BytesIO(blob[:700]))
    before = {n: params.get(n) for n in params}
    with pytest.raises(hl.errors.CheckpointError):
        params.init_from_tar(io.BytesIO(blob[:2000]))
    assert all(np.array_equal(before[n], params.get(n)) for n in params)
    partial = paddle.parameters.Parameters.from_tar(io.BytesIO(tar_of(
        [(params.names()[0], values_member(params.get(params.names()[0]))),
         (params.names()[0] + ".protobuf",
          pb_config(name=params.names()[0], size=params.get(params.names()[0]).size)
          .SerializeToString())], close=True)))
    with pytest.raises(hl.errors.ValueError, match=params.names()[1].replace(".", r"\.")):
        paddle.infer(output_layer=prob, parameters=partial, input=classifier_samples(2))


def test_a_parameter_of_the_wrong_size_in_a_tar_is_refused_when_used():
    _, _, prob, cost = classifier()
    params = paddle.parameters.create(cost)
    n = params.names()[0]
    blob = tar_of([(n, values_member(np.zeros(5, np.float32))),
                   (n + ".protobuf", pb_config(name=n, size=5).SerializeToString())])
    with pytest.raises(hl.errors.ShapeError, match="5"):
        params.init_from_tar(io.BytesIO(blob))
