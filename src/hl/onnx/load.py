"""Reading an ONNX model: from a path (with its external data, which must stay inside the
model's folder) or a ModelProto; checking it with onnx.checker; running shape inference.
Every failure is an hl error naming the file or the problem: ``onnx_errors`` turns whatever
else a malformed file provokes (bad UTF-8 in a name, a division by a zero attribute, data that
does not fit its dims) into an ONNXError naming where it happened."""
import contextlib
import os

import onnx

from .. import errors
from . import weights_file


# What a malformed model can make Python or numpy raise inside hl's importer and handlers.
MALFORMED = (UnicodeError, ArithmeticError, ValueError, TypeError, IndexError, KeyError,
             AttributeError, RecursionError, MemoryError)


@contextlib.contextmanager
def onnx_errors(where):
    """Re-raises a non-hl exception from reading or running a model as an ONNXError."""
    try:
        yield
    except errors.HLError:
        raise
    except MALFORMED as e:
        raise errors.ONNXError(f"{where}: the model is malformed ({type(e).__name__}: "
                               f"{str(e)[:300]})") from None


def load_model_and_weights(model, check=True, direct=True, for_training=False):
    """(a checked ModelProto with its external data loaded, {initializer name: hl tensor},
    its skeleton).
    From a path with ``direct``, the large initializers are read from the file straight into
    CPU hl tensors (weights_file.py) and the ModelProto holds no data for them; otherwise the
    dict is empty and the ModelProto holds every initializer's data. ``for_training``: the
    tensors read will be trained (weights_file.read)."""
    path, weights = None, {}
    if isinstance(model, (str, bytes, os.PathLike)) and not isinstance(model, bytes):
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise errors.ONNXError(f"ONNX model file {path!r} does not exist")
        read = weights_file.read(path, for_training) if direct else None
        if read is not None:
            model, weights = read
        else:
            try:
                model = onnx.load(path, load_external_data=False)
            except Exception as e:  # protobuf's DecodeError and friends
                raise errors.ONNXError(f"{path!r} is not a readable ONNX model: {e}") \
                    from None
        _load_external_data(model, os.path.dirname(os.path.abspath(path)), path)
    elif isinstance(model, bytes):
        try:
            model = onnx.load_from_string(model)
        except Exception as e:
            raise errors.ONNXError(f"these bytes are not a readable ONNX model: {e}") from None
    elif not isinstance(model, onnx.ModelProto):
        raise errors.ONNXError(f"expected an onnx.ModelProto or a path, got "
                               f"{type(model).__name__}")
    sk = skeleton(model)  # for the checker here and shape inference later (built once)
    if check:
        _check(sk, path)
    return model, weights, sk


def without_initializers(model):
    """A copy of the model with everything but its initializers (copied field by field, so
    the weights are never copied)."""
    out = onnx.ModelProto()
    _copy_fields(out, model, skip=("graph",))
    _copy_fields(out.graph, model.graph, skip=("initializer", "sparse_initializer"))
    return out


def skeleton(model):
    """The model without its weights' data: each initializer becomes a graph input of its
    type and shape. onnx.checker and shape inference serialise whatever they are given, and
    for a 650 MB GPT-2 that took 12 s; they need the types and shapes only. (The data itself
    is checked as each initializer is read, in graph.py.)"""
    sk = without_initializers(model)
    declared = {v.name for v in model.graph.input}
    for t in model.graph.initializer:
        if t.name not in declared:
            sk.graph.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, t.dims))
    for sp in model.graph.sparse_initializer:
        if sp.values.name not in declared:
            sk.graph.input.append(onnx.helper.make_tensor_value_info(
                sp.values.name, sp.values.data_type, sp.dims))
    return sk


def _copy_fields(dst, src, skip):
    for field, value in src.ListFields():
        if field.name in skip:
            continue
        repeated = field.is_repeated if hasattr(field, "is_repeated") else \
            field.label == field.LABEL_REPEATED  # protobuf < 5.28 spells it label
        if repeated:
            getattr(dst, field.name).extend(value)
        elif field.message_type is not None:
            getattr(dst, field.name).CopyFrom(value)
        else:
            setattr(dst, field.name, value)


def _load_external_data(model, base_dir, path):
    """Resolves each external tensor's location inside ``base_dir`` and refuses any that
    leaves it (an absolute path, '..', a symlink out)."""
    from onnx.external_data_helper import _get_all_tensors, uses_external_data
    base = os.path.realpath(base_dir)
    tensors = [t for t in _get_all_tensors(model) if uses_external_data(t)]
    for t in tensors:
        info = {e.key: e.value for e in t.external_data}
        location = info.get("location", "")
        target = os.path.realpath(os.path.join(base, location))
        if os.path.isabs(location) or os.path.commonpath([base, target]) != base:
            raise errors.ONNXError(
                f"{path!r}: tensor {t.name!r} keeps its data at {location!r}, outside the "
                f"model's folder {base_dir!r}; hl reads external data only from beside the "
                f"model")
        if not os.path.isfile(target):
            raise errors.ONNXError(f"{path!r}: tensor {t.name!r} keeps its data in "
                                   f"{location!r}, which does not exist")
        offset = int(info.get("offset", 0) or 0)
        length = info.get("length")
        size = os.path.getsize(target)
        if offset < 0 or offset > size or (length is not None and offset + int(length) > size):
            raise errors.ONNXError(f"{path!r}: tensor {t.name!r} asks for bytes "
                                   f"{offset}..{offset + int(length or 0)} of {location!r}, "
                                   f"which holds {size}")
    if tensors:
        try:
            onnx.load_external_data_for_model(model, base)
        except Exception as e:
            raise errors.ONNXError(f"{path!r}: its external data could not be read: {e}") \
                from None


def _check(model, path):
    try:
        # The full check needs the weights in memory (they are, by now) unless the model
        # is over protobuf's 2 GB limit, which only the path form can check.
        if model.ByteSize() < 2**31 - 1 or path is None:
            onnx.checker.check_model(model)
        else:
            onnx.checker.check_model(path)
    except onnx.checker.ValidationError as e:
        where = f"{path!r}" if path else "the model"
        first = str(e).strip().splitlines()[0] if str(e).strip() else repr(e)
        raise errors.ONNXError(f"{where} fails onnx.checker: {first}") from None


def opsets(model):
    """{domain: version} of the model's opset imports ('' for the default domain)."""
    out = {}
    for o in model.opset_import:
        d = o.domain if o.domain not in ("ai.onnx",) else ""
        out[d] = int(o.version)
    if "" not in out:
        out[""] = onnx.defs.onnx_opset_version()
    return out


def inferred_value_info(model, sk=None):
    """The ValueInfoProtos onnx's shape inference finds for the model's intermediate values
    (an empty list where it cannot infer; hl runs the graph either way). ``sk``: the model's
    skeleton, if made already."""
    try:
        return list(onnx.shape_inference.infer_shapes(sk if sk is not None else skeleton(model))
                    .graph.value_info)
    except Exception:  # noqa: BLE001 - inference is advisory here
        return []
