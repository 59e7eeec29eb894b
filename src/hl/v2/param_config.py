"""ParamConfig: the part of v2's ``paddle.ParameterConfig`` (proto2) that a parameter file keeps,
encoded and decoded by hand (protobuf_wire.py) without Paddle or generated protobuf classes."""
import dataclasses
import math
import operator

from .. import errors
from .protobuf_wire import (BYTES, DOUBLE, FIXED64, UINT64_END, VARINT, WIRE_NAMES, WireReader,
                            key, varint)

# The ParameterConfig fields ParamConfig keeps: number -> (attribute, kind). One table drives
# both encode (in field-number order, as protobuf serialises) and decode.
_FIELDS = {
    1: ("name", "string"),
    2: ("size", "uint64"),
    3: ("learning_rate", "double"),
    5: ("initial_mean", "double"),
    6: ("initial_std", "double"),
    7: ("decay_rate", "double"),
    9: ("dims", "repeated uint64"),
    18: ("is_static", "bool"),
}
_WIRE_OF_KIND = {"string": BYTES, "uint64": VARINT, "double": FIXED64, "bool": VARINT,
                 "repeated uint64": VARINT}
_REQUIRED = ("name", "size")


def _uint64(value, what):
    try:
        n = operator.index(value)
    except TypeError:
        raise errors.CheckpointError(
            f"ParamConfig: {what} must be an integer, received {value!r}") from None
    if not 0 <= n < UINT64_END:
        raise errors.CheckpointError(f"ParamConfig: {what} must fit in a uint64, received {n}")
    return n


@dataclasses.dataclass(frozen=True)
class ParamConfig:
    """The part of v2's ``paddle.ParameterConfig`` a parameter file needs. Defaults are the
    .proto's. ``shape`` follows v2's ``Parameters.get_shape``."""
    name: str
    size: int
    dims: tuple = ()
    learning_rate: float = 1.0
    initial_mean: float = 0.0
    initial_std: float = 0.01
    decay_rate: float = 0.0
    is_static: bool = False

    def __post_init__(self):
        # Normalise numpy scalars and lists here, so encode and equality see plain values.
        if not isinstance(self.name, str) or not self.name:
            raise errors.CheckpointError(
                f"ParamConfig: name must be a non-empty str, received {self.name!r}")
        try:
            self.name.encode("utf-8")
        except UnicodeEncodeError:
            raise errors.CheckpointError(
                f"ParamConfig: name {self.name!r} cannot be written as UTF-8") from None
        put = object.__setattr__  # frozen dataclass
        put(self, "size", _uint64(self.size, f"size of {self.name!r}"))
        try:
            dims = tuple(self.dims)
        except TypeError:
            raise errors.CheckpointError(f"ParamConfig: dims of {self.name!r} must be a "
                                         f"sequence of integers, received {self.dims!r}") from None
        put(self, "dims", tuple(_uint64(d, f"dims of {self.name!r}") for d in dims))
        for attr in ("learning_rate", "initial_mean", "initial_std", "decay_rate"):
            value = getattr(self, attr)
            try:
                put(self, attr, float(value))
            except (TypeError, ValueError):
                raise errors.CheckpointError(f"ParamConfig: {attr} of {self.name!r} must be a "
                                             f"number, received {value!r}") from None
        put(self, "is_static", bool(self.is_static))

    @property
    def shape(self):
        """``dims`` when it is given and holds ``size`` values, else (1, size), as v2 shaped a
        parameter's values."""
        if self.dims and math.prod(self.dims) == self.size:
            return self.dims
        return (1, self.size)

    def encode(self):
        """The serialized ParameterConfig: every kept field, defaults included (v2's config
        parser set them all), in field-number order; dims unpacked, as proto2 writes them."""
        out = bytearray()
        for field, (attr, kind) in sorted(_FIELDS.items()):
            value = getattr(self, attr)
            if kind == "string":
                raw = value.encode("utf-8")
                out += key(field, BYTES) + varint(len(raw)) + raw
            elif kind == "double":
                out += key(field, FIXED64) + DOUBLE.pack(value)
            elif kind in ("uint64", "bool"):
                out += key(field, VARINT) + varint(int(value))
            else:  # repeated uint64
                for d in value:
                    out += key(field, VARINT) + varint(d)
        return bytes(out)

    @classmethod
    def decode(cls, data, where="ParameterConfig"):
        """Parses a serialized ParameterConfig. Unknown fields of every wire type are skipped;
        dims may be packed or not; a field seen twice keeps its last value (protobuf's rule).
        Raises CheckpointError, its message starting with `where`."""
        reader = WireReader(data, where)
        found, dims = {}, []
        while not reader.done():
            field, wire = reader.key()
            if field not in _FIELDS:
                reader.skip(field, wire)
                continue
            attr, kind = _FIELDS[field]
            if kind == "repeated uint64" and wire == BYTES:  # packed
                packed = WireReader(reader.take(reader.varint(), f"packed {attr}"), where)
                while not packed.done():
                    dims.append(packed.varint())
                continue
            if wire != _WIRE_OF_KIND[kind]:
                raise reader.error(f"field {attr} ({field}) has wire type {WIRE_NAMES[wire]}, "
                                   f"but ParameterConfig stores it as "
                                   f"{WIRE_NAMES[_WIRE_OF_KIND[kind]]}")
            if kind == "string":
                raw = reader.take(reader.varint(), attr)
                try:
                    found[attr] = bytes(raw).decode("utf-8")
                except UnicodeDecodeError:
                    raise reader.error(f"{attr} is not valid UTF-8: {bytes(raw)!r}") from None
            elif kind == "double":
                found[attr] = DOUBLE.unpack(reader.take(8, attr))[0]
            elif kind == "bool":
                found[attr] = reader.varint() != 0
            elif kind == "uint64":
                found[attr] = reader.varint()
            else:
                dims.append(reader.varint())
        missing = [attr for attr in _REQUIRED if attr not in found]
        if missing:
            raise reader.error(f"the config has no {' and no '.join(missing)} (required fields): "
                               f"it is damaged or not a ParameterConfig")
        try:
            return cls(dims=tuple(dims), **found)
        except errors.CheckpointError as e:
            raise reader.error(str(e)) from None
