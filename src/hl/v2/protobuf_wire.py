"""protobuf's wire format, the little of it v2's parameter files need: varints, field keys, and
a reader that walks a message (skipping what it does not know) and raises CheckpointError,
never IndexError or struct.error, on bytes that end early or make no sense."""
import struct

from .. import errors

UINT64_END = 1 << 64

VARINT, FIXED64, BYTES, START_GROUP, END_GROUP, FIXED32 = range(6)
WIRE_NAMES = {VARINT: "varint", FIXED64: "64-bit", BYTES: "length-delimited",
               START_GROUP: "start-group", END_GROUP: "end-group", FIXED32: "32-bit"}
DOUBLE = struct.Struct("<d")
MAX_GROUP_DEPTH = 64            # protobuf's own parsers stop at 100; this is plenty


def varint(n):
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def key(field, wire):
    return varint(field << 3 | wire)


class WireReader:
    """Reads protobuf wire-format values from `data`, raising CheckpointError (never IndexError
    or struct.error) when the bytes end early or make no sense."""

    def __init__(self, data, where):
        self.data, self.pos, self.where = memoryview(data), 0, where

    def error(self, problem):
        return errors.CheckpointError(f"{self.where}: {problem}")

    def done(self):
        return self.pos >= len(self.data)

    def varint(self):
        result = shift = 0
        start = self.pos
        while True:
            if self.pos >= len(self.data):
                raise self.error(f"the config is truncated inside a varint at byte {start}")
            byte = self.data[self.pos]
            self.pos += 1
            result |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return result & (UINT64_END - 1)
            shift += 7
            if shift >= 70:
                raise self.error(f"a varint at byte {start} runs past 10 bytes")

    def take(self, n, what):
        if n > len(self.data) - self.pos:
            raise self.error(f"{what} at byte {self.pos} needs {n} bytes but only "
                             f"{len(self.data) - self.pos} are left: the config is truncated "
                             f"or damaged")
        chunk = self.data[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def key(self):
        start = self.pos
        key = self.varint()
        field, wire = key >> 3, key & 7
        if field == 0 or wire not in WIRE_NAMES:
            raise self.error(f"byte {start} holds no valid field tag (field {field}, wire type "
                             f"{wire}): the config is damaged")
        return field, wire

    def skip(self, field, wire, depth=0):
        """Steps over one field this module does not keep, of any wire type."""
        if wire == VARINT:
            self.varint()
        elif wire == FIXED64:
            self.take(8, f"field {field}")
        elif wire == FIXED32:
            self.take(4, f"field {field}")
        elif wire == BYTES:
            self.take(self.varint(), f"field {field}")
        elif wire == START_GROUP:
            if depth >= MAX_GROUP_DEPTH:
                raise self.error(f"groups nest deeper than {MAX_GROUP_DEPTH}")
            while True:
                if self.done():
                    raise self.error(f"group field {field} has no end tag: the config is "
                                     f"truncated")
                inner, inner_wire = self.key()
                if inner_wire == END_GROUP:
                    if inner != field:
                        raise self.error(f"group field {field} is closed by an end tag of "
                                         f"field {inner}")
                    return
                self.skip(inner, inner_wire, depth + 1)
        else:  # an end-group tag with no group open
            raise self.error(f"an end-group tag of field {field} closes no group")
