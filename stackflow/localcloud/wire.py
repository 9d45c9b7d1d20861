"""Pulumi's property wire format (google.protobuf.Struct) to plain Python values and back.

The plugins tell the engine they accept neither secrets nor resource references, so the engine
unwraps both before it sends properties and re-marks secret outputs itself. What remains special
is the unknown value of a preview, a sentinel string on the wire and `UNKNOWN` here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from google.protobuf import struct_pb2

from stackflow.localcloud.registry import UNKNOWN, Props

UNKNOWN_WIRE = "04da6b54-80e4-46f7-96ec-b56ff0331ba9"
SIG_KEY = "4dabf18193072939515e22adb298388d"
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return UNKNOWN if value.string_value == UNKNOWN_WIRE else value.string_value
    if kind == "number_value":
        number = value.number_value
        return int(number) if number.is_integer() else number
    if kind == "bool_value":
        return value.bool_value
    if kind == "struct_value":
        fields = value.struct_value.fields
        if SIG_KEY in fields and fields[SIG_KEY].string_value == SECRET_SIG:
            return _from_value(fields["value"])  # a secret the engine sent anyway: its value
        return {k: _from_value(v) for k, v in fields.items()}
    if kind == "list_value":
        return [_from_value(v) for v in value.list_value.values]
    return None


def from_struct(struct: struct_pb2.Struct | None) -> Props:
    """A Struct as a dict; whole numbers become ints, the unknown sentinel becomes UNKNOWN."""
    if struct is None:
        return {}
    return {k: _from_value(v) for k, v in struct.fields.items()}


def _to_wire(value: Any) -> Any:
    if value is UNKNOWN:
        return UNKNOWN_WIRE
    if isinstance(value, Mapping):
        return {str(k): _to_wire(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_to_wire(v) for v in value]
    return value


def to_struct(props: Mapping[str, Any]) -> struct_pb2.Struct:
    """A dict as a Struct (UNKNOWN becomes the engine's unknown sentinel)."""
    struct = struct_pb2.Struct()
    struct.update(_to_wire(props))
    return struct


def contains_unknown(value: Any) -> bool:
    """Whether `value` is, or holds anywhere inside it, an unknown."""
    if value is UNKNOWN:
        return True
    if isinstance(value, Mapping):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(contains_unknown(v) for v in value)
    return False
